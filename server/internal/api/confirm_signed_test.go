package api

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"sluice.dev/server/internal/config"
)

// TestConfirmationCarriesSignedURL: with require-confirmation on and a key
// for pre-signed URLs, the confirmation request a subscriber receives holds
// a pre-signed URL with which it confirms, without a token, exactly its own
// subscription (of a queue or of a topic) and nothing else.
func TestConfirmationCarriesSignedURL(t *testing.T) {
	got := make(chan map[string]any, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var doc map[string]any
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &doc) == nil && doc["Message_Type"] == "SubscriptionConfirmation" {
			got <- doc
		}
	}))
	defer hook.Close()

	s := newTestServer(t, func(o *config.Options) {
		withSecret(o)
		o.RequireConfirmation = true
		o.Deliveries = true
		o.DeliveryPoll = 20 * time.Millisecond
		o.Tokens = map[string]string{"tok-p1": "p1"}
	})
	ctx, cancel := context.WithCancel(context.Background())
	stop, err := s.StartDeliveries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, nil) }()
	defer func() {
		_ = stopServing(cancel, done)
		stop()
	}()
	ts := &testServer{Server: s, base: "http://" + ln.Addr().String(), t: t}
	owner := std("Authorization", "Bearer tok-p1")

	for _, coll := range []string{"/v2/queues/cq", "/v2/topics/ct"} {
		id := ts.must(201, "POST", coll+"/subscriptions", owner, `{"subscriber":"`+hook.URL+`/c","ttl":3600}`).json(t)["subscription_id"].(string)
		var doc map[string]any
		select {
		case doc = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no confirmation request", coll)
		}
		confirm := coll + "/subscriptions/" + id + "/confirm"
		if doc["URL-Paths"] != confirm || doc["URL-Methods"] != "PUT" || doc["X-Project-ID"] != "p1" || doc["URL-Signature"] == "" {
			t.Fatalf("%s: confirmation %v", coll, doc)
		}
		signed := hdr{"Client-ID": testClient, "X-Project-ID": "p1", "URL-Signature": doc["URL-Signature"].(string),
			"URL-Expires": doc["URL-Expires"].(string), "URL-Methods": "PUT", "URL-Paths": confirm}
		// The signed URL reaches nothing else: not the subscription itself,
		// not another subscription's confirm path.
		ts.must(404, "GET", coll+"/subscriptions/"+id, signed, "")
		ts.must(404, "PUT", coll+"/subscriptions/other/confirm", signed, `{"confirmed":true}`)
		ts.must(204, "PUT", confirm, signed, `{"confirmed":true}`)
		if sub := ts.must(200, "GET", coll+"/subscriptions/"+id, owner, "").json(t); sub["confirmed"] != true {
			t.Errorf("%s: not confirmed through the signed URL: %v", coll, sub)
		}
	}
}
