package storagetest

import (
	"encoding/json"
	"fmt"
	"sync"
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
	var r wipeRace
	type post struct {
		ids        []string
		start, end int64
	}
	var (
		mu       sync.Mutex
		posts    []post
		consumed = map[string]string{} // id -> when the consumer claimed and deleted it
	)
	for p := range 3 {
		r.wg.Go(func() {
			for n := 0; r.running() && n < 2000; n++ {
				msgs := make([]storage.NewMessage, 1+n%3)
				for i := range msgs {
					msgs[i] = storage.NewMessage{TTL: time.Hour, Body: json.RawMessage(fmt.Sprintf(`"p%d-%d-%d"`, p, n, i))}
				}
				start := r.tick()
				ids, err := e.d.Messages().Post(e.ctx, q, "producer", msgs)
				end := r.tick()
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
	r.wg.Go(func() {
		for n := 0; r.running() && n < 2000; n++ {
			cs := r.tick()
			c, err := e.d.Claims().Create(e.ctx, q, storage.ClaimOptions{TTL: time.Hour, Grace: time.Minute, Limit: 3})
			ce := r.tick()
			if err != nil && !storage.Is(err, storage.NotFound) {
				e.t.Errorf("claim: %v", err)
				return
			}
			for _, m := range c.Messages {
				// The message may have been wiped since the claim.
				ds := r.tick()
				if err := e.d.Messages().Delete(e.ctx, q, m.ID, c.ID); err == nil {
					mu.Lock()
					consumed[m.ID] = fmt.Sprintf("claimed %d-%d, deleted %d-%d", cs, ce, ds, r.tick())
					mu.Unlock()
				} else if !storage.Is(err, storage.NotFound) && !storage.Is(err, storage.Conflict) {
					e.t.Errorf("delete %s with claim %s: %v", m.ID, c.ID, err)
				}
			}
		}
	})
	wipes := r.wipe(e, wipeRounds, 15*time.Millisecond, func(round int) error {
		if round%2 == 0 {
			return e.d.Queues().Purge(e.ctx, q)
		}
		return e.d.Queues().Delete(e.ctx, q)
	})
	if e.t.Failed() {
		return
	}

	listed, err := listEvery(e.ctx, e.d, q)
	if err != nil {
		e.t.Fatalf("list: %v", err)
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
