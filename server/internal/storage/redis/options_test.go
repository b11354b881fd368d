package redis

import (
	"context"
	"log/slog"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseURI(t *testing.T) {
	def := clientConfig{dialTimeout: defaultDialTimeout, readTimeout: defaultReadTimeout, writeTimeout: defaultWriteTimeout}
	with := func(f func(c *clientConfig)) clientConfig {
		c := def
		f(&c)
		return c
	}
	cases := []struct {
		uri     string
		want    clientConfig
		wantErr bool
	}{
		{"redis://127.0.0.1:6379/0", with(func(c *clientConfig) { c.addrs = []string{"127.0.0.1:6379"} }), false},
		{"redis://cache", with(func(c *clientConfig) { c.addrs = []string{"cache:6379"} }), false},
		{"redis://:secret@h:7000/3", with(func(c *clientConfig) {
			c.addrs, c.password, c.db = []string{"h:7000"}, "secret", 3
		}), false},
		{"redis://app:pw@h/1?dial_timeout=250ms&read_timeout=1&pool_size=32", with(func(c *clientConfig) {
			c.addrs, c.username, c.password, c.db = []string{"h:6379"}, "app", "pw", 1
			c.dialTimeout, c.readTimeout, c.poolSize = 250*time.Millisecond, time.Second, 32
		}), false},
		{"rediss://h:6380", with(func(c *clientConfig) { c.addrs, c.tls = []string{"h:6380"}, true }), false},
		{"redis://h1:26379,h2:26379?master=mymaster", with(func(c *clientConfig) {
			c.addrs, c.master = []string{"h1:26379", "h2:26379"}, "mymaster"
		}), false},
		{"redis://:pw@s1,s2:5000/2?master=m&sentinel_password=sp", with(func(c *clientConfig) {
			c.addrs, c.master, c.password, c.db, c.sentinelPassword = []string{"s1:26379", "s2:5000"}, "m", "pw", 2, "sp"
		}), false},
		{"redis://s1,s2?master=m&db=4", with(func(c *clientConfig) {
			c.addrs, c.master, c.db = []string{"s1:26379", "s2:26379"}, "m", 4
		}), false},
		{"redis://h/5?db=5", with(func(c *clientConfig) { c.addrs, c.db = []string{"h:6379"}, 5 }), false},
		{"redis://h?layout=stream", with(func(c *clientConfig) { c.addrs = []string{"h:6379"} }), false},
		{"redis://h?layout=list", clientConfig{}, true},
		{"redis://h?layout=hash", clientConfig{}, true}, // retired
		{"redis://h/5?db=6", clientConfig{}, true},
		{"redis://h?db=-1", clientConfig{}, true},
		{"redis://h/x", clientConfig{}, true},
		{"redis://h/-1", clientConfig{}, true},
		{"redis://h1,h2", clientConfig{}, true},
		{"redis://h?nosuch=1", clientConfig{}, true},
		{"redis://h?dial_timeout=soon", clientConfig{}, true},
		{"redis://h?read_timeout=-1", clientConfig{}, true},
		{"redis://h?pool_size=0", clientConfig{}, true},
		{"http://h", clientConfig{}, true},
		{"redis://h?tls_ca_file=/etc/ssl/ca.pem", clientConfig{}, true},  // CA without TLS
		{"rediss://h?tls_ca_file=/no/such/ca.pem", clientConfig{}, true}, // unreadable CA
	}
	for _, tc := range cases {
		u, err := url.Parse(tc.uri)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseURI(u)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%s: no error, want one", tc.uri)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.uri, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.uri, got, tc.want)
		}
	}
}

// A shard URI naming the retired hash layout is refused, and says why.
func TestParseURIRefusesHashLayout(t *testing.T) {
	u, _ := url.Parse("redis://h?layout=hash")
	_, err := parseURI(u)
	if err == nil || !strings.Contains(err.Error(), `option layout="hash"`) || !strings.Contains(err.Error(), "retired") {
		t.Fatalf("parseURI(%s) = %v, want the retired layout refused", u, err)
	}
}

func TestScopesAreInjective(t *testing.T) {
	seen := map[string][2]string{}
	names := []string{"", "a", "b", "a:b", "1:a", "1", "}", "{", "a}{b", ":", "2:ab"}
	for _, p := range names {
		for _, q := range names {
			s := scope(queueRef(p, q))
			if prev, dup := seen[s]; dup {
				t.Errorf("scope %q shared by %q and %q", s, prev, [2]string{p, q})
			}
			seen[s] = [2]string{p, q}
		}
	}
}

func TestEscapeGlob(t *testing.T) {
	if got, want := escapeGlob(`a*b?[c]\d`), `a\*b\?\[c\]\\d`; got != want {
		t.Errorf("escapeGlob = %q, want %q", got, want)
	}
}

func TestSetLoggerRoutesClientMessages(t *testing.T) {
	var buf strings.Builder
	SetLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { SetLogger(slog.New(slog.DiscardHandler)) })
	u, _ := url.Parse("redis://127.0.0.1:1/0?dial_timeout=100ms") // nothing listens on port 1
	cfg, err := parseURI(u)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.client()
	defer c.Close()
	for i := 0; i < 3; i++ {
		_ = c.Ping(context.Background()).Err()
	}
	if !strings.Contains(buf.String(), "component=go-redis") {
		t.Errorf("failed dials were not logged through slog: %q", buf.String())
	}
}
