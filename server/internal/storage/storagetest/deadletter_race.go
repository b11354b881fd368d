package storagetest

import (
	"fmt"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

// testDeadLetterConcurrentClaimers: claimers claim and release at once
// under a dead-letter policy until every message has been moved. Each
// message is claimed at most MaxClaimCount times, moved once, and ends in
// exactly one place: the dead-letter queue, never in both queues or
// neither; each move is counted once.
func testDeadLetterConcurrentClaimers(e *env) {
	q, dlq := e.queue("contended"), e.queue("contended-dead")
	dl := &storage.DeadLetter{MaxClaimCount: 2, Queue: dlq.Name}
	ids := e.post(q, "producer", 24, time.Hour)
	_, deadBefore := e.clock.Events.Counts()
	var (
		mu      sync.Mutex
		claimed = map[string]int{}
		wg      sync.WaitGroup
	)
	// step claims up to limit messages, counts them and releases the
	// claim; it reports how many it got.
	step := func(limit int) (int, error) {
		c, err := e.d.Claims().Create(e.ctx, q, storage.ClaimOptions{TTL: time.Hour, Grace: time.Minute, Limit: limit, DeadLetter: dl})
		if err != nil {
			return 0, fmt.Errorf("claim: %w", err)
		}
		if len(c.Messages) == 0 {
			return 0, nil
		}
		mu.Lock()
		for _, m := range c.Messages {
			claimed[m.ID]++
		}
		mu.Unlock()
		if err := e.d.Claims().Delete(e.ctx, q, c.ID); err != nil {
			return 0, fmt.Errorf("release: %w", err)
		}
		return len(c.Messages), nil
	}
	for range 4 {
		wg.Go(func() {
			for range 200 {
				n, err := step(3)
				if err != nil {
					e.t.Error(err)
					return
				}
				if n == 0 {
					st, err := e.d.Queues().Stats(e.ctx, q)
					if err != nil {
						e.t.Errorf("stats: %v", err)
						return
					}
					if st.Total == 0 {
						return
					}
					// The rest are held by other claimers for now.
				}
			}
		})
	}
	wg.Wait()
	if e.t.Failed() {
		return
	}
	// Under load the claimers may stop early; one claimer finishes the
	// work, so the end state does not depend on timing.
	for range 100 {
		n, err := step(10)
		if err != nil {
			e.t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	for id, n := range claimed {
		if n > dl.MaxClaimCount {
			e.t.Errorf("message %s claimed %d times under a limit of %d", id, n, dl.MaxClaimCount)
		}
	}
	left, err := listEvery(e.ctx, e.d, q)
	if err != nil {
		e.t.Fatal(err)
	}
	moved, err := listEvery(e.ctx, e.d, dlq)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, id := range ids {
		if left[id] != 0 || moved[id] != 1 {
			e.t.Errorf("message %s: %d in the queue, %d in the dead-letter queue; want 0 and 1", id, left[id], moved[id])
		}
	}
	if len(moved) != len(ids) {
		e.t.Errorf("dead-letter queue holds %d messages, want %d", len(moved), len(ids))
	}
	if _, dead := e.clock.Events.Counts(); dead-deadBefore != int64(len(ids)) {
		e.t.Errorf("DeadLettered events = %d, want %d", dead-deadBefore, len(ids))
	}
}
