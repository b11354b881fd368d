package load

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"time"

	"sluice.dev/bench/internal/metrics"
	"sluice.dev/bench/internal/zaqar"
)

// phase runs every configured worker until the deadline (or the request
// budget) and waits for in-flight requests, as zaqar-bench's processes do.
func (r *run) phase(ctx context.Context, o *ops, start, until time.Time) {
	p := r.cfg.Params
	var wg sync.WaitGroup
	spawn := func(role string, procs, workers int, fn func(*zaqar.Session)) {
		for pi := 0; pi < procs; pi++ {
			// zaqar-bench: one client (one Client-ID) per process.
			id := r.cfg.ClientID
			if id == "" {
				id = NewUUID()
			}
			for w := 0; w < workers; w++ {
				s := r.cl.NewSession(id)
				wg.Go(func() { fn(s) })
			}
		}
	}
	var tickets chan time.Time
	if p.Rate > 0 {
		tickets = make(chan time.Time)
		go pace(ctx, p.Rate, start, until, tickets, &r.dropped)
	}
	switch r.cfg.Kind {
	case KindHTTP:
		u := r.cl.URL(p.Path, "")
		spawn("get", p.Producer.Processes, p.Producer.Workers, func(s *zaqar.Session) { r.getter(ctx, s, o.get, u, until, tickets) })
	case KindFairness:
		spawn("post_small", p.Producer.Processes, p.Producer.Workers, func(s *zaqar.Session) { r.producer(ctx, s, o.post, r.bodies, until, tickets) })
		smallDone := make(chan struct{})
		go func() { wg.Wait(); close(smallDone) }()
		var lg sync.WaitGroup
		s := r.cl.NewSession(NewUUID())
		lg.Go(func() { r.largeProducer(ctx, s, o.postLarge, r.large, smallDone) })
		<-smallDone
		lg.Wait()
		return
	default:
		spawn("producer", p.Producer.Processes, p.Producer.Workers, func(s *zaqar.Session) { r.producer(ctx, s, o.post, r.bodies, until, tickets) })
		spawn("consumer", p.Consumer.Processes, p.Consumer.Workers, func(s *zaqar.Session) { r.consumer(ctx, s, o, until) })
		spawn("observer", p.Observer.Processes, p.Observer.Workers, func(s *zaqar.Session) { r.observer(ctx, s, o.list, until) })
	}
	wg.Wait()
}

// next waits for the next start instant: a pacer ticket in open loop
// (latency then counts from the scheduled instant, so a slow server cannot
// hide queueing: no coordinated omission), or now in closed loop.
func (r *run) next(ctx context.Context, until time.Time, tickets <-chan time.Time) (time.Time, bool) {
	if tickets != nil {
		t, ok := <-tickets
		return t, ok && r.take()
	}
	now := time.Now()
	return now, now.Before(until) && ctx.Err() == nil && r.take()
}

// backoff keeps a worker from spinning when the server is unreachable.
func backoff(err error) {
	if err != nil {
		time.Sleep(10 * time.Millisecond)
	}
}

// producer posts one message per request to a random queue (zaqar-bench).
func (r *run) producer(ctx context.Context, s *zaqar.Session, op *metrics.Op, bodies *Bodies, until time.Time, tickets <-chan time.Time) {
	buf := make([]byte, 0, 2048)
	for {
		start, ok := r.next(ctx, until, tickets)
		if !ok {
			return
		}
		q := &r.queues[rand.IntN(len(r.queues))]
		seq := int64(-1)
		if r.del != nil {
			seq = r.del.Next()
		}
		var tagged bool
		buf, tagged = bodies.Append(buf[:0], seq, time.Now().UnixNano())
		st, err := s.Do("POST", q.post, buf)
		end := time.Now()
		if record(op, s, start, end, st, err, 201) && tagged && r.del != nil {
			r.del.Produced(seq)
			if r.notes != nil {
				r.notes.Acked(seq, end)
			}
		}
		r.samples.add(op.Name, start, end, st)
		backoff(err)
	}
}

// largeProducer pushes large messages until the measured small posts end.
func (r *run) largeProducer(ctx context.Context, s *zaqar.Session, op *metrics.Op, bodies *Bodies, done <-chan struct{}) {
	buf := make([]byte, 0, r.cfg.Params.LargeSize+256)
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		default:
		}
		q := &r.queues[rand.IntN(len(r.queues))]
		buf, _ = bodies.Append(buf[:0], 0, 0)
		start := time.Now()
		st, err := s.Do("POST", q.post, buf)
		end := time.Now()
		record(op, s, start, end, st, err, 201)
		r.samples.add(op.Name, start, end, st)
		backoff(err)
	}
}

// tag is the delivery marker sluice-bench puts in message bodies.
type tag struct {
	O string `json:"o"`
	N int64  `json:"n"`
	T int64  `json:"t"`
}

