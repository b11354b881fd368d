package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice.dev/server/internal/signedurl"
	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/memory"
	_ "sluice.dev/server/internal/storage/mongo"
	"sluice.dev/server/internal/storage/redis"
	"sluice.dev/server/internal/testutil"
)

// withMongo also runs a drivers test over FerretDB (MongoDB's protocol):
// slower to start, so only for the tests that exercise each store path.
func withMongo(t *testing.T, fn func(t *testing.T, drv storage.Driver)) {
	drivers(t, fn)
	t.Run("mongo", func(t *testing.T) {
		f := testutil.StartFerretDB(t)
		u, _ := url.Parse(f.URI("notify"))
		d, err := storage.Open(context.Background(), u.String(), storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		fn(t, d)
	})
}

// drivers runs a test over the memory driver and over a real redis-server.
func drivers(t *testing.T, fn func(t *testing.T, drv storage.Driver)) {
	t.Run("memory", func(t *testing.T) { fn(t, memory.New(storage.Options{})) })
	t.Run("redis", func(t *testing.T) {
		r := testutil.StartRedis(t, testutil.RedisOptions{})
		u, _ := url.Parse(r.URL)
		d, err := redis.Open(context.Background(), u, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		fn(t, d)
	})
}

func testOptions() Options {
	return Options{Timeout: 2 * time.Second, Concurrency: 64, PerSubscriber: 4, Poll: 50 * time.Millisecond,
		RetryMin: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond}
}

// counter is an Observer that counts.
type counter struct {
	mu                         sync.Mutex
	delivered, retried, gaveUp int
}

func (c *counter) Delivered(time.Duration) { c.mu.Lock(); c.delivered++; c.mu.Unlock() }
func (c *counter) Retried()                { c.mu.Lock(); c.retried++; c.mu.Unlock() }
func (c *counter) GaveUp()                 { c.mu.Lock(); c.gaveUp++; c.mu.Unlock() }

// startEngine runs an engine until the test ends.
func startEngine(t *testing.T, drv storage.Driver, opts Options, obs Observer) *Engine {
	t.Helper()
	e, err := New(drv, opts, nil, obs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("engine did not stop within 30s")
		}
	})
	return e
}

