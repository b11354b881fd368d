package signedurl

import (
	"math/rand"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// Signatures computed by zaqar.common.urls.create_signed_url of Zaqar
// 23.0.1 (python -c 'from zaqar.common import urls; print(urls.create_signed_url(...))').
var zaqarVectors = []struct {
	key, project, expires string
	paths, methods        []string
	signature             string
}{
	{"s3cr3t", "anchor-project", "2099-01-01T00:00:00",
		[]string{"/v2/queues/sq/messages", "/v2/queues/sq/claims", "/v2/queues/sq/subscriptions"},
		[]string{"POST", "GET"}, "045fb431b29b378953f4cd32360a26f4ea114ac727094f016cf762392f0dd0d4"},
	{"another key", "p", "2030-06-30T23:59:59",
		[]string{"/v2/queues/q/messages"}, []string{"GET"}, "e6489b2e5356da1646e4ad4e26a49f01774c853a88d1e3e514346bfcd30f80a4"},
	{"k", "tenant-é", "2100-02-28T01:02:03",
		[]string{"/v2/queues/x_y-z/subscriptions"}, []string{"DELETE", "PUT", "HEAD"}, "3ff7be227095ac5bcfbde9e802f4098c5598cbc011351d6eaf1cb311e58b912b"},
}

func TestSignMatchesZaqar(t *testing.T) {
	for _, v := range zaqarVectors {
		exp, err := ParseExpires(v.expires)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Sign([]byte(v.key), v.paths, v.methods, v.project, exp, now)
		if err != nil {
			t.Fatal(err)
		}
		if s.Signature != v.signature {
			t.Errorf("%v: signature %s, Zaqar's %s", v.paths, s.Signature, v.signature)
		}
		if s.Expires != v.expires {
			t.Errorf("expires %q, want %q", s.Expires, v.expires)
		}
		if !Verify([]byte(v.key), v.paths, v.methods, v.project, v.expires, v.signature, now) {
			t.Errorf("%v: Zaqar's signature does not verify", v.paths)
		}
	}
}

func TestSignDefaults(t *testing.T) {
	s, err := Sign([]byte("k"), []string{"/b", "/a"}, nil, "p", time.Time{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Paths, ",") != "/a,/b" || strings.Join(s.Methods, ",") != "GET" {
		t.Errorf("paths %v methods %v: want sorted paths and GET", s.Paths, s.Methods)
	}
	if s.Expires != "2026-11-24T12:00:00" {
		t.Errorf("default expiry %s, want a day later", s.Expires)
	}
	for _, tc := range []struct {
		key   string
		paths []string
		exp   time.Time
		want  error
	}{
		{"", []string{"/a"}, time.Time{}, ErrNoKey},
		{"k", nil, time.Time{}, ErrNoPaths},
		{"k", []string{"/a"}, now, ErrExpired},
		{"k", []string{"/a"}, now.Add(-time.Hour), ErrExpired},
	} {
		if _, err := Sign([]byte(tc.key), tc.paths, nil, "p", tc.exp, now); err != tc.want {
			t.Errorf("Sign(%q, %v, %v): %v, want %v", tc.key, tc.paths, tc.exp, err, tc.want)
		}
	}
}

// TestVerifyProperties: a signature verifies for any order of its paths
// and methods, and for nothing else: changing one character of any field,
// the key, or letting it expire makes it fail.
func TestVerifyProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	word := func() string {
		const alpha = "abcdefghijklmnopqrstuvwxyz0123456789_-/"
		b := make([]byte, 1+rng.Intn(12))
		for i := range b {
			b[i] = alpha[rng.Intn(len(alpha))]
		}
		return string(b)
	}
	for i := 0; i < 300; i++ {
		key := []byte(word())
		paths := make([]string, 1+rng.Intn(3))
		for j := range paths {
			paths[j] = "/v2/queues/" + word()
		}
		methods := []string{}
		for _, m := range Methods {
			if rng.Intn(2) == 0 {
				methods = append(methods, m)
			}
		}
		if len(methods) == 0 {
			methods = []string{"GET"}
		}
		project := word()
		exp := now.Add(time.Duration(1+rng.Intn(1e6)) * time.Second)
		s, err := Sign(key, paths, methods, project, exp, now)
		if err != nil {
			t.Fatal(err)
		}
		shuffled := func(in []string) []string {
			out := append([]string(nil), in...)
			rng.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
			return out
		}
		if !Verify(key, shuffled(paths), shuffled(methods), project, s.Expires, s.Signature, now) {
			t.Fatalf("case %d: own signature does not verify", i)
		}
		if Verify(key, paths, methods, project, s.Expires, s.Signature, exp) {
			t.Fatalf("case %d: verifies at its expiry", i)
		}
		flip := func(x string) string {
			b := []byte(x)
			k := rng.Intn(len(b))
			b[k] ^= 1 + byte(rng.Intn(7))
			return string(b)
		}
		p2 := append([]string(nil), paths...)
		p2[rng.Intn(len(p2))] = flip(p2[0])
		m2 := append([]string(nil), methods...)
		m2[0] = flip(m2[0])
		later, _ := ParseExpires(s.Expires)
		tampered := map[string]bool{
			"key":       Verify([]byte(flip(string(key))), paths, methods, project, s.Expires, s.Signature, now),
			"path":      Verify(key, p2, methods, project, s.Expires, s.Signature, now),
			"extrapath": Verify(key, append(paths, "/v2/queues/other"), methods, project, s.Expires, s.Signature, now),
			"method":    Verify(key, paths, m2, project, s.Expires, s.Signature, now),
			"project":   Verify(key, paths, methods, flip(project), s.Expires, s.Signature, now),
			"expires":   Verify(key, paths, methods, project, later.Add(time.Second).Format(ExpiresLayout), s.Signature, now),
			"signature": Verify(key, paths, methods, project, s.Expires, flip(s.Signature), now),
			// Zaqar compares the text: the same bytes in upper case are
			// not the signature it issued.
			"case": Verify(key, paths, methods, project, s.Expires, strings.ToUpper(s.Signature), now) &&
				strings.ToUpper(s.Signature) != s.Signature,
		}
		for what, ok := range tampered {
			if ok {
				t.Fatalf("case %d: verifies with a changed %s", i, what)
			}
		}
	}
}

func TestParseExpires(t *testing.T) {
	utc := func(y, mo, d, h, mi, s int) time.Time { return time.Date(y, time.Month(mo), d, h, mi, s, 0, time.UTC) }
	good := map[string]time.Time{
		"2099-01-01T00:00:00":        utc(2099, 1, 1, 0, 0, 0),
		"2099-01-01T00:00:00Z":       utc(2099, 1, 1, 0, 0, 0),
		"2099-01-01T02:30:00+02:30":  utc(2099, 1, 1, 0, 0, 0),
		"2099-01-01T00:00:00-0100":   utc(2099, 1, 1, 1, 0, 0),
		"2099-01-01 10:11:12":        utc(2099, 1, 1, 10, 11, 12),
		"2099-01-01T10:11":           utc(2099, 1, 1, 10, 11, 0),
		"2099-01-01":                 utc(2099, 1, 1, 0, 0, 0),
		"20990101T101112":            utc(2099, 1, 1, 10, 11, 12),
		"2099-01-01T00:00:00.999999": utc(2099, 1, 1, 0, 0, 0).Add(999999 * time.Microsecond),
	}
	for in, want := range good {
		got, err := ParseExpires(in)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseExpires(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "1700000000", "tomorrow", "2099-13-01T00:00:00", "2099-02-30",
		"2099-01-01T25:00:00", "2099-01-01T00:00:00+", "2099-01-01T00:00:00 junk"} {
		if got, err := ParseExpires(in); err == nil {
			t.Errorf("ParseExpires(%q) = %v, want an error", in, got)
		}
	}
	if _, err := ParseExpires("1700000000"); err == nil || !strings.Contains(err.Error(), "not integer value: 1700000000") {
		t.Errorf("integer expiry: %v", err)
	}
}

func TestAllows(t *testing.T) {
	paths := []string{"/v2/queues/q/messages", "/v2/queues/q/claims"}
	for path, want := range map[string]bool{
		"/v2/queues/q/messages":      true,
		"/v2/queues/q/messages/abc":  true,
		"/v2/queues/q/claims/c1":     true,
		"/v2/queues/q/messagesX":     false,
		"/v2/queues/q":               false,
		"/v2/queues/q/subscriptions": false,
		"/v2/queues/qq/messages":     false,
		"/x/v2/queues/q/messages":    false,
		"/v2/queues/q/share":         false,
	} {
		if got := Allows(paths, path); got != want {
			t.Errorf("Allows(%s) = %v, want %v", path, got, want)
		}
	}
	if Allows([]string{""}, "/v2/queues/q/messages") {
		t.Error("an empty signed path allows everything")
	}
}