// taggedBody extracts "sb" from an object body and ignores any other body.
type taggedBody struct{ SB *tag }

func (b *taggedBody) UnmarshalJSON(data []byte) error {
	b.SB = nil
	if len(data) == 0 || data[0] != '{' {
		return nil
	}
	var v struct {
		SB *tag `json:"sb"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil
	}
	b.SB = v.SB
	return nil
}

type listed struct {
	Messages []struct {
		Href string     `json:"href"`
		Body taggedBody `json:"body"`
	} `json:"messages"`
	Links []struct {
		Rel  string `json:"rel"`
		Href string `json:"href"`
	} `json:"links"`
}

// claimOnce claims a batch from q and deletes it message by message
// (zaqar-bench's consumer). It returns how many messages were claimed.
func (r *run) claimOnce(s *zaqar.Session, o *ops, q *queue, resp *listed) int {
	start := time.Now()
	st, err := s.Do("POST", q.claim, r.claimBody)
	end := time.Now()
	r.samples.add("claim", start, end, st)
	if !record(o.claim, s, start, end, st, err, 201, 204) {
		if err != nil || st >= 500 {
			r.doubt(end) // the claim may have been made, its answer lost
		}
		backoff(err)
		return 0
	}
	if st == 204 {
		o.claim.Count("empty", 1)
		return 0
	}
	resp.Messages = resp.Messages[:0]
	if json.Unmarshal(s.Resp.Bytes(), resp) != nil {
		o.claim.Count("bad_body", 1)
		return 0
	}
	o.claim.Count("messages", int64(len(resp.Messages)))
	for i := range resp.Messages {
		m := &resp.Messages[i]
		if t := m.Body.SB; t != nil && r.del != nil {
			r.del.Claimed(t.O, t.N, t.T, end)
		}
	}
	for i := range resp.Messages {
		start := time.Now()
		st, err := s.Do("DELETE", r.cl.Href(resp.Messages[i].Href), nil)
		end := time.Now()
		if !record(o.del, s, start, end, st, err, 204) {
			// Still claimed: it comes back when the claim expires.
			if t := resp.Messages[i].Body.SB; t != nil && r.del != nil {
				r.del.Undeleted(t.O, t.N)
			}
			r.doubt(end)
		}
		r.samples.add("delete", start, end, st)
		backoff(err)
	}
	return len(resp.Messages)
}

func (r *run) consumer(ctx context.Context, s *zaqar.Session, o *ops, until time.Time) {
	var resp listed
	for time.Now().Before(until) && ctx.Err() == nil {
		r.claimOnce(s, o, &r.queues[rand.IntN(len(r.queues))], &resp)
	}
}

// observer lists messages (claimed included) from a random queue, paging
// with the marker of its previous listing of that queue (zaqar-bench).
func (r *run) observer(ctx context.Context, s *zaqar.Session, op *metrics.Op, until time.Time) {
	markers := make([]string, len(r.queues))
	var resp listed
	for time.Now().Before(until) && ctx.Err() == nil {
		i := rand.IntN(len(r.queues))
		q := &r.queues[i]
		u := q.list
		if markers[i] != "" {
			u = r.cl.URL(q.listPath, q.list.RawQuery+"&marker="+url.QueryEscape(markers[i]))
		}
		start := time.Now()
		st, err := s.Do("GET", u, nil)
		end := time.Now()
		r.samples.add("list", start, end, st)
		if !record(op, s, start, end, st, err, 200) {
			backoff(err)
			continue
		}
		resp.Messages, resp.Links = resp.Messages[:0], resp.Links[:0]
		if json.Unmarshal(s.Resp.Bytes(), &resp) != nil {
			op.Count("bad_body", 1)
			continue
		}
		op.Count("messages", int64(len(resp.Messages)))
		if len(resp.Messages) > 0 {
			for _, l := range resp.Links {
				if l.Rel == "next" {
					if _, m, ok := strings.Cut(l.Href, "marker="); ok {
						m, _, _ = strings.Cut(m, "&")
						markers[i], _ = url.QueryUnescape(m)
					}
				}
			}
		}
	}
}

// getter is the raw HTTP baseline: GET one URL, any 2xx is a success.
func (r *run) getter(ctx context.Context, s *zaqar.Session, op *metrics.Op, u *url.URL, until time.Time, tickets <-chan time.Time) {
	for {
		start, ok := r.next(ctx, until, tickets)
		if !ok {
			return
		}
		st, err := s.Do("GET", u, nil)
		end := time.Now()
		if err == nil && st >= 200 && st < 300 {
			op.Success(end, end.Sub(start))
		} else {
			failure(op, s, end, st, err)
		}
		r.samples.add("get", start, end, st)
		backoff(err)
	}
}
