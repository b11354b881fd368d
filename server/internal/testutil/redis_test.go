package testutil

import (
	"testing"
)

func TestRedisLifecycle(t *testing.T) {
	r := StartRedis(t, RedisOptions{Persistent: true})
	if err := ping(r.Addr); err != nil {
		t.Fatalf("fresh server: %v", err)
	}
	r.Kill()
	if r.Running() {
		t.Fatal("still running after Kill")
	}
	if err := ping(r.Addr); err == nil {
		t.Fatal("killed server still answers")
	}
	r.Restart(t)
	if err := ping(r.Addr); err != nil {
		t.Fatalf("after restart: %v\n%s", err, r.Logs())
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
}
