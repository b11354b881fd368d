package testutil

import (
	"context"
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// TestRedisKillRestartKeepsWrites checks what pool failure tests rely on:
// with Persistent, whatever Redis acknowledged survives a SIGKILL and a
// restart on the same address.
func TestRedisKillRestartKeepsWrites(t *testing.T) {
	ctx := context.Background()
	r := StartRedis(t, RedisOptions{Persistent: true})
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr, MaxRetries: -1})
	defer c.Close()
	if err := c.Set(ctx, "k", "acknowledged", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r.Kill()
	if r.Running() {
		t.Fatal("still running after Kill")
	}
	if err := ping(r.Addr); err == nil {
		t.Fatal("killed server still answers")
	}
	r.Restart(t)
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "acknowledged" {
		t.Fatalf("after restart: %q, %v\n%s", got, err, r.Logs())
	}
}

func TestRedisWithoutPersistenceStartsEmpty(t *testing.T) {
	ctx := context.Background()
	r := StartRedis(t, RedisOptions{})
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr, MaxRetries: -1})
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r.Kill()
	r.Restart(t)
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("non-persistent server kept data across a kill: %d, %v", n, err)
	}
}

func TestSentinel(t *testing.T) {
	m := StartRedis(t, RedisOptions{})
	s := StartSentinel(t, m, "mymaster")
	if err := ping(s.Addr); err != nil {
		t.Fatalf("sentinel: %v", err)
	}
	if want := "redis://" + s.Addr + "?master=mymaster"; s.URL != want {
		t.Errorf("URL = %q, want %q", s.URL, want)
	}
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	addr, err := c.Do(context.Background(), "SENTINEL", "get-master-addr-by-name", "mymaster").StringSlice()
	if err != nil || len(addr) != 2 || addr[1] != itoa(m.Port) {
		t.Errorf("sentinel reports master %v, %v; want port %d", addr, err, m.Port)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
