package load

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"sluice.dev/bench/internal/metrics"
	"sluice.dev/bench/internal/result"
	"sluice.dev/bench/internal/zaqar"
)

// ops is the set of recorders one phase (or sweep step) writes into.
type ops struct {
	post, postLarge, claim, del, list, get *metrics.Op
	all                                    []*metrics.Op
}

func newOps(names ...string) *ops {
	o := &ops{}
	for _, n := range names {
		op := metrics.NewOp(n)
		switch n {
		case "post", "post_small":
			o.post = op
		case "post_large":
			o.postLarge = op
		case "claim":
			o.claim = op
		case "delete":
			o.del = op
		case "list":
			o.list = op
		case "get":
			o.get = op
		}
		o.all = append(o.all, op)
	}
	return o
}

func (o *ops) results() map[string]*result.OpResult {
	m := map[string]*result.OpResult{}
	for _, op := range o.all {
		m[op.Name] = result.FromSnapshot(op.Finish())
	}
	return m
}

// queue holds the pre-built URLs of one queue, so workers build nothing
// per request.
type queue struct {
	name              string
	post, claim, list *url.URL
	listPath          string
}

// run is the state of one invocation.
type run struct {
	cfg     *Config
	cl      *zaqar.Client
	queues  []queue
	del     *metrics.Delivery
	bodies  *Bodies
	large   *Bodies // fairness: the large messages
	dropped atomic.Int64
	budget  atomic.Int64 // remaining requests when bounded by count
	bounded bool
	samples *sampleLog
	recv    *receiver              // notifications: the webhook receiver
	notes   *metrics.Notifications // notifications: ack and arrival times
	live    []*metrics.Op          // what the progress line sums
	liveMu  sync.Mutex

	claimBody []byte
	// doubtUntil (unix ns): a claim whose answer was lost, or a delete that
	// failed, leaves messages claimed that come back when the claim
	// expires; the drain waits until then so they are counted, not lost.
	doubtUntil atomic.Int64
}

