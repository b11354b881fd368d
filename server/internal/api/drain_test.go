package api

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice.dev/server/internal/config"
)

// TestDrainClosesClientConnectionsCleanly is a rolling update seen from one
// replica: clients keep posting over keep-alive connections while the
// server is told to stop (SIGTERM). During the drain delay every answer
// says Connection: close, so by the time the listener closes no client
// holds a connection the server will drop under a request; new
// connections go to another replica once the endpoint is removed. A
// request cut off mid-connection (EOF, reset) is a failed POST a client
// cannot safely retry.
func TestDrainClosesClientConnectionsCleanly(t *testing.T) {
	s := newTestServer(t, func(o *config.Options) {
		o.DrainDelay = 500 * time.Millisecond
		o.ShutdownTimeout = 5 * time.Second
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/v2/queues/drain/messages"
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, nil) }()

	// Endpoint removal: shortly after SIGTERM the Service stops sending new
	// connections here (they go to another replica); connections already
	// open stay until one side closes them.
	var removed atomic.Bool
	var dialer net.Dialer
	tr := &http.Transport{MaxIdleConnsPerHost: 16, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if removed.Load() {
			return nil, errRerouted
		}
		return dialer.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	var (
		mu       sync.Mutex
		ok       int
		refused  int
		cut      []string
		closing  int // answers with Connection: close
		stopping = make(chan struct{})
	)
	post := func() bool {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"messages":[{"body":1}]}`))
		req.Header.Set("Client-ID", testClient)
		req.Header.Set("X-Project-ID", "p1")
		resp, err := client.Do(req)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			resp.Body.Close()
			if resp.StatusCode == 201 {
				ok++
			} else {
				cut = append(cut, resp.Status)
			}
			if resp.Close {
				closing++
			}
		case errors.Is(err, errRerouted):
			refused++
			return false
		default:
			cut = append(cut, err.Error())
		}
		return true
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(10 * time.Second)
			for i := 0; i < 100_000 && time.Now().Before(deadline); i++ {
				if !post() {
					return // the listener is closed: a Service would send us elsewhere
				}
				select {
				case <-stopping:
				default:
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	stop() // SIGTERM
	close(stopping)
	time.Sleep(100 * time.Millisecond)
	removed.Store(true)
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	t.Logf("%d posted, %d answered with Connection: close, %d sent to another replica after the endpoint was removed", ok, closing, refused)
	if len(cut) > 0 {
		t.Fatalf("%d request(s) failed on an open connection during the drain, e.g. %q", len(cut), cut[0])
	}
	if closing == 0 || ok == 0 {
		t.Fatalf("no answer during the drain said Connection: close (%d ok)", ok)
	}
}

// errRerouted stands for a new connection the Service sends to another
// replica once this one's endpoint is gone.
var errRerouted = errors.New("endpoint removed: connection goes to another replica")
