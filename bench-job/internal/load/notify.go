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
}

// notification is the part of a webhook body the receiver reads.
type notification struct {
	Body taggedBody `json:"body"`
	Type string     `json:"Message_Type"`
}

// startReceiver listens and serves until stop; the URL is what gets subscribed.
func startReceiver(n Notify, del *metrics.Delivery, notes *metrics.Notifications) (*receiver, error) {
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
	rc := &receiver{ln: ln, url: u, secret: []byte(n.Secret), del: del, notes: notes, op: metrics.NewOp("notify")}
	rc.srv = &http.Server{Handler: rc, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() { _ = rc.srv.Serve(ln) }()
	return rc, nil
}

// ServeHTTP accounts for one notification and answers 204 at once, so the
// receiver never is what slows delivery down.
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
