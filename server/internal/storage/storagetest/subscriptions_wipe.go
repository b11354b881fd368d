package storagetest

import (
	"fmt"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

// testSubscriptionsRaceQueueDeletes: subscriptions are made and removed
// while their queue is deleted over and over. Every call is stamped with a
// logical start and end. At the end the listing and Get agree, and:
//   - no subscription made before a queue delete began survives it (it
//     would go on being notified for a queue its owner deleted);
//   - every subscription made after the last delete ended, and not
//     removed, is there.
func testSubscriptionsRaceQueueDeletes(e *env) {
	q := e.queue("subwiped")
	ss := e.d.Subscriptions()
	var r wipeRace
	type made struct {
		id         string
		start, end int64
		removed    bool
	}
	var (
		mu   sync.Mutex
		subs []*made
	)
	for w := range 3 {
		r.wg.Go(func() {
			for n := 0; r.running() && n < 500; n++ {
				start := r.tick()
				id, created, err := ss.Create(e.ctx, q, storage.Subscription{Subscriber: fmt.Sprintf("http://127.0.0.1:9/w%d-%d", w, n), TTL: time.Hour, Options: storage.Metadata{}})
				end := r.tick()
				if err != nil || !created {
					e.t.Errorf("subscribe: created %v, %v", created, err)
					return
				}
				m := &made{id: id, start: start, end: end}
				if n%3 == 0 {
					if err := ss.Delete(e.ctx, q, id); err != nil {
						e.t.Errorf("unsubscribe %s: %v", id, err)
						return
					}
					m.removed = true
				}
				mu.Lock()
				subs = append(subs, m)
				mu.Unlock()
			}
		})
	}
	deletes := r.wipe(e, 6, 15*time.Millisecond, func(int) error { return e.d.Queues().Delete(e.ctx, q) })
	if e.t.Failed() {
		return
	}

	listed := map[string]bool{}
	marker := ""
	for range 1000 {
		page, next, err := ss.List(e.ctx, q, storage.ListSubscriptionsOptions{Marker: marker, Limit: 20})
		if err != nil {
			e.t.Fatalf("list: %v", err)
		}
		for _, s := range page {
			if listed[s.ID] {
				e.t.Errorf("subscription %s listed twice", s.ID)
			}
			listed[s.ID] = true
		}
		if next == "" || len(page) == 0 {
			break
		}
		marker = next
	}
	last := deletes[len(deletes)-1]
	for _, m := range subs {
		_, gerr := ss.Get(e.ctx, q, m.id)
		if (gerr == nil) != listed[m.id] {
			e.t.Errorf("subscription %s: listed %v, but Get says %v", m.id, listed[m.id], gerr)
		}
		switch {
		case listed[m.id] && m.removed:
			e.t.Errorf("subscription %s listed after its delete", m.id)
		case listed[m.id]:
			for _, d := range deletes {
				if m.end < d[0] {
					e.t.Errorf("subscription %s made at %d-%d survived the queue's delete at %d-%d", m.id, m.start, m.end, d[0], d[1])
					break
				}
			}
		case m.start > last[1] && !m.removed:
			e.t.Errorf("subscription %s made at %d-%d, after the last queue delete (%d-%d), is gone", m.id, m.start, m.end, last[0], last[1])
		}
	}
}
