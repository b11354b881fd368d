package redis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/testutil"
)

// TestSentinelFailover kills the master behind a Sentinel URI: after the
// sentinel promotes the replica, the same driver serves again, with the
// data written before the failover.
func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("failover takes several seconds")
	}
	ctx := context.Background()
	master := testutil.StartRedis(t, testutil.RedisOptions{})
	replica := testutil.StartRedis(t, testutil.RedisOptions{Args: []string{"--replicaof", "127.0.0.1", strconv.Itoa(master.Port)}})
	direct := openAt(t, master.URL, storage.SystemClock{})
	waitFor(t, 20*time.Second, "replica to connect", func() bool {
		info, err := direct.c.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "connected_slaves:1")
	})
	sentinel := testutil.StartSentinel(t, master, "mymaster")
	d := openAt(t, sentinel.URL, storage.SystemClock{})
	q := queueRef("p", "failover")
	var ids []string
	waitFor(t, 20*time.Second, "first post through the sentinel", func() bool {
		var err error
		ids, err = post(t, d, q, 3, time.Hour)
		return err == nil
	})
	// Make sure the replica has the messages before the master dies. WAIT
	// would only count this test's own connection's writes, and the posts
	// went through the sentinel driver's, so compare replication offsets.
	want := replOffset(t, direct, "master_repl_offset")
	onReplica := openAt(t, replica.URL, storage.SystemClock{})
	waitFor(t, 20*time.Second, "the replica to catch up", func() bool {
		return replOffset(t, onReplica, "slave_repl_offset") >= want
	})
	master.Kill()
	waitFor(t, 60*time.Second, "the driver to write to the promoted replica", func() bool {
		_, err := post(t, d, q, 1, time.Hour)
		return err == nil
	})
	got, err := d.Messages().GetMany(ctx, q, ids)
	if err != nil || len(got) != len(ids) {
		t.Errorf("messages from before the failover: %d of %d, %v", len(got), len(ids), err)
	}
	if role, _ := onReplica.c.Do(ctx, "ROLE").Slice(); len(role) == 0 || role[0] != "master" {
		t.Errorf("replica role after failover = %v, want master", role)
	}
}

// replOffset reads one offset field of INFO replication (-1 when absent).
func replOffset(t *testing.T, d *Driver, field string) int64 {
	t.Helper()
	info, err := d.c.Info(context.Background(), "replication").Result()
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
