package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/testutil"
)

// TestGroupCommitKeepsEachCallsResult posts from many goroutines at once
// through a driver with one sender, so nearly every call shares a
// pipeline: each post must get back the ids of its own messages (bodies
// name their request) and every message must be stored once.
func TestGroupCommitKeepsEachCallsResult(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	d := openAt(t, r.URL, storage.SystemClock{})
	d.fc = newGroupCommit(d.c, 1, 8)
	ctx := context.Background()
	q := queueRef("p", "group")
	const workers, posts = 32, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*posts)
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for i := 0; i < posts; i++ {
				n := 1 + (w+i)%3
				msgs := make([]storage.NewMessage, n)
				for j := range msgs {
					msgs[j] = storage.NewMessage{TTL: time.Hour, Body: json.RawMessage(fmt.Sprintf(`"%d-%d-%d"`, w, i, j))}
				}
				ids, err := d.Messages().Post(ctx, q, "c", msgs)
				if err != nil {
					errs <- err
					return
				}
				got, err := d.Messages().GetMany(ctx, q, ids)
				if err != nil || len(got) != n {
					errs <- fmt.Errorf("post %d-%d: %d of %d messages back (%v)", w, i, len(got), n, err)
					return
				}
				for j, m := range got {
					if want := fmt.Sprintf(`"%d-%d-%d"`, w, i, j); string(m.Body) != want {
						errs <- fmt.Errorf("post %d-%d got message %s, want %s: replies crossed", w, i, m.Body, want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := 0
	for w := 0; w < workers; w++ {
		for i := 0; i < posts; i++ {
			want += 1 + (w+i)%3
		}
	}
	if st, err := d.Queues().Stats(ctx, q); err != nil || st.Total != want {
		t.Fatalf("stats %+v, %v; want %d messages", st, err, want)
	}
}

// TestGroupCommitIsolatesErrors sends failing and succeeding calls in one
// pipeline (the only sender slot is held until all are queued): each
// failing call gets its error, each other call its result.
func TestGroupCommitIsolatesErrors(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	d := openAt(t, r.URL, storage.SystemClock{})
	g := newGroupCommit(d.c, 1, 64)
	d.fc = g
	ctx := context.Background()
	good, bad := queueRef("p", "good"), queueRef("p", "bad")
	// A queue hash of the wrong type makes the post script fail at its
	// first command, before any write.
	if err := d.c.Set(ctx, scope(bad)+":q", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	g.slots <- struct{}{} // hold the only sender slot
	const calls = 12
	results := make([]error, calls)
	var wg sync.WaitGroup
	for i := 0; i < calls; i++ {
		q := good
		if i%3 == 0 {
			q = bad
		}
		wg.Go(func() { _, results[i] = post(t, d, q, 2, time.Hour) })
	}
	waitFor(t, 10*time.Second, "every call to queue", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue) == calls
	})
	<-g.slots
	wg.Wait()
	for i, err := range results {
		if i%3 == 0 && !storage.Is(err, storage.Internal) {
			t.Errorf("call %d to the broken queue: %v, want kind internal", i, err)
		}
		if i%3 != 0 && err != nil {
			t.Errorf("call %d to the good queue: %v", i, err)
		}
	}
	if st, err := d.Queues().Stats(ctx, good); err != nil || st.Total != 2*(calls-calls/3) {
		t.Errorf("good queue %+v, %v; want %d messages", st, err, 2*(calls-calls/3))
	}
}

// TestGroupCommitDropsAbandonedCalls: a caller that gives up while its call
// waits for a sender is told it failed, so the call must never run.
func TestGroupCommitDropsAbandonedCalls(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	d := openAt(t, r.URL, storage.SystemClock{})
	g := newGroupCommit(d.c, 1, 64)
	d.fc = g
	q := queueRef("p", "abandoned")
	g.slots <- struct{}{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := d.Messages().Post(ctx, q, "c", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`)}})
		done <- err
	}()
	waitFor(t, 10*time.Second, "the call to queue", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue) == 1
	})
	cancel()
	if err := <-done; !storage.Is(err, storage.Unavailable) {
		t.Fatalf("abandoned post: %v, want kind unavailable", err)
	}
	<-g.slots
	// The next call sends whatever is queued; the abandoned one must not go.
	if _, err := post(t, d, q, 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	if st, err := d.Queues().Stats(context.Background(), q); err != nil || st.Total != 1 {
		t.Fatalf("stats %+v, %v; want only the second post's message", st, err)
	}
	// A context that has ended before the call never queues it.
	if _, err := d.Messages().Post(ctx, q, "c", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`)}}); !storage.Is(err, storage.Unavailable) {
		t.Fatalf("post with an ended context: %v", err)
	}
}
