package storagetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"sluice.dev/server/internal/storage"
)

// wipeRounds is how many purges and queue deletes testWipesRacePosts makes
// while producers post and a consumer claims.
const wipeRounds = 8

// testWipesRacePosts: producers post to a queue and a consumer claims and
// deletes from it while the queue is purged and deleted, over and over.
// Every call is stamped with a logical start and end. At the end the queue
// lists each message once, its stats agree with the listing, and:
//   - no message posted before a wipe began survives it;
//   - every message posted after the last wipe ended, and not deleted by
//     the consumer, is listed (a post that overlaps a wipe may go either
//     way, but not be half kept: then stats and the listing disagree).
func testWipesRacePosts(e *env) {
	q := e.queue("wiped")
	var clock atomic.Int64
	tick := func() int64 { return clock.Add(1) }
	type post struct {
		ids        []string
		start, end int64
	}
	var (
		mu       sync.Mutex
		posts    []post
		consumed = map[string]string{} // id -> when the consumer claimed and deleted it
		wipes    [][2]int64
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	for p := range 3 {
		wg.Go(func() {
			for n := 0; !stop.Load() && n < 2000; n++ {
				msgs := make([]storage.NewMessage, 1+n%3)
				for i := range msgs {
					msgs[i] = storage.NewMessage{TTL: time.Hour, Body: json.RawMessage(fmt.Sprintf(`"p%d-%d-%d"`, p, n, i))}
				}
				start := tick()
				ids, err := e.d.Messages().Post(e.ctx, q, "producer", msgs)
				end := tick()
				if err != nil || len(ids) != len(msgs) {
					e.t.Errorf("post: %v, %d ids", err, len(ids))
					return
				}
				mu.Lock()
				posts = append(posts, post{ids, start, end})
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for n := 0; !stop.Load() && n < 2000; n++ {
			cs := tick()
			c, err := e.d.Claims().Create(e.ctx, q, storage.ClaimOptions{TTL: time.Hour, Grace: time.Minute, Limit: 3})
			ce := tick()
			if err != nil && !storage.Is(err, storage.NotFound) {
				e.t.Errorf("claim: %v", err)
				return
			}
			for _, m := range c.Messages {
				// The message may have been wiped since the claim.
				ds := tick()
				if err := e.d.Messages().Delete(e.ctx, q, m.ID, c.ID); err == nil {
					mu.Lock()
					consumed[m.ID] = fmt.Sprintf("claimed %d-%d, deleted %d-%d", cs, ce, ds, tick())
					mu.Unlock()
				} else if !storage.Is(err, storage.NotFound) && !storage.Is(err, storage.Conflict) {
					e.t.Errorf("delete %s with claim %s: %v", m.ID, c.ID, err)
				}
			}
		}
	})
	for round := range wipeRounds {
		time.Sleep(15 * time.Millisecond)
		start := tick()
		var err error
		if round%2 == 0 {
			err = e.d.Queues().Purge(e.ctx, q)
		} else {
			err = e.d.Queues().Delete(e.ctx, q)
		}
		if err != nil {
			e.t.Fatalf("wipe %d: %v", round, err)
		}
		wipes = append(wipes, [2]int64{start, tick()})
	}
	time.Sleep(15 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if e.t.Failed() {
		return
	}

	listed := map[string]int{}
	marker := ""
	for range 10000 {
		msgs, next, err := e.d.Messages().List(e.ctx, q, storage.ListMessagesOptions{Marker: marker, Limit: 20, Echo: true, IncludeClaimed: true, IncludeDelayed: true})
		if err != nil && !storage.Is(err, storage.NotFound) {
			e.t.Fatalf("list: %v", err)
		}
		for _, m := range msgs {
			listed[m.ID]++
		}
		if next == "" || len(msgs) == 0 {
			break
		}
		marker = next
	}
	lastWipe := wipes[len(wipes)-1]
	for _, p := range posts {
		for _, id := range p.ids {
			switch {
			case listed[id] > 1:
				e.t.Errorf("message %s listed %d times", id, listed[id])
			case listed[id] == 1 && consumed[id] != "":
				e.t.Errorf("message %s posted %d-%d listed after its delete succeeded (%s); wipes %v", id, p.start, p.end, consumed[id], wipes)
			case listed[id] == 1:
				for _, w := range wipes {
					if p.end < w[0] {
						e.t.Errorf("message %s posted at %d-%d survived the wipe at %d-%d", id, p.start, p.end, w[0], w[1])
						break
					}
				}
			case p.start > lastWipe[1] && consumed[id] == "":
				e.t.Errorf("message %s posted at %d-%d, after the last wipe (%d-%d), is not listed (lost)", id, p.start, p.end, lastWipe[0], lastWipe[1])
			}
		}
	}
	total := len(listed)
	st, err := e.d.Queues().Stats(e.ctx, q)
	if err != nil && !storage.Is(err, storage.NotFound) {
		e.t.Fatalf("stats: %v", err)
	}
	if st.Total != total {
		e.t.Errorf("stats count %d messages (free %d, claimed %d), the listing %d", st.Total, st.Free, st.Claimed, total)
	}
}
