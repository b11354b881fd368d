package notify

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// receiver is a webhook endpoint on loopback that records what it gets. It
// can be taken down (its port refuses connections) and brought back on the
// same port, and can be told to hang.
type receiver struct {
	t    *testing.T
	addr string

	mu       sync.Mutex
	got      []received
	inFlight int
	maxIn    int
	hang     chan struct{} // non-nil: requests block until it is closed
	status   int           // answer; 0 means 204
	srv      *http.Server
}

type received struct {
	path   string
	header http.Header
	body   []byte
	at     time.Time
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t}
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
		r.down()
	})
	return r
}

func (r *receiver) url(path string) string { return "http://" + r.addr + path }

func (r *receiver) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.handle), ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

func (r *receiver) handle(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
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
	r.inFlight--
	if hang == nil && (status == 0 || status/100 == 2) {
		r.got = append(r.got, received{req.URL.Path, req.Header.Clone(), body, time.Now()})
	}
	r.mu.Unlock()
	if status == 0 {
		status = http.StatusNoContent
	}
	w.WriteHeader(status)
}

// down closes the listener: connections are refused until up.
func (r *receiver) down() {
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

// up listens on the same port again.
func (r *receiver) up() {
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

func (r *receiver) received() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// byDelivery counts requests per X-Sluice-Delivery id.
func (r *receiver) byDelivery() map[string]int {
	out := map[string]int{}
	for _, g := range r.received() {
		out[g.header.Get(HeaderDelivery)]++
	}
	return out
}

// eventually polls cond every 20ms for at most limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var errTest = errors.New("test")
