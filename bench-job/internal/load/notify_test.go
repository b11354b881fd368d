package load

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"
	"time"

	"sluice.dev/bench/internal/metrics"
	"sluice.dev/bench/internal/result"
)

// notice is a webhook body as Zaqar (and sluice) send it.
func notice(origin string, seq int64, kind string) []byte {
	return fmt.Appendf(nil, `{"body": {"sb": {"o": %q, "n": %d, "t": 1}, "evt": "x"}, "ttl": 60, "queue_name": "q", "Message_Type": %q}`, origin, seq, kind)
}

func sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func deliver(t *testing.T, url string, body []byte, sig string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if sig != "" {
		req.Header.Set("X-Sluice-Signature", sig)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The receiver accounts for each notification by its tag: first arrivals,
// duplicates, other runs' messages, and refuses a body whose signature does
// not match the secret it subscribed with.
func TestReceiverAccountsAndChecksSignatures(t *testing.T) {
	del := metrics.NewDelivery("me")
	notes := metrics.NewNotifications()
	rc, err := startReceiver(Notify{Listen: "127.0.0.1:0", Secret: "k", Subscribe: true}, del, notes)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.stop()
	t0 := time.Now()
	for seq := range int64(4) {
		del.Produced(seq)
		notes.Acked(seq, t0)
	}
	for _, c := range []struct {
		body []byte
		sig  string
		want int
	}{
		{notice("me", 0, "Notification"), "", 401}, // unsigned
		{notice("me", 0, "Notification"), sign("other", notice("me", 0, "Notification")), 401},
		{notice("me", 0, "Notification"), "sha256=zz", 401}, // not hex
		{notice("me", 0, "Notification"), sign("k", notice("me", 0, "Notification")), 204},
		{notice("me", 0, "Notification"), sign("k", notice("me", 0, "Notification")), 204}, // duplicate
		{notice("me", 1, "Notification"), sign("k", notice("me", 1, "Notification")), 204},
		{notice("them", 2, "Notification"), sign("k", notice("them", 2, "Notification")), 204},
		{notice("me", 3, "SubscriptionConfirmation"), sign("k", notice("me", 3, "SubscriptionConfirmation")), 204},
		{[]byte("{"), sign("k", []byte("{")), 400},
	} {
		if got := deliver(t, rc.url, c.body, c.sig); got != c.want {
			t.Errorf("%s (sig %q): status %d, want %d", c.body, c.sig, got, c.want)
		}
	}
	if n := notes.Outstanding(); n != 2 {
		t.Errorf("outstanding %d, want 2 (seq 2 came from another run, seq 3 was only a confirmation)", n)
	}
	notes.Latencies(rc.op)
	s := rc.op.Finish()
	if s.OK != 2 || s.Errors["bad_signature"] != 3 || s.Errors["bad_body"] != 1 || s.Extra["other_subscriptionconfirmation"] != 1 {
		t.Errorf("notify op: ok %d errors %v extra %v", s.OK, s.Errors, s.Extra)
	}
	d := result.DeliveryFrom(del.Finish())
	r := &result.Result{Ops: map[string]*result.OpResult{}, Delivery: d}
	if err := r.Summarize(); err != nil {
		t.Fatal(err)
	}
	if d.Produced != 4 || d.Unique != 2 || d.Lost != 2 || d.Duplicated != 1 || d.Foreign != 1 || d.Consumed != 4 {
		t.Errorf("delivery: %+v", *d)
	}
}

// A notification may beat the post's response: its latency is 0, never
// negative, and the per-second series follows arrival order.
func TestNotificationLatencyPairsAckWithArrival(t *testing.T) {
	n := metrics.NewNotifications()
	base := time.Unix(1_700_000_000, 0)
	n.Acked(0, base)
	n.Arrived(0, base.Add(3*time.Millisecond))
	n.Arrived(1, base.Add(time.Millisecond)) // before its ack
	n.Acked(1, base.Add(2*time.Millisecond))
	n.Arrived(1, base.Add(9*time.Millisecond)) // a duplicate: the first arrival counts
	n.Acked(2, base)                           // never notified
	op := metrics.NewOp("notify")
	n.Latencies(op)
	s := op.Finish()
	if s.OK != 2 || s.Hist.Min() > 1 || s.Hist.Max() < 2990 || s.Hist.Max() > 3010 {
		t.Errorf("ok %d min %dµs max %dµs, want 2, <= 1 (the histogram floor), ~3000", s.OK, s.Hist.Min(), s.Hist.Max())
	}
	if s.Extra["before_ack"] != 1 {
		t.Errorf("before_ack %d, want 1", s.Extra["before_ack"])
	}
	if n.Outstanding() != 1 {
		t.Errorf("outstanding %d, want 1", n.Outstanding())
	}
}

// Listening on every interface needs the address the server reaches.
func TestReceiverNeedsURLOnWildcard(t *testing.T) {
	if _, err := startReceiver(Notify{Listen: "0.0.0.0:0"}, metrics.NewDelivery("o"), metrics.NewNotifications()); err == nil {
		t.Fatal("wildcard listen without --receiver-url accepted")
	}
	rc, err := startReceiver(Notify{Listen: "0.0.0.0:0", URL: "http://bench-0.bench:9000/n"}, metrics.NewDelivery("o"), metrics.NewNotifications())
	if err != nil || rc.url != "http://bench-0.bench:9000/n" {
		t.Fatalf("url %v err %v", rc, err)
	}
	rc.stop()
}
