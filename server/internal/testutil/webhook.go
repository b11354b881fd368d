package testutil

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Webhook is a webhook receiver on loopback that records what it gets. It
// can be taken down (its port refuses connections) and brought back on the
// same port, told to hang, or to answer with another status.
type Webhook struct {
	t    testing.TB
	addr string

	mu       sync.Mutex
	got      []Request
	inFlight int
	maxIn    int
	hang     chan struct{}  // non-nil: requests block until it is closed
	open     map[string]int // delivery ids being answered now
	overlaps int
	status   int // answer; 0 means 204
	srv      *http.Server
}

// Request is one request a Webhook answered with 2xx.
type Request struct {
	Path   string
	Header http.Header
	Body   []byte
	At     time.Time
}

// StartWebhook starts a receiver for the test; it stops at cleanup.
func StartWebhook(t testing.TB) *Webhook {
	r := &Webhook{t: t}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(func() {
		r.mu.Lock()
		if r.hang != nil {
			close(r.hang)
			r.hang = nil
		}
		r.mu.Unlock()
		r.Down()
	})
	return r
}

// URL is the receiver's address with path.
func (r *Webhook) URL(path string) string { return "http://" + r.addr + path }

func (r *Webhook) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.handle), ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

func (r *Webhook) handle(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id := req.Header.Get("X-Sluice-Delivery")
	r.mu.Lock()
	if r.open == nil {
		r.open = map[string]int{}
	}
	if id != "" {
		if r.open[id] > 0 {
			r.overlaps++
		}
		r.open[id]++
	}
	r.inFlight++
	r.maxIn = max(r.maxIn, r.inFlight)
	hang := r.hang
	status := r.status
	r.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-req.Context().Done():
		}
	}
	r.mu.Lock()
	if id != "" {
		if r.open[id]--; r.open[id] == 0 {
			delete(r.open, id)
		}
	}
	r.inFlight--
	if hang == nil && (status == 0 || status/100 == 2) {
		r.got = append(r.got, Request{req.URL.Path, req.Header.Clone(), body, time.Now()})
	}
	r.mu.Unlock()
	if status == 0 {
		status = http.StatusNoContent
	}
	w.WriteHeader(status)
}

// Down closes the listener: connections are refused until Up.
func (r *Webhook) Down() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
	}
}

// Up listens on the same port again.
func (r *Webhook) Up() {
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			r.serve(ln)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Fatalf("receiver cannot listen on %s again: %v", r.addr, err)
}

// Received returns the requests answered with 2xx so far.
func (r *Webhook) Received() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.got...)
}

// ByDelivery counts answered requests per X-Sluice-Delivery id.
func (r *Webhook) ByDelivery() map[string]int {
	out := map[string]int{}
	for _, g := range r.Received() {
		out[g.Header.Get("X-Sluice-Delivery")]++
	}
	return out
}

// Hang makes requests block until the test ends (or their client gives up).
func (r *Webhook) Hang() {
	r.mu.Lock()
	if r.hang == nil {
		r.hang = make(chan struct{})
	}
	r.mu.Unlock()
}

// Unhang releases the hanging requests and answers normally again.
func (r *Webhook) Unhang() {
	r.mu.Lock()
	if r.hang != nil {
		close(r.hang)
		r.hang = nil
	}
	r.mu.Unlock()
}

// SetStatus makes the receiver answer with status (0: 204).
func (r *Webhook) SetStatus(status int) {
	r.mu.Lock()
	r.status = status
	r.mu.Unlock()
}

// InFlight is how many requests are being answered now, and the most at
// once so far.
func (r *Webhook) InFlight() (now, most int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight, r.maxIn
}

// Overlaps counts requests for the same X-Sluice-Delivery id that were
// in flight at the same time (concurrent duplicate sends).
func (r *Webhook) Overlaps() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.overlaps
}

// Eventually polls cond every 20ms for at most limit, failing the test
// with what when it is not reached.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
