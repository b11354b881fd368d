package load

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"sluice.dev/bench/internal/metrics"
	"sluice.dev/bench/internal/result"
	"sluice.dev/bench/internal/zaqar"
)

// Notify configures the notifications scenario's built-in webhook receiver.
type Notify struct {
	Listen    string // address the receiver listens on (host:port; port 0 = any)
	URL       string // subscriber URL the server posts to; default http://<bound address>/notify
	Secret    string // subscribe with options.secret and check X-Sluice-Signature
	Subscribe bool   // false: post only, no subscription (the throughput baseline)
	// Faults: windows during which the receiver answers late or 500
	// (--receiver-fault); they start counting with the load phase.
	Faults []ReceiverFault
}

// receiver is the webhook endpoint: every notification body carries the
// delivery tag of the message it announces (Zaqar's {"body", "ttl",
// "queue_name", "Message_Type"}), which is all it needs to account for it.
type receiver struct {
	ln     net.Listener
	srv    *http.Server
	url    string
	secret []byte
	del    *metrics.Delivery
	notes  *metrics.Notifications
	op     *metrics.Op // "notify": failures by reason here, latencies added at the end
	faults *faultSchedule
	quit   chan struct{} // closed by stop: held calls give up
	once   sync.Once
}

// notification is the part of a webhook body the receiver reads.
type notification struct {
	Body taggedBody `json:"body"`
	Type string     `json:"Message_Type"`
}

// startReceiver listens and serves until stop; the URL is what gets subscribed.
func startReceiver(n Notify, del *metrics.Delivery, notes *metrics.Notifications) (*receiver, error) {
	if err := ValidateReceiverFaults(n.Faults); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", n.Listen)
	if err != nil {
		return nil, fmt.Errorf("notification receiver: %w", err)
	}
	u := n.URL
	if u == "" {
		host, port, _ := net.SplitHostPort(ln.Addr().String())
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			ln.Close()
			return nil, fmt.Errorf("notification receiver listens on %s: give --receiver-url, the address the server reaches it at", ln.Addr())
		}
		u = "http://" + net.JoinHostPort(host, port) + "/notify"
	}
	rc := &receiver{ln: ln, url: u, secret: []byte(n.Secret), del: del, notes: notes, op: metrics.NewOp("notify"),
		faults: newFaultSchedule(n.Faults), quit: make(chan struct{})}
	rc.srv = &http.Server{Handler: rc, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() { _ = rc.srv.Serve(ln) }()
	return rc, nil
}

