package load

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"sluice.dev/bench/internal/result"
	"sluice.dev/bench/internal/zaqar"
)

// sweep runs Darner's flood (one step per connection count) or packing
// (one step per backlog size) and returns the steps plus their union.
func (r *run) sweep(ctx context.Context) ([]*result.Step, map[string]*result.OpResult, error) {
	p := r.cfg.Params
	total := map[string]*result.OpResult{}
	var steps []*result.Step
	var backlog int64
	for _, v := range p.Sweep {
		if ctx.Err() != nil {
			break
		}
		workers, label := int(v), fmt.Sprintf("connections=%d", v)
		fill := int64(0)
		if r.cfg.Kind == KindPacking {
			workers, label = max(1, p.Producer.Total()), fmt.Sprintf("backlog=%d", v)
			fill = r.fill(ctx, v-backlog, workers)
			backlog += fill
		}
		o := newOps("post", "claim", "delete")
		r.liveMu.Lock()
		r.live = o.all
		r.liveMu.Unlock()
		start := time.Now()
		until := start.Add(time.Duration(p.Time) * time.Second)
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			s := r.cl.NewSession(NewUUID())
			wg.Go(func() { r.flooder(ctx, s, o, until) })
		}
		wg.Wait()
		st := &result.Step{Label: label, Value: v, Start: start.UnixMilli(), End: time.Now().UnixMilli(), Ops: o.results()}
		if fill > 0 {
			st.Ops["post"].Extra["fill_messages"] = fill
		}
		steps = append(steps, st)
		if err := result.MergeOps(total, st.Ops); err != nil {
			return nil, nil, err
		}
	}
	for _, op := range total {
		op.Series = nil // steps are the series of a sweep
	}
	return steps, total, nil
}

// flooder pushes messages through the first queue: post one, claim one,
// delete it (Darner's flood: set then get on an empty queue).
func (r *run) flooder(ctx context.Context, s *zaqar.Session, o *ops, until time.Time) {
	q := &r.queues[0]
	buf := make([]byte, 0, 2048)
	var resp listed
	for time.Now().Before(until) && ctx.Err() == nil {
		seq := int64(-1)
		if r.del != nil {
			seq = r.del.Next()
		}
		var tagged bool
		buf, tagged = r.bodies.Append(buf[:0], seq, time.Now().UnixNano())
		start := time.Now()
		st, err := s.Do("POST", q.post, buf)
		end := time.Now()
		r.samples.add("post", start, end, st)
		if record(o.post, s, start, end, st, err, 201) && tagged && r.del != nil {
			r.del.Produced(seq)
		}
		backoff(err)
		r.claimOnce(s, o, q, &resp)
	}
}

// fill posts n untagged messages in batches of 10 to build a backlog; it
// returns how many the server accepted.
func (r *run) fill(ctx context.Context, n int64, workers int) int64 {
	if n <= 0 {
		return 0
	}
	docs := r.cfg.Docs
	if len(docs) == 0 {
		docs = DefaultDocs
	}
	const batch = 10
	body := []byte(`{"messages":[`)
	body = append(body, bytes.Repeat(append(append([]byte{}, docs[0].Doc...), ','), batch)...)
	body = append(body[:len(body)-1], "]}"...)
	var left, done atomic.Int64
	left.Store((n + batch - 1) / batch)
	q := &r.queues[0]
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		s := r.cl.NewSession(NewUUID())
		wg.Go(func() {
			for left.Add(-1) >= 0 && ctx.Err() == nil {
				if st, err := s.Do("POST", q.post, body); err == nil && st == 201 {
					done.Add(batch)
				} else {
					backoff(err)
				}
			}
		})
	}
	wg.Wait()
	return done.Load()
}
