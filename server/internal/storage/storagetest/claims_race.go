package storagetest

import (
	"errors"
	"slices"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

// testClaimEndsRace: a claim is renewed, released, and has its messages
// deleted with it, all at the same moment, round after round. Whatever the
// order, the claim is gone at the end (a renew after the release must not
// bring it back), every message it held is either deleted or free again
// (none stays held by a claim nobody has), and stats agree.
func testClaimEndsRace(e *env) {
	q := e.queue("claimends")
	cs, ms := e.d.Claims(), e.d.Messages()
	for round := range 15 {
		posted := e.post(q, "c", 4, time.Hour)
		c, err := cs.Create(e.ctx, q, storage.ClaimOptions{TTL: time.Hour, Grace: time.Minute, Limit: 4})
		if err != nil || len(c.Messages) != 4 {
			e.t.Fatalf("round %d: claim: %d messages, %v", round, len(c.Messages), err)
		}
		held := messageIDs(c.Messages)
		deleted := make([]bool, len(held))
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := cs.Update(e.ctx, q, c.ID, 2*time.Hour, time.Minute); err != nil && !storage.Is(err, storage.NotFound) {
				e.t.Errorf("round %d: renew: %v", round, err)
			}
		})
		wg.Go(func() {
			if err := cs.Delete(e.ctx, q, c.ID); err != nil {
				e.t.Errorf("round %d: release: %v", round, err)
			}
		})
		for i, id := range held[:2] {
			wg.Go(func() {
				// After the release no claim holds it: refused.
				err := ms.Delete(e.ctx, q, id, c.ID)
				deleted[i] = err == nil
				if err != nil && !errors.Is(err, storage.ErrNotClaimed) {
					e.t.Errorf("round %d: delete %s with the claim: %v", round, id, err)
				}
			})
		}
		wg.Wait()
		if e.t.Failed() {
			return
		}
		if got, err := cs.Get(e.ctx, q, c.ID); !storage.Is(err, storage.NotFound) {
			e.t.Fatalf("round %d: claim %s after its release and a renew at once: %+v, %v; want NotFound", round, c.ID, got, err)
		}
		st, err := e.d.Queues().Stats(e.ctx, q)
		if err != nil {
			e.t.Fatal(err)
		}
		left := 0
		for i := range held {
			_, gerr := ms.Get(e.ctx, q, held[i])
			switch {
			case deleted[i] && gerr == nil:
				e.t.Errorf("round %d: message %s is there after its delete with the claim succeeded", round, held[i])
			case !deleted[i] && gerr != nil:
				e.t.Errorf("round %d: message %s is gone, though its delete did not succeed: %v", round, held[i], gerr)
			case gerr == nil:
				left++
			}
		}
		if st.Claimed != 0 || st.Total != left {
			e.t.Fatalf("round %d: stats %d claimed of %d after the claim ended, want 0 of %d", round, st.Claimed, st.Total, left)
		}
		// Every message left is free: one claim takes them all.
		again, err := cs.Create(e.ctx, q, storage.ClaimOptions{TTL: time.Hour, Grace: time.Minute, Limit: 10})
		if err != nil || len(again.Messages) != left {
			e.t.Fatalf("round %d: a new claim took %d of the %d messages left (%v)", round, len(again.Messages), left, err)
		}
		for _, id := range messageIDs(again.Messages) {
			if !slices.Contains(posted, id) {
				e.t.Fatalf("round %d: claimed %s, not posted this round", round, id)
			}
			if err := ms.Delete(e.ctx, q, id, again.ID); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}