// ServeHTTP accounts for one notification and answers 204 at once, so the
// receiver never is what slows delivery down, unless a receiver fault is
// active: then it holds the call for the fault's latency and answers 500
// to the fault's share of calls. Only a notification answered 2xx is
// accounted as delivered; a refused or abandoned one must come again.
func (rc *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, err := io.ReadAll(io.LimitReader(req.Body, 4<<20))
	if req.Method != http.MethodPost || err != nil {
		rc.op.Failure(now, "bad_request")
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if len(rc.secret) > 0 && !rc.signed(req.Header.Get("X-Sluice-Signature"), body) {
		rc.op.Failure(now, "bad_signature")
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var n notification
	if json.Unmarshal(body, &n) != nil {
		rc.op.Failure(now, "bad_body")
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if i := rc.faults.active(now); i >= 0 {
		if !rc.misbehave(w, req, i) {
			return
		}
		now = time.Now() // delivered when answered
	}
	w.WriteHeader(http.StatusNoContent)
	if n.Type != "" && n.Type != "Notification" {
		rc.op.Count("other_"+strings.ToLower(n.Type), 1) // e.g. a confirmation request
		return
	}
	if t := n.Body.SB; t != nil {
		rc.del.Claimed(t.O, t.N, 0, now)
		if t.O == rc.del.Origin {
			rc.notes.Arrived(t.N, now)
		}
	} else {
		rc.op.Count("untagged", 1)
	}
}

// misbehave applies receiver fault i to one call: it waits the fault's
// latency, then answers 500 if the call is one of the fault's share. It
// reports whether the call is still to be answered 2xx (and accounted).
func (rc *receiver) misbehave(w http.ResponseWriter, req *http.Request, i int) bool {
	f := rc.faults.faults[i]
	rc.op.Count(FaultCalls, 1)
	fail := rc.faults.call(i)
	if f.Latency > 0 {
		rc.op.Count(FaultDelayed, 1)
		t := time.NewTimer(f.Latency)
		defer t.Stop()
		abandoned := false
		select {
		case <-t.C:
			abandoned = req.Context().Err() != nil
		case <-req.Context().Done(): // the server's delivery timeout cut it off
			abandoned = true
		case <-rc.quit: // the run is over
			abandoned = true
		}
		if abandoned {
			// Never a 2xx (what a handler returning silently would send)
			// for a call that is not accounted.
			rc.op.Count(FaultAbandoned, 1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return false
		}
	}
	if fail {
		rc.op.Count(FaultFailed, 1)
		w.WriteHeader(http.StatusInternalServerError)
		return false
	}
	return true
}

// signed checks "sha256=<hex HMAC-SHA256(secret, body)>".
func (rc *receiver) signed(header string, body []byte) bool {
	got, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	sum, err := hex.DecodeString(got)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, rc.secret)
	mac.Write(body)
	return hmac.Equal(sum, mac.Sum(nil))
}

func (rc *receiver) stop() {
	rc.once.Do(func() { close(rc.quit) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rc.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		rc.srv.Close()
	}
}

// subscription is what the server answered to the subscribe call.
type subscription struct {
	ID string `json:"subscription_id"`
}

// subscribe subscribes the receiver to every queue, for as long as the run
// and its drain can last (a leftover subscription expires on its own), and
// returns the subscription URL of each queue for unsubscribe.
func (r *run) subscribe(op *metrics.Op) []string {
	ttl := max(60, r.cfg.Params.Time+int(r.cfg.Drain.Seconds())+120)
	body := []byte(`{"subscriber":` + strconv.Quote(r.recv.url) + `,"ttl":` + strconv.Itoa(ttl) + `,"options":{`)
	if len(r.recv.secret) > 0 {
		body = append(body, `"secret":`+strconv.Quote(string(r.recv.secret))...)
	}
	body = append(body, "}}"...)
	s := r.cl.NewSession(NewUUID())
	var subs []string
	for _, q := range r.queues {
		t0 := time.Now()
		st, err := s.Do("POST", r.cl.URL(zaqar.QueuePath(q.name)+"/subscriptions", ""), body)
		if !record(op, s, t0, time.Now(), st, err, 201) {
			continue
		}
		var sub subscription
		if json.Unmarshal(s.Resp.Bytes(), &sub) == nil && sub.ID != "" {
			subs = append(subs, zaqar.QueuePath(q.name)+"/subscriptions/"+sub.ID)
		}
	}
	// The load phase starts right after the subscriptions (at --start-at
	// if that is later): the receiver faults' clock, within microseconds
	// of the result's start_unix_ms.
	start := time.Now()
	if r.cfg.StartAt.After(start) {
		start = r.cfg.StartAt
	}
	r.recv.faults.begin(start)
	return subs
}

// unsubscribe deletes the run's subscriptions.
func (r *run) unsubscribe(op *metrics.Op, subs []string) {
	s := r.cl.NewSession(NewUUID())
	for _, path := range subs {
		t0 := time.Now()
		st, err := s.Do("DELETE", r.cl.URL(path, ""), nil)
		record(op, s, t0, time.Now(), st, err, 204)
	}
}

// awaitNotifications waits, up to the drain time, until every acknowledged
// post has been notified: "lost" then means lost, not "still on its way".
func (r *run) awaitNotifications(ctx context.Context) {
	deadline := time.Now().Add(r.cfg.Drain)
	for r.notes.Outstanding() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	// Duplicates are sent after the first delivery: give them a moment to show.
	time.Sleep(min(200*time.Millisecond, r.cfg.Drain))
}

// finishNotifications waits for the last notifications, unsubscribes, and
// files the ack -> webhook latencies under "notify" (with the receiver's
// failures) and the lost / duplicated accounting under delivery.
func (r *run) finishNotifications(ctx context.Context, res *result.Result, setup *metrics.Op, subs []string) {
	r.awaitNotifications(ctx)
	r.unsubscribe(setup, subs)
	r.recv.stop()
	r.notes.Latencies(r.recv.op)
	res.Ops["notify"] = result.FromSnapshot(r.recv.op.Finish())
	res.Delivery = result.DeliveryFrom(r.del.Finish())
	e2e := metrics.NewOp("e2e")
	r.notes.Latencies(e2e)
	res.Delivery.E2E = result.FromSnapshot(e2e.Finish())
}
