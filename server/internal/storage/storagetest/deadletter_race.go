package storagetest

import (
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
	for range 4 {
		wg.Go(func() {
			for range 200 {
				c, err := e.d.Claims().Create(e.ctx, q, storage.ClaimOptions{TTL: time.Hour, Grace: time.Minute, Limit: 3, DeadLetter: dl})
				if err != nil {
					e.t.Errorf("claim: %v", err)
					return
				}
				if len(c.Messages) == 0 {
					st, err := e.d.Queues().Stats(e.ctx, q)
					if err != nil {
						e.t.Errorf("stats: %v", err)
						return
					}
					if st.Total == 0 {
						return
					}
					continue // the rest are held by other claimers for now
				}
				mu.Lock()
				for _, m := range c.Messages {
					claimed[m.ID]++
				}
				mu.Unlock()
				if err := e.d.Claims().Delete(e.ctx, q, c.ID); err != nil {
					e.t.Errorf("release: %v", err)
					return
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
		c, err := e.d.Claims().Create(e.ctx, q, storage.ClaimOptions{TTL: time.Hour, Grace: time.Minute, Limit: 10, DeadLetter: dl})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(c.Messages) == 0 {
			break
		}
		for _, m := range c.Messages {
			claimed[m.ID]++
		}
		if err := e.d.Claims().Delete(e.ctx, q, c.ID); err != nil {
			e.t.Fatal(err)
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