// Run executes the configured scenario and returns its summarized result.
func Run(ctx context.Context, cfg *Config) (*result.Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := cfg.Params
	conns := p.Producer.Total() + p.Consumer.Total() + p.Observer.Total() + 1
	for _, v := range p.Sweep {
		conns = max(conns, int(v)+1)
	}
	cl, err := zaqar.New(zaqar.Options{BaseURL: cfg.Target, ProjectID: cfg.ProjectID, Token: cfg.Token, TokenFile: cfg.TokenFile, Conns: conns, Timeout: cfg.Timeout, ErrorLog: cfg.ErrorLog})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	r := &run{cfg: cfg, cl: cl, claimBody: claimBody(p)}
	if p.Requests > 0 {
		r.bounded = true
		r.budget.Store(p.Requests)
	}
	if cfg.Samples != nil {
		r.samples = newSampleLog(cfg.Samples)
		defer r.samples.flush()
	}
	for i := 0; i < p.NumQueues; i++ {
		name := p.QueuePrefix + "-" + strconv.Itoa(i)
		qp := zaqar.QueuePath(name)
		r.queues = append(r.queues, queue{name: name,
			post:     cl.URL(qp+"/messages", ""),
			claim:    cl.URL(qp+"/claims", zaqar.Limit(p.MessagesPerClaim)),
			list:     cl.URL(qp+"/messages", zaqar.Limit(p.MessagesPerList)+"&include_claimed=true"),
			listPath: qp + "/messages"})
	}
	origin := ""
	if cfg.Verify {
		origin = newOrigin()
		r.del = metrics.NewDelivery(origin)
	}
	docs := cfg.Docs
	if len(docs) == 0 {
		docs = DefaultDocs
	}
	if r.bodies, err = NewBodies(docs, origin); err != nil {
		return nil, err
	}
	if cfg.Kind == KindFairness {
		r.large, _ = NewBodies(SizedDoc(p.LargeSize), "") // a sized doc always parses
	}

	res := &result.Result{Scenario: cfg.Scenario, Target: cl.BaseURL(), Params: p}
	setup := metrics.NewOp("queue_setup")
	if cfg.Kind != KindHTTP {
		r.resetQueues(setup)
	}
	if cfg.Kind != KindHTTP && cfg.Kind != KindFlood && cfg.Kind != KindPacking && p.Producer.Total() > 0 {
		if err := r.checkPostSize(r.largestPost()); err != nil {
			return nil, err
		}
	}
	var subs []string
	if cfg.Kind == KindNotify && cfg.Notify.Subscribe {
		r.notes = metrics.NewNotifications()
		if r.recv, err = startReceiver(cfg.Notify, r.del, r.notes); err != nil {
			return nil, err
		}
		defer r.recv.stop()
		res.Params.Subscriber = r.recv.url
		subs = r.subscribe(setup)
	}
	if !cfg.StartAt.IsZero() {
		select {
		case <-time.After(time.Until(cfg.StartAt)):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	stopProgress := r.progress(time.Now(), time.Duration(p.Time)*time.Second*time.Duration(max(1, len(p.Sweep))))
	start := time.Now()
	switch cfg.Kind {
	case KindZaqar, KindHTTP, KindFairness, KindNotify:
		o := r.phaseOps()
		var moved <-chan *result.Move
		loadEnd := make(chan struct{})
		if cfg.Move.Pool != "" {
			if moved, err = r.startMove(ctx, start, loadEnd); err != nil {
				stopProgress()
				return nil, err
			}
		}
		r.phase(ctx, o, start, start.Add(time.Duration(p.Time)*time.Second))
		close(loadEnd)
		res.Ops = o.results()
		if moved != nil {
			// The move may outlast the load; the drain (the delivery
			// check) starts only once it ended, so it spans the move.
			res.Move = <-moved
			res.Move.P99Before, res.Move.P99During = result.MoveLatency(&result.Result{Start: start.UnixMilli(), Ops: res.Ops}, res.Move.Start, res.Move.End)
		}
	case KindFlood, KindPacking:
		res.Steps, res.Ops, err = r.sweep(ctx)
		if err != nil {
			stopProgress()
			return nil, err
		}
	default:
		stopProgress()
		return nil, fmt.Errorf("unknown scenario kind %q", cfg.Kind)
	}
	end := time.Now()
	stopProgress()
	res.Start, res.End = start.UnixMilli(), end.UnixMilli()
	if r.recv != nil {
		r.finishNotifications(ctx, res, setup, subs)
	} else if r.del != nil {
		r.drain(ctx, res)
		res.Delivery = result.DeliveryFrom(r.del.Finish())
	}
	if s := setup.Finish(); s.Requests > s.OK {
		res.Ops["queue_setup"] = result.FromSnapshot(s)
	}
	res.Dropped = r.dropped.Load()
	return res, res.Summarize()
}

// phaseOps names the recorders a single-phase scenario needs.
func (r *run) phaseOps() *ops {
	p := r.cfg.Params
	var names []string
	switch r.cfg.Kind {
	case KindHTTP:
		names = []string{"get"}
	case KindFairness:
		names = []string{"post_small", "post_large"}
	default:
		if p.Producer.Total() > 0 {
			names = append(names, "post")
		}
		if p.Consumer.Total() > 0 {
			names = append(names, "claim", "delete")
		}
		if p.Observer.Total() > 0 {
			names = append(names, "list")
		}
	}
	o := newOps(names...)
	r.liveMu.Lock()
	r.live = o.all
	r.liveMu.Unlock()
	return o
}

// resetQueues deletes (unless skipped) and creates every queue, as
// zaqar-bench does before it starts the clock. Failures are recorded, not
// fatal: an unreachable server still yields a summary with reasons.
func (r *run) resetQueues(op *metrics.Op) {
	s := r.cl.NewSession(NewUUID())
	for _, q := range r.queues {
		u := r.cl.URL(zaqar.QueuePath(q.name), "")
		if !r.cfg.SkipReset {
			st, err := s.Do("DELETE", u, nil)
			record(op, s, time.Now(), time.Now(), st, err, 204)
		}
		t0 := time.Now()
		st, err := s.Do("PUT", u, nil)
		record(op, s, t0, time.Now(), st, err, 201, 204)
	}
}

// largestPost is the longest POST body a run's producers send (fairness
// runs also post their large messages).
func (r *run) largestPost() int {
	n := r.bodies.Largest()
	if r.large != nil {
		n = max(n, r.large.Largest())
	}
	return n
}

// checkPostSize stops a run whose POSTs its queues would refuse as too
// large before the load starts: every post would be answered 400, and the
// run would measure nothing but that. The limit is the queue's own
// _max_messages_post_size, which Zaqar and sluice-server report with the
// queue; a server that does not report it is not checked.
func (r *run) checkPostSize(largest int) error {
	if len(r.queues) == 0 {
		return nil
	}
	q := r.queues[0]
	s := r.cl.NewSession(NewUUID())
	if st, err := s.Do("GET", r.cl.URL(zaqar.QueuePath(q.name), ""), nil); err != nil || st != 200 {
		return nil
	}
	var meta struct {
		Max *int64 `json:"_max_messages_post_size"`
	}
	if json.Unmarshal(s.Resp.Bytes(), &meta) != nil || meta.Max == nil || int64(largest) <= *meta.Max {
		return nil
	}
	return fmt.Errorf("a POST of this run is up to %d bytes; queue %s takes at most %d (_max_messages_post_size): lower the message size",
		largest, q.name, *meta.Max)
}

// record files the response s just got under op: success if the status is
// one of ok.
func record(op *metrics.Op, s *zaqar.Session, start, end time.Time, status int, err error, ok ...int) bool {
	if err == nil {
		for _, c := range ok {
			if status == c {
				op.Success(end, end.Sub(start))
				return true
			}
		}
	}
	failure(op, s, end, status, err)
	return false
}

// failure files a failed request under op by its reason, with the
// Retry-After its response carried, if any (recorded, not obeyed: see
// package zaqar).
func failure(op *metrics.Op, s *zaqar.Session, end time.Time, status int, err error) {
	if secs, given := s.RetryAfter(); given {
		op.FailureRetry(end, zaqar.Reason(status, err), secs)
		return
	}
	op.Failure(end, zaqar.Reason(status, err))
}

// take consumes one request from the count budget, if any.
func (r *run) take() bool {
	if !r.bounded {
		return true
	}
	return r.budget.Add(-1) >= 0
}

// claimBody is the claim request of a run: zaqar-bench's 300 s ttl and 200 s
// grace unless the parameters say otherwise.
func claimBody(p result.Params) []byte {
	ttl, grace := p.ClaimTTL, p.ClaimGrace
	if ttl <= 0 {
		ttl = 300
	}
	if grace <= 0 {
		grace = 200
	}
	return []byte(fmt.Sprintf(`{"ttl": %d, "grace": %d}`, ttl, grace))
}

// doubt notes at t that messages may be held by a claim nobody will
// delete: they return ClaimTTL (plus a margin) later.
func (r *run) doubt(t time.Time) {
	ttl := r.cfg.Params.ClaimTTL
	if ttl <= 0 {
		ttl = 300
	}
	until := t.Add(time.Duration(ttl)*time.Second + 2*time.Second).UnixNano()
	for {
		cur := r.doubtUntil.Load()
		if until <= cur || r.doubtUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}