func subscribe(t *testing.T, drv storage.Driver, q storage.QueueRef, subscriber string, opts storage.Metadata) string {
	t.Helper()
	if opts == nil {
		opts = storage.Metadata{}
	}
	id, _, err := drv.Subscriptions().Create(context.Background(), q, storage.Subscription{Subscriber: subscriber, TTL: time.Hour, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func post(t *testing.T, drv storage.Driver, q storage.QueueRef, ttl time.Duration, bodies ...string) []string {
	t.Helper()
	msgs := make([]storage.NewMessage, len(bodies))
	for i, b := range bodies {
		msgs[i] = storage.NewMessage{TTL: ttl, Body: json.RawMessage(b)}
	}
	ids, err := drv.Messages().Post(context.Background(), q, "c", msgs)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func stats(t *testing.T, drv storage.Driver, q storage.QueueRef) storage.DeliveryStats {
	t.Helper()
	st, err := drv.Deliveries().Stats(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestWebhookAsZaqarSendsIt: body and headers as Zaqar's webhook task
// sends them, plus the delivery id and the signature.
func TestWebhookAsZaqarSendsIt(t *testing.T) {
	withMongo(t, func(t *testing.T, drv storage.Driver) {
		rcv := testutil.StartWebhook(t)
		q := storage.QueueRef{Project: "p", Name: "sq"}
		sid := subscribe(t, drv, q, rcv.URL("/hook"), storage.Metadata{"secret": "s3cr3t", "post_headers": map[string]any{"X-Extra": "1"}})
		plain := subscribe(t, drv, q, rcv.URL("/plain"), nil)
		obs := &counter{}
		e := startEngine(t, drv, testOptions(), obs)
		ids := post(t, drv, q, 300*time.Second, `{"event":"created","n":1}`)
		e.Wake()
		testutil.Eventually(t, 10*time.Second, "two requests", func() bool { return len(rcv.Received()) == 2 })
		want := `{"ttl": 300, "body": {"event":"created","n":1}, "Message_Type": "Notification", "queue_name": "sq"}`
		for _, g := range rcv.Received() {
			if string(g.Body) != want {
				t.Errorf("body %s, want %s", g.Body, want)
			}
			if g.Header.Get("Content-Type") != "application/json" || g.Header.Get("Accept") != "*/*" {
				t.Errorf("headers %v", g.Header)
			}
			switch g.Path {
			case "/hook":
				if g.Header.Get(HeaderDelivery) != ids[0]+"."+sid {
					t.Errorf("delivery id %q, want %q", g.Header.Get(HeaderDelivery), ids[0]+"."+sid)
				}
				if sig := g.Header.Get(HeaderSignature); sig != Sign("s3cr3t", g.Body) || !strings.HasPrefix(sig, "sha256=") || len(sig) != 71 {
					t.Errorf("signature %q", sig)
				}
				if g.Header.Get("X-Extra") != "1" {
					t.Errorf("post_headers not applied: %v", g.Header)
				}
			case "/plain":
				if g.Header.Get(HeaderDelivery) != ids[0]+"."+plain || g.Header.Get(HeaderSignature) != "" {
					t.Errorf("subscriber without a secret: headers %v", g.Header)
				}
			default:
				t.Errorf("request to %s", g.Path)
			}
		}
		testutil.Eventually(t, 5*time.Second, "acknowledged", func() bool { return stats(t, drv, q).Delivered == 2 })
		if st := stats(t, drv, q); st.Pending != 0 || st.Failed != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

// TestReceiverDownThenBack: a subscriber that is down for 10 s gets every
// notification once it is back, and the failures are visible meanwhile.
func TestReceiverDownThenBack(t *testing.T) {
	withMongo(t, func(t *testing.T, drv storage.Driver) {
		rcv := testutil.StartWebhook(t)
		q := storage.QueueRef{Project: "p", Name: "down"}
		subscribe(t, drv, q, rcv.URL("/h"), nil)
		obs := &counter{}
		e := startEngine(t, drv, testOptions(), obs)
		rcv.Down()
		var ids []string
		for i := 0; i < 50; i++ {
			ids = append(ids, post(t, drv, q, time.Hour, fmt.Sprint(i))...)
			e.Wake()
		}
		time.Sleep(10 * time.Second)
		st := stats(t, drv, q)
		if st.Pending != 50 || st.LastError == "" || st.Delivered != 0 {
			t.Errorf("while down: %+v", st)
		}
		rcv.Up()
		testutil.Eventually(t, 60*time.Second, "all 50 delivered", func() bool { return len(rcv.ByDelivery()) == 50 })
		testutil.Eventually(t, 10*time.Second, "pending 0", func() bool { return stats(t, drv, q).Pending == 0 })
		got := rcv.ByDelivery()
		for _, id := range ids {
			if got[id+"."+stats(t, drv, q).Subscriptions[0].ID] == 0 {
				t.Errorf("message %s never delivered", id)
			}
		}
		// The observer hears of a delivery just after the store records it.
		testutil.Eventually(t, 5*time.Second, "observer counts 50 delivered", func() bool {
			obs.mu.Lock()
			defer obs.mu.Unlock()
			return obs.delivered >= 50
		})
		obs.mu.Lock()
		defer obs.mu.Unlock()
		if obs.retried == 0 || obs.gaveUp != 0 {
			t.Errorf("observer %+v", obs)
		}
	})
}

// TestHangingReceiverIsolated: a subscriber that never answers holds at
// most PerSubscriber sends and delays nobody else.
func TestHangingReceiverIsolated(t *testing.T) {
	withMongo(t, func(t *testing.T, drv storage.Driver) {
		slow, fast := testutil.StartWebhook(t), testutil.StartWebhook(t)
		slow.Hang()
		qa, qb := storage.QueueRef{Project: "p", Name: "a"}, storage.QueueRef{Project: "p", Name: "b"}
		subscribe(t, drv, qa, slow.URL("/slow"), nil)
		subscribe(t, drv, qb, fast.URL("/fast"), nil)
		opts := testOptions()
		opts.Timeout = 30 * time.Second // the hang outlasts the test
		e := startEngine(t, drv, opts, nil)
		for i := 0; i < 40; i++ {
			post(t, drv, qa, time.Hour, fmt.Sprint(i))
		}
		e.Wake()
		testutil.Eventually(t, 10*time.Second, "slow subscriber saturated", func() bool {
			now, _ := slow.InFlight()
			return now == opts.PerSubscriber
		})
		for i := 0; i < 40; i++ {
			post(t, drv, qb, time.Hour, fmt.Sprint(i))
			e.Wake()
		}
		testutil.Eventually(t, 20*time.Second, "fast subscriber served", func() bool { return len(fast.ByDelivery()) == 40 })
		_, maxIn := slow.InFlight()
		if maxIn > opts.PerSubscriber {
			t.Errorf("%d concurrent requests to one subscriber, limit %d", maxIn, opts.PerSubscriber)
		}
		if st := stats(t, drv, qa); st.Pending != 40 {
			t.Errorf("hanging subscriber's deliveries: %+v", st)
		}
		e.mu.Lock()
		held := 0
		if q := e.active[slow.URL("/slow")]; q != nil {
			held = q.running + len(q.waiting)
		}
		e.mu.Unlock()
		if held > 5*opts.PerSubscriber {
			t.Errorf("engine holds %d deliveries for one hanging subscriber, want at most %d", held, 5*opts.PerSubscriber)
		}
	})
}

// TestGiveUpAtExpiry: a delivery whose message expires before the
// subscriber answers is given up and counted failed.
func TestGiveUpAtExpiry(t *testing.T) {
	withMongo(t, func(t *testing.T, drv storage.Driver) {
		rcv := testutil.StartWebhook(t)
		rcv.SetStatus(503)
		q := storage.QueueRef{Project: "p", Name: "exp"}
		subscribe(t, drv, q, rcv.URL("/h"), nil)
		obs := &counter{}
		startEngine(t, drv, testOptions(), obs)
		post(t, drv, q, 1500*time.Millisecond, "1", "2")
		testutil.Eventually(t, 30*time.Second, "given up", func() bool { st := stats(t, drv, q); return st.Failed == 2 && st.Pending == 0 })
		st := stats(t, drv, q)
		if !strings.Contains(st.LastError, "503") || st.Subscriptions[0].Failed != 2 {
			t.Errorf("stats %+v", st)
		}
	})
}

// TestConfirmationFirst: with a subscription that needs confirmation the
// subscriber gets Zaqar's confirmation request, and messages only once it
// confirmed.
func TestConfirmationFirst(t *testing.T) {
	withMongo(t, func(t *testing.T, drv storage.Driver) {
		rcv := testutil.StartWebhook(t)
		q := storage.QueueRef{Project: "p", Name: "conf"}
		ctx := context.Background()
		sub := storage.Subscription{Subscriber: rcv.URL("/c"), TTL: time.Hour, Options: storage.Metadata{}, NeedsConfirmation: true}
		id, _, err := drv.Subscriptions().Create(ctx, q, sub)
		if err != nil {
			t.Fatal(err)
		}
		sub.ID = id
		opts := testOptions()
		opts.SignKey = []byte("confirm-key")
		e := startEngine(t, drv, opts, nil)
		e.Subscribed(q, sub)
		testutil.Eventually(t, 10*time.Second, "confirmation request", func() bool { return len(rcv.Received()) == 1 })
		var doc map[string]any
		if err := json.Unmarshal(rcv.Received()[0].Body, &doc); err != nil {
			t.Fatal(err)
		}
		if doc["Message_Type"] != "SubscriptionConfirmation" || doc["SubscriptionId"] != id || doc["queue_name"] != "conf" ||
			doc["URL-Paths"] != "/v2/queues/conf/subscriptions/"+id+"/confirm" || doc["X-Project-ID"] != "p" ||
			doc["URL-Methods"] != "PUT" {
			t.Errorf("confirmation request %s", rcv.Received()[0].Body)
		}
		path := "/v2/queues/conf/subscriptions/" + id + "/confirm"
		sig, _ := doc["URL-Signature"].(string)
		expires, _ := doc["URL-Expires"].(string)
		if !signedurl.Verify(opts.SignKey, []string{path}, []string{"PUT"}, "p", expires, sig, time.Now()) {
			t.Errorf("confirmation request %s", rcv.Received()[0].Body)
		}
		post(t, drv, q, time.Hour, "1")
		e.Wake()
		time.Sleep(500 * time.Millisecond)
		if n := len(rcv.Received()); n != 1 {
			t.Errorf("unconfirmed subscriber got %d requests", n)
		}
		if err := drv.Subscriptions().Confirm(ctx, q, id, true); err != nil {
			t.Fatal(err)
		}
		post(t, drv, q, time.Hour, "2")
		e.Wake()
		testutil.Eventually(t, 10*time.Second, "message after confirmation", func() bool { return len(rcv.Received()) == 2 })
		if body := string(rcv.Received()[1].Body); !strings.Contains(body, `"body": 2`) {
			t.Errorf("delivered %s, want message 2 only", body)
		}
		// A confirmed subscription gets no further confirmation request.
		e.Subscribed(q, sub)
		time.Sleep(300 * time.Millisecond)
		if n := len(rcv.Received()); n != 2 {
			t.Errorf("%d requests after re-subscribing a confirmed subscriber", n)
		}
	})
}

// TestMailto: a mailto subscriber is mailed through a real SMTP server.
func TestMailto(t *testing.T) {
	smtpd := testutil.StartSMTP(t)
	drv := memory.New(storage.Options{})
	q := storage.QueueRef{Project: "p", Name: "mq"}
	subscribe(t, drv, q, "mailto:ops@example.com", storage.Metadata{"subject": "hi", "from": "queue@example.org"})
	opts := testOptions()
	opts.SMTPURL = "smtp://" + smtpd.Addr + "?from=sluice@example.org"
	e := startEngine(t, drv, opts, nil)
	post(t, drv, q, 300*time.Second, `{"event":"mail"}`)
	e.Wake()
	testutil.Eventually(t, 15*time.Second, "mail received", func() bool { return len(smtpd.Mail()) == 1 })
	m := smtpd.Mail()[0]
	if m.From != "queue@example.org" || len(m.To) != 1 || m.To[0] != "ops@example.com" {
		t.Errorf("envelope %+v", m)
	}
	for _, want := range []string{"Subject: hi", "To: ops@example.com",
		`{"ttl": 300, "body": {"event":"mail"}, "Message_Type": "Notification", "queue_name": "mq"}`} {
		if !strings.Contains(m.Data, want) {
			t.Errorf("mail lacks %q:\n%s", want, m.Data)
		}
	}
	testutil.Eventually(t, 5*time.Second, "acknowledged", func() bool { return stats(t, drv, q).Delivered == 1 })
}

// TestMailtoWithoutRelay: without --smtp-url a mailto delivery stays
// pending with a clear error.
func TestMailtoWithoutRelay(t *testing.T) {
	drv := memory.New(storage.Options{})
	q := storage.QueueRef{Project: "p", Name: "norelay"}
	subscribe(t, drv, q, "mailto:ops@example.com", nil)
	e := startEngine(t, drv, testOptions(), nil)
	post(t, drv, q, time.Hour, "1")
	e.Wake()
	testutil.Eventually(t, 5*time.Second, "error recorded", func() bool { return stats(t, drv, q).LastError == errNoRelay.Error() })
	if st := stats(t, drv, q); st.Pending != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestBackoff: delays grow from RetryMin, never exceed RetryMax, and are
// jittered (generated over many attempts and draws).
func TestBackoff(t *testing.T) {
	e := &Engine{opts: Options{RetryMin: 100 * time.Millisecond, RetryMax: 10 * time.Second}}
	for attempts := 0; attempts < 64; attempts++ {
		lo := min(e.opts.RetryMin<<min(attempts, 20), e.opts.RetryMax) / 2
		seen := map[time.Duration]bool{}
		for i := 0; i < 200; i++ {
			d := e.backoff(attempts)
			if d < lo || d > 2*lo+1 || d > e.opts.RetryMax {
				t.Fatalf("attempt %d: delay %v outside [%v, %v]", attempts, d, lo, min(2*lo, e.opts.RetryMax))
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("attempt %d: only %d distinct delays: no jitter", attempts, len(seen))
		}
	}
}

// TestStopReleasesWaiting: deliveries a stopping replica still had waiting
// are handed back at once, not left leased until their lease lapses.
func TestStopReleasesWaiting(t *testing.T) {
	drv := memory.New(storage.Options{})
	rcv := testutil.StartWebhook(t)
	rcv.Hang()
	q := storage.QueueRef{Project: "p", Name: "stop"}
	subscribe(t, drv, q, rcv.URL("/h"), nil)
	opts := testOptions()
	opts.PerSubscriber = 2
	opts.Timeout = 30 * time.Second
	e, err := New(drv, opts, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	post(t, drv, q, time.Hour, "1", "2", "3", "4", "5", "6", "7", "8", "9", "10")
	e.Wake()
	testutil.Eventually(t, 10*time.Second, "saturated", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.held == 10
	})
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("engine did not stop")
	}
	got, _, err := drv.Deliveries().Lease(context.Background(), 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The two that were being sent are retried after a backoff; under a
	// loaded machine that may have passed already.
	if len(got) < 8 {
		t.Errorf("%d deliveries leasable right after the stop, want at least the 8 that were waiting", len(got))
	}
}

// leaseCounter counts the Lease calls an engine makes.
type leaseCounter struct {
	storage.Driver
	mu    sync.Mutex
	calls int
}

func (c *leaseCounter) Deliveries() storage.DeliveryStore {
	return countedLeases{c.Driver.Deliveries(), c}
}

func (c *leaseCounter) count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.calls }

type countedLeases struct {
	storage.DeliveryStore
	c *leaseCounter
}

func (l countedLeases) Lease(ctx context.Context, limit int, hold time.Duration) ([]storage.Delivery, time.Time, error) {
	l.c.mu.Lock()
	l.c.calls++
	l.c.mu.Unlock()
	return l.DeliveryStore.Lease(ctx, limit, hold)
}

// TestIdleEngineAsksRarely: with nothing pending, the engine asks the
// store once per IdlePoll, not once per Poll.
func TestIdleEngineAsksRarely(t *testing.T) {
	drivers(t, func(t *testing.T, drv storage.Driver) {
		lc := &leaseCounter{Driver: drv}
		opts := testOptions()
		opts.Poll, opts.IdlePoll = 10*time.Millisecond, 300*time.Millisecond
		start := time.Now()
		startEngine(t, lc, opts, nil)
		time.Sleep(1500 * time.Millisecond)
		// One at start, one per IdlePoll since, one that may be under way.
		if n, most := lc.count(), 2+int(time.Since(start)/opts.IdlePoll); n > most {
			t.Errorf("%d leases in %v with nothing pending, want at most %d", n, time.Since(start), most)
		}
	})
}

// TestRetryIsSentAtItsTime: a failed attempt's retry is sent when it falls
// due, not after the idle poll; the lease reported when it would be due.
func TestRetryIsSentAtItsTime(t *testing.T) {
	withMongo(t, func(t *testing.T, drv storage.Driver) {
		rcv := testutil.StartWebhook(t)
		rcv.SetStatus(503)
		q := storage.QueueRef{Project: "p", Name: "retry-at"}
		subscribe(t, drv, q, rcv.URL("/r"), nil)
		opts := testOptions()
		opts.IdlePoll = time.Hour
		e := startEngine(t, drv, opts, nil)
		post(t, drv, q, time.Hour, `"once"`)
		e.Wake()
		testutil.Eventually(t, 10*time.Second, "a failed attempt", func() bool { return stats(t, drv, q).LastError != "" })
		rcv.SetStatus(0)
		testutil.Eventually(t, 20*time.Second, "the retry", func() bool { return len(rcv.Received()) == 1 })
	})
}

// TestUnwokenDeliveriesAreTakenOver: deliveries recorded without waking
// this engine (another replica posted them and died) are sent within the
// idle poll.
func TestUnwokenDeliveriesAreTakenOver(t *testing.T) {
	drivers(t, func(t *testing.T, drv storage.Driver) {
		rcv := testutil.StartWebhook(t)
		q := storage.QueueRef{Project: "p", Name: "unwoken"}
		subscribe(t, drv, q, rcv.URL("/u"), nil)
		opts := testOptions()
		opts.IdlePoll = 300 * time.Millisecond
		startEngine(t, drv, opts, nil)
		time.Sleep(100 * time.Millisecond) // the engine found nothing and sleeps
		post(t, drv, q, time.Hour, `"unwoken"`)
		testutil.Eventually(t, 20*time.Second, "the unwoken delivery", func() bool { return len(rcv.Received()) == 1 })
	})
}

// TestWakesWithNothingPendingAreCoalesced: a stream of wakes (posts to
// queues without subscribers) makes an engine that found nothing pending
// look at most once per wakeGap; a delivery recorded after it is sent.
func TestWakesWithNothingPendingAreCoalesced(t *testing.T) {
	drivers(t, func(t *testing.T, drv storage.Driver) {
		lc := &leaseCounter{Driver: drv}
		opts := testOptions()
		opts.IdlePoll = time.Hour
		e := startEngine(t, lc, opts, nil)
		start := time.Now()
		for i := 0; i < 20000 && time.Since(start) < 300*time.Millisecond; i++ {
			e.Wake()
			time.Sleep(20 * time.Microsecond)
		}
		elapsed := time.Since(start)
		// One at start, one per wakeGap since, one that may be under way.
		if n, most := lc.count(), 2+int(elapsed/wakeGap); n > most {
			t.Errorf("%d leases for %v of wakes, want at most %d", n, elapsed, most)
		}
		rcv := testutil.StartWebhook(t)
		q := storage.QueueRef{Project: "p", Name: "coalesced"}
		subscribe(t, drv, q, rcv.URL("/c"), nil)
		post(t, drv, q, time.Hour, `"after the wakes"`)
		e.Wake()
		testutil.Eventually(t, 10*time.Second, "the delivery after the wakes", func() bool { return len(rcv.Received()) == 1 })
	})
}
