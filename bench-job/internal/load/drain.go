package load

import (
	"context"
	"sync"
	"time"

	"sluice.dev/bench/internal/result"
)

// drain lets the consumers finish the backlog after the timed run so that
// "lost" means lost, not "still queued". Drain requests are reported apart
// (extra drain_* counters) and never count toward the run's rates.
func (r *run) drain(ctx context.Context, res *result.Result) {
	p := r.cfg.Params
	// Sweeps and producer-only runs drain with one worker: whatever is
	// left in the queues is counted, not guessed.
	workers := max(p.Consumer.Total(), 1)
	if r.cfg.Drain <= 0 {
		return
	}
	o := newOps("claim", "delete")
	if r.samples != nil {
		r.samples.off.Store(true)
		defer r.samples.off.Store(false)
	}
	deadline := time.Now().Add(r.cfg.Drain)
	pass := func() {
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			s := r.cl.NewSession(NewUUID())
			wg.Go(func() {
				var resp listed
				// Each queue is drained until a claim comes back empty twice
				// in a row (a just-expired claim can make one empty answer early).
				for qi := w % len(r.queues); ; {
					empty := 0
					for empty < 2 && time.Now().Before(deadline) && ctx.Err() == nil {
						if r.claimOnce(s, o, &r.queues[qi], &resp) == 0 {
							empty++
						} else {
							empty = 0
						}
					}
					qi = (qi + 1) % len(r.queues)
					if qi == w%len(r.queues) || !time.Now().Before(deadline) {
						return
					}
				}
			})
		}
		wg.Wait()
	}
	pass()
	// Messages held by claims whose answer was lost (or whose delete failed)
	// come back when those claims expire: wait for that, within the drain's
	// bound, and drain again. Everything else was drained first, so nothing
	// expires meanwhile.
	for ctx.Err() == nil {
		until := time.Unix(0, r.doubtUntil.Load())
		if !time.Now().Before(until) || until.After(deadline) {
			break
		}
		select {
		case <-time.After(time.Until(until)):
		case <-ctx.Done():
		}
		pass()
	}
	if time.Now().UnixNano() < r.doubtUntil.Load() {
		// Claims that may hold messages had not expired when the drain
		// ended: those messages count as lost; a longer --drain finds them.
		o.claim.Count("ended_before_claims_expired", 1)
	}
	d := o.results()
	for name, op := range d {
		if cur := res.Ops[name]; cur != nil {
			if cur.Extra == nil {
				cur.Extra = map[string]int64{}
			}
			cur.Extra["drain_requests"] += op.Requests
			cur.Extra["drain_ok"] += op.OK
			for k, v := range op.Extra {
				cur.Extra["drain_"+k] += v
			}
		}
	}
}
