package catalog

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"sluice.dev/server/internal/storage"
	redisdrv "sluice.dev/server/internal/storage/redis"
	"sluice.dev/server/internal/testutil"
)

// TestSameRedisClientAsPool: a URI opened as catalog gets the client options
// it gets as a pool (the store driver's), for every URI form: timeouts, no
// command retries (a retried script could apply twice), pool size, auth,
// database, TLS with tls_ca_file, Sentinel. Nothing is dialled.
func TestSameRedisClientAsPool(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	testutil.NewCA(t).WriteCert(t, ca)
	caQ := url.QueryEscape(ca)
	hosts := []string{"127.0.0.1:1", "cache", "[::1]:7000"}
	auths := []string{"", ":pw@", "app:pw@"}
	dbs := []string{"", "/0", "/3"}
	opts := []string{"", "dial_timeout=250ms", "read_timeout=1&write_timeout=500ms", "pool_size=7"}
	var uris []string
	for i, h := range hosts {
		for j, a := range auths {
			for k, db := range dbs {
				o := opts[(i+j+k)%len(opts)]
				uris = append(uris, "redis://"+a+h+db+"?"+o, "rediss://"+a+h+db+"?tls_ca_file="+caQ+"&"+o)
			}
		}
	}
	uris = append(uris,
		"redis://:pw@s1:26379,s2:5000/2?master=m&sentinel_password=sp&sentinel_username=su",
		"redis://s1,s2?master=m&db=4&read_timeout=3s", // the catalog's documented Sentinel form
		"rediss://s1?master=m&tls_ca_file="+caQ)
	for _, uri := range uris {
		u, err := url.Parse(uri)
		if err != nil {
			t.Fatal(err)
		}
		st, err := newRedisStore(u)
		if err != nil {
			t.Errorf("%s: catalog refused it: %v", uri, err)
			continue
		}
		d, err := redisdrv.Open(context.Background(), u, storage.Options{})
		if err != nil {
			t.Errorf("%s: driver refused it: %v", uri, err)
			st.Close()
			continue
		}
		cat, pool := clientOptions(st.c.(*goredis.Client)), clientOptions(d.Client())
		if cat != pool {
			t.Errorf("%s:\ncatalog %+v\npool    %+v", uri, cat, pool)
		}
		// go-redis keeps -1 (no retries) as 0 once the client is built;
		// its own default would be 3.
		if cat.maxRetries != 0 {
			t.Errorf("%s: the catalog retries commands (%d)", uri, cat.maxRetries)
		}
		if u.Scheme == "rediss" && !cat.trustsCA {
			t.Errorf("%s: tls_ca_file not trusted", uri)
		}
		st.Close()
		d.Close()
	}
}

// TestSameURIRefusals: what the drivers refuse, the catalog refuses too
// (unknown options, several hosts without Sentinel, a CA without TLS, a
// MongoDB option the client cannot take), as Invalid.
func TestSameURIRefusals(t *testing.T) {
	for _, uri := range []string{
		"redis://h?nosuch=1", "redis://h1,h2", "redis://h/x", "redis://h?pool_size=0",
		"redis://h?tls_ca_file=/x", "rediss://h?tls_ca_file=/no/such/ca.pem",
		"redis://h/1?master=m&db=2", "redis://h?dial_timeout=soon",
		"mongodb://h/q?journal=maybe",
	} {
		if st, err := OpenStore(context.Background(), uri); err == nil || !storage.Is(err, storage.Invalid) {
			if st != nil {
				st.Close()
			}
			t.Errorf("%s: catalog opened it or said %v, want Invalid", uri, err)
		}
		if _, err := storage.Open(context.Background(), uri, storage.Options{}); err == nil {
			t.Errorf("%s: driver accepted it", uri)
		}
	}
}

// redisClientView is what decides how a client behaves, comparable.
type redisClientView struct {
	addr, user, password               string
	db, protocol, maxRetries, poolSize int
	dialerRetries                      int
	dial, read, write                  time.Duration
	disableIdentity, tls, trustsCA     bool
	serverName                         string
}

func clientOptions(c *goredis.Client) redisClientView {
	o := c.Options()
	v := redisClientView{
		addr: o.Addr, user: o.Username, password: o.Password, db: o.DB, protocol: o.Protocol,
		maxRetries: o.MaxRetries, poolSize: o.PoolSize, dialerRetries: o.DialerRetries,
		dial: o.DialTimeout, read: o.ReadTimeout, write: o.WriteTimeout, disableIdentity: o.DisableIdentity,
	}
	if o.TLSConfig != nil {
		v.tls, v.trustsCA, v.serverName = true, o.TLSConfig.RootCAs != nil, o.TLSConfig.ServerName
	}
	return v
}

// TestCatalogBehindSentinelWithAuth: a Sentinel that requires its own
// password (sentinel_password) serves the catalog as it serves a pool.
func TestCatalogBehindSentinelWithAuth(t *testing.T) {
	ctx := context.Background()
	master := testutil.StartRedis(t, testutil.RedisOptions{})
	sentinel := testutil.StartSentinelAuth(t, master, "mymaster", "s3cret")
	st, err := OpenStore(ctx, sentinel.URL)
	if err != nil {
		t.Fatalf("catalog behind a password-protected Sentinel %s: %v", sentinel.URL, err)
	}
	defer st.Close()
	if _, err := st.PutPool(ctx, Pool{Name: "p", URI: master.URL, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	d, err := storage.Open(ctx, sentinel.URL, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Ping(ctx); err != nil {
		t.Fatalf("the same URI as a pool: %v", err)
	}
}
