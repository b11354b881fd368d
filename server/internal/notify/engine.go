// Package notify sends the notifications that subscriptions ask for: it
// leases due deliveries from the storage driver, posts each to its webhook
// or mails it, and records the outcome. Nothing it holds in memory matters
// for correctness: every delivery is in the backend from the moment its
// message was posted, under a lease while a replica sends it, so a replica
// that dies only delays what it held until the lease lapses.
//
// Resources are bounded: at most Concurrency deliveries are held by a
// replica (sending or waiting for their subscriber), at most PerSubscriber
// sends to one subscriber at once and 4*PerSubscriber more waiting for
// it (the rest go back to the store), and each send has a timeout. A slow or
// dead subscriber therefore occupies a bounded share of one replica and
// never touches posting, which only writes to the backend.
package notify

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

// Options tune the engine; see config.Options for their flags.
type Options struct {
	Timeout       time.Duration // one send
	Concurrency   int           // deliveries held by this replica
	PerSubscriber int           // sends in flight to one subscriber
	Poll          time.Duration // look for due deliveries this often while some wait for room
	IdlePoll      time.Duration // the longest sleep otherwise (at least Poll)
	RetryMin      time.Duration // first backoff
	RetryMax      time.Duration // longest backoff
	SMTPURL       string        // smtp://host:port[?from=addr]; "" : no mail
	SignKey       []byte        // key of pre-signed URLs: signs confirmation requests
	// Trusts gives trust+ subscribers their tokens (keystone mode); nil:
	// their deliveries fail, they are never posted to unauthenticated.
	Trusts Trusts
}

// Observer is told the outcome of each attempt (the server's metrics).
type Observer interface {
	// Delivered reports a successful send and the time from the post.
	Delivered(latency time.Duration)
	// Retried reports a failed attempt that will be tried again.
	Retried()
	// GaveUp reports a delivery abandoned because its message or its
	// subscription expired first.
	GaveUp()
}

type nopObserver struct{}

func (nopObserver) Delivered(time.Duration) {}
func (nopObserver) Retried()                {}
func (nopObserver) GaveUp()                 {}

// Engine delivers notifications for one server replica.
type Engine struct {
	drv  storage.Driver
	opts Options
	log  *slog.Logger
	obs  Observer
	web  *webhook
	mail *mailer
	subs *subCache

	wake chan struct{}

	mu     sync.Mutex
	held   int                     // deliveries leased and not yet settled
	active map[string]*subscriberQ // by subscriber URI
	sends  sync.WaitGroup          // running sends
	confs  chan struct{}           // bounds concurrent confirmation requests
}

// subscriberQ is what one subscriber has in flight and waiting.
type subscriberQ struct {
	running int
	waiting []job
	// progress is when a send to it last finished (or it became busy).
	progress time.Time
}

// waitingPerSubscriber bounds the deliveries waiting for one subscriber's
// send slots, so that a burst to a fast subscriber is absorbed locally and
// a stuck one holds little.
func (e *Engine) waitingPerSubscriber() int { return 4 * e.opts.PerSubscriber }

type job struct {
	d   storage.Delivery
	sub storage.Subscription
	// until is when the lease ends: a job not started well before it is
	// dropped, since another replica may lease it after that.
	until time.Time
}

// New builds an engine over drv. log and obs may be nil.
func New(drv storage.Driver, opts Options, log *slog.Logger, obs Observer) (*Engine, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if obs == nil {
		obs = nopObserver{}
	}
	mail, err := newMailer(opts.SMTPURL, opts.Timeout)
	if err != nil {
		return nil, err
	}
	return &Engine{
		drv: drv, opts: opts, log: log, obs: obs,
		web:    newWebhook(opts.Timeout, opts.PerSubscriber, opts.Trusts),
		mail:   mail,
		subs:   newSubCache(drv.Subscriptions()),
		wake:   make(chan struct{}, 1),
		active: map[string]*subscriberQ{},
		confs:  make(chan struct{}, 16),
	}, nil
}

// hold is how long a lease keeps a delivery from other replicas: long
// enough to wait for a send slot and make the send.
func (e *Engine) hold() time.Duration { return 3*e.opts.Timeout + 5*time.Second }

