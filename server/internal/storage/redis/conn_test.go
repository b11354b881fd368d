package redis

import (
	"context"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/testutil"
)

// TestIdleConnectionsStillChecked: connections Redis closed while they
// sat idle in the pool are found by the health check and replaced, so the
// requests after it all succeed (scripts are never retried).
func TestIdleConnectionsStillChecked(t *testing.T) {
	ctx := context.Background()
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	d := openAt(t, r.URL, storage.SystemClock{})
	killer := openAt(t, r.URL, storage.SystemClock{})
	q := queueRef("p", "idle")
	for round := range 3 {
		// Several connections in the pool: concurrent posts open them.
		errs := make(chan error, 8)
		for range 8 {
			go func() { _, err := post(t, d, q, 1, time.Hour); errs <- err }()
		}
		for range 8 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: post before the kill: %v", round, err)
			}
		}
		// CLIENT KILL skips the connection that sends it: the killer's.
		if n, err := killer.c.ClientKillByFilter(ctx, "TYPE", "normal").Result(); err != nil || n == 0 {
			t.Fatalf("round %d: CLIENT KILL = %d, %v", round, n, err)
		}
		time.Sleep(probeAfter + 50*time.Millisecond)
		for i := range 8 {
			if _, err := post(t, d, q, 1, time.Hour); err != nil {
				t.Fatalf("round %d: post %d after the kill: %v", round, i, err)
			}
		}
	}
}