// Wake makes the engine look for due deliveries now (a post just recorded
// some). It never blocks.
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run leases and sends deliveries until ctx is done, then waits for the
// sends in flight (each bounded by the send timeout).
//
// Between leases it sleeps until the earliest pending delivery falls due,
// as the lease reported, so an idle replica does not ask the store four
// times a second whether anything is due. It still looks every IdlePoll:
// deliveries that another replica's post recorded are that replica's to
// send, and this is how soon they are taken over if it died first.
func (e *Engine) Run(ctx context.Context) {
	timer := time.NewTimer(e.opts.Poll)
	defer timer.Stop()
	backoff := time.Duration(0)
	for {
		leased := time.Now()
		more, next, err := e.leaseOnce(ctx)
		if err != nil && ctx.Err() == nil {
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			e.log.Warn("leasing deliveries failed", "error", err.Error(), "retry_in", backoff.String())
		} else {
			backoff = 0
		}
		// A full batch that every subscriber could take: more may be due
		// right away. A batch that overflowed a busy subscriber waits for
		// the next look instead, so a stuck subscriber's backlog is not
		// leased and released in a loop.
		if more && backoff == 0 && e.room() > 0 {
			continue
		}
		wait := backoff
		if backoff == 0 {
			wait = e.untilNext(next, time.Now())
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
		case <-timer.C:
		case <-e.wake:
			// Every post wakes the engine, whether or not it recorded
			// deliveries. While the store had none pending at the last
			// look, wakes closer together than wakeGap count as one, so
			// posts to queues without subscribers cost the store at most
			// 1/wakeGap leases a second rather than one per wake.
			if gap := wakeGap - time.Since(leased); next.IsZero() && err == nil && gap > 0 {
				timer.Reset(gap)
				select {
				case <-ctx.Done():
				case <-timer.C:
				}
			}
		}
		if ctx.Err() != nil {
			e.sends.Wait()
			return
		}
	}
}

// wakeGap bounds how often posts make an engine with nothing pending look
// again; it is all the delay a notification can gain from it.
const wakeGap = 5 * time.Millisecond

// minWait keeps a replica whose clock is behind the one that set a due
// time from asking again in a tight loop until its clock catches up.
const minWait = 10 * time.Millisecond

// untilNext is how long to sleep after a lease that reported next (see
// storage.DeliveryStore.Lease) at now.
func (e *Engine) untilNext(next, now time.Time) time.Duration {
	longest := max(e.opts.IdlePoll, e.opts.Poll)
	switch d := next.Sub(now); {
	case next.IsZero():
		return longest // nothing pending
	case d <= 0:
		return e.opts.Poll // due deliveries wait for room
	default:
		return min(max(d, minWait), longest)
	}
}

// room is how many more deliveries this replica may hold.
func (e *Engine) room() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.opts.Concurrency - e.held
}

// leaseOnce leases up to the free room and dispatches what it got; more
// reports that the lease returned as many as asked and none overflowed,
// next when the earliest delivery left pending falls due (zero: none).
func (e *Engine) leaseOnce(ctx context.Context) (more bool, next time.Time, err error) {
	n := e.room()
	if n <= 0 {
		return false, time.Now(), nil
	}
	lctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	start := time.Now()
	ds, next, err := e.drv.Deliveries().Lease(lctx, n, e.hold())
	if err != nil {
		return false, time.Time{}, err
	}
	until := start.Add(e.hold())
	var over []overflow
	for _, d := range ds {
		if o, ok := e.dispatch(ctx, d, until); !ok {
			over = append(over, o)
		}
	}
	// What a saturated subscriber could not take goes back to the store,
	// soon for a subscriber that is making progress, after the longest
	// retry delay for one that is stuck, so that its backlog is not leased
	// over and over.
	for _, o := range over {
		at := time.Now().Add(o.after)
		e.settle(ctx, func(c context.Context) error { return e.drv.Deliveries().Release(c, o.d, at) })
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return len(ds) == n && len(over) == 0, next, nil
}

// overflow is a leased delivery its subscriber had no room for.
type overflow struct {
	d     storage.Delivery
	after time.Duration
}

// dispatch starts the send of d, or queues it behind its subscriber's
// running sends; ok is false when the subscriber is saturated and d must
// be released.
func (e *Engine) dispatch(ctx context.Context, d storage.Delivery, until time.Time) (o overflow, ok bool) {
	sctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	sub, found, err := e.subs.get(sctx, d.Queue, d.SubscriptionID)
	cancel()
	if err != nil {
		return overflow{d, e.opts.RetryMin}, false
	}
	if !found {
		e.settle(ctx, func(c context.Context) error {
			return e.drv.Deliveries().Fail(c, d, "subscription no longer exists")
		})
		e.obs.GaveUp()
		return overflow{}, true
	}
	e.mu.Lock()
	q := e.active[sub.Subscriber]
	if q == nil {
		q = &subscriberQ{progress: time.Now()}
		e.active[sub.Subscriber] = q
	}
	j := job{d: d, sub: sub, until: until}
	switch {
	case q.running < e.opts.PerSubscriber:
		q.running++
		e.held++
		e.mu.Unlock()
		e.start(ctx, j)
	case len(q.waiting) < e.waitingPerSubscriber():
		q.waiting = append(q.waiting, j)
		e.held++
		e.mu.Unlock()
	default:
		after := e.opts.RetryMin
		if time.Since(q.progress) > time.Second {
			after = max(e.opts.RetryMax, e.opts.Timeout)
		}
		e.mu.Unlock()
		return overflow{d, after}, false
	}
	return overflow{}, true
}

// start sends j and then whatever waits for the same subscriber.
func (e *Engine) start(ctx context.Context, j job) {
	e.sends.Add(1)
	go func() {
		defer e.sends.Done()
		for {
			if time.Until(j.until) > e.opts.Timeout {
				e.send(ctx, j)
			}
			e.mu.Lock()
			e.held--
			q := e.active[j.sub.Subscriber]
			q.progress = time.Now()
			if len(q.waiting) == 0 || ctx.Err() != nil {
				// Shutting down: what waits goes back to the store at once,
				// for another replica to send.
				left := q.waiting
				e.held -= len(left)
				q.waiting = nil
				q.running--
				if q.running == 0 {
					delete(e.active, j.sub.Subscriber)
				}
				e.mu.Unlock()
				for _, w := range left {
					e.settle(ctx, func(c context.Context) error { return e.drv.Deliveries().Release(c, w.d, time.Now()) })
				}
				e.Wake()
				return
			}
			j = q.waiting[0]
			q.waiting = q.waiting[1:]
			e.mu.Unlock()
		}
	}()
}

// send makes one attempt and records its outcome.
func (e *Engine) send(ctx context.Context, j job) {
	var err error
	switch {
	case j.d.Unreadable:
		// No key of this replica decrypts the body. Another replica's may
		// (a new key reaches replicas one at a time): a failed attempt,
		// retried until the message expires, never sent without its body.
		err = storage.ErrUndecryptable
	case scheme(j.sub.Subscriber) == "mailto":
		err = e.mail.send(ctx, j.sub, j.d.Queue.Name, notification(j.d))
	default:
		err = e.web.post(ctx, j.d.Queue, j.sub, j.d.ID(), webhookBody(j.sub, notification(j.d)))
	}
	if err == nil {
		// Counted once recorded, so a scrape that shows it delivered no
		// longer counts it pending.
		latency := time.Since(j.d.Posted)
		e.settle(ctx, func(c context.Context) error { return e.drv.Deliveries().Ack(c, j.d) })
		e.obs.Delivered(latency)
		return
	}
	text := err.Error()
	next := time.Now().Add(e.backoff(j.d.Attempts))
	if !next.Before(j.d.Expires) || !next.Before(j.sub.Expires) {
		e.settle(ctx, func(c context.Context) error { return e.drv.Deliveries().Fail(c, j.d, text) })
		e.obs.GaveUp()
		return
	}
	e.settle(ctx, func(c context.Context) error { return e.drv.Deliveries().Retry(c, j.d, next, text) })
	e.obs.Retried()
}

// settle records an outcome with its own deadline; it still runs while the
// server shuts down, so a finished send is not sent again.
func (e *Engine) settle(ctx context.Context, f func(context.Context) error) {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.Timeout)
	defer cancel()
	if err := f(c); err != nil {
		e.log.Warn("recording a delivery outcome failed; it will be sent again", "error", err.Error())
	}
}

// backoff is the delay before attempt n+1: exponential from RetryMin,
// capped at RetryMax, with jitter so that a subscriber coming back is not
// hit by every pending delivery in the same instant.
func (e *Engine) backoff(attempts int) time.Duration {
	d := e.opts.RetryMin
	for i := 0; i < attempts && d < e.opts.RetryMax; i++ {
		d *= 2
	}
	d = min(d, e.opts.RetryMax)
	return d/2 + rand.N(d/2+1)
}
