package api

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
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
	addr, stop, done := listenAndServe(t, newTestServer(t, func(o *config.Options) {
		o.DrainDelay = 500 * time.Millisecond
		o.ShutdownTimeout = 5 * time.Second
	}))
	url := "http://" + addr + "/v2/queues/drain/messages"

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

// TestDrainLeavesIdleConnectionsToTheirClients: a client holding a
// keep-alive connection idle through the whole drain delay (a consumer
// backing off, the bottom of a connection pool) is not cut when the
// listener closes. Closing it then would race the client's next request
// on it: the request is lost to an EOF or a reset, and a POST cannot be
// retried safely. The connection stays open until its next request, which
// is answered with Connection: close, or until the shutdown bound.
func TestDrainLeavesIdleConnectionsToTheirClients(t *testing.T) {
	const drain = 300 * time.Millisecond
	conn, br, stop, done := serveOneConnection(t, func(o *config.Options) {
		o.DrainDelay = drain
		o.ShutdownTimeout = 4 * time.Second
	})
	post := func() *http.Response {
		t.Helper()
		resp, err := postOn(conn, br, "idle")
		if err != nil {
			t.Fatalf("the server cut the connection under a request: %v", err)
		}
		return resp
	}
	if r := post(); r.StatusCode != 201 || r.Close {
		t.Fatalf("before SIGTERM: %s, close %v", r.Status, r.Close)
	}
	stop() // SIGTERM; the connection now sits idle through the drain delay
	time.Sleep(drain + 300*time.Millisecond)
	_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := br.Peek(1); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after the drain delay the idle connection was closed by the server (%v)", err)
	}
	if r := post(); r.StatusCode != 201 || !r.Close {
		t.Fatalf("the request after the drain delay: %s, close %v; want 201 with Connection: close", r.Status, r.Close)
	}
	stoppedWithin(t, done, 3*time.Second, "the server still runs after its last connection closed")
}

// TestDrainClosesIdleConnectionsAtTheBound: a connection that stays idle
// does not hold the server past its shutdown bound.
func TestDrainClosesIdleConnectionsAtTheBound(t *testing.T) {
	conn, br, stop, done := serveOneConnection(t, func(o *config.Options) {
		o.DrainDelay = 100 * time.Millisecond
		o.ShutdownTimeout = time.Second
	})
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: sluice\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	start := time.Now()
	stop()
	stoppedWithin(t, done, 10*time.Second, "an idle connection held the server past its shutdown bound")
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := br.Peek(1); !errors.Is(err, io.EOF) {
		t.Errorf("the idle connection after shutdown: %v, want EOF", err)
	}
	t.Logf("stopped %v after SIGTERM with an idle connection open", time.Since(start).Round(time.Millisecond))
}

// serveOneConnection serves a test server and opens one raw TCP connection
// to it, closed when the test ends; stop is the server's SIGTERM and done
// receives what Serve returns.
func serveOneConnection(t *testing.T, edit func(*config.Options)) (net.Conn, *bufio.Reader, context.CancelFunc, <-chan error) {
	t.Helper()
	addr, stop, done := listenAndServe(t, newTestServer(t, edit))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn), stop, done
}

// stoppedWithin fails the test unless Serve returned nil within bound.
func stoppedWithin(t *testing.T, done <-chan error, bound time.Duration, late string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(bound):
		t.Fatal(late)
	}
}

// TestDrainAcceptsConnectionsUntilTheEndpointIsGone: the Service may keep
// sending new connections here after the drain delay, because endpoint
// removal reaches the node's proxy late on a busy node. Such a connection
// is refused if the listener has closed: the request on it fails without
// being sent, and clients (Zaqar's among them) do not retry a POST. The
// server keeps accepting, answering with Connection: close, until new
// connections stop coming, and only then closes the listener.
func TestDrainAcceptsConnectionsUntilTheEndpointIsGone(t *testing.T) {
	const drain = 400 * time.Millisecond
	addr, stop, done := listenAndServe(t, newTestServer(t, func(o *config.Options) {
		o.DrainDelay = drain
		o.ShutdownTimeout = 6 * time.Second
	}))
	post := func() (*http.Response, error) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return postOn(conn, bufio.NewReader(conn), "late")
	}
	stop() // SIGTERM
	start := time.Now()
	// The proxy still routes here for 4 drain delays: a new connection
	// every 50 ms, each one request long.
	for time.Since(start) < 4*drain {
		r, err := post()
		if err != nil {
			t.Fatalf("a connection made %v after SIGTERM, while the endpoint was still routed here: %v",
				time.Since(start).Round(time.Millisecond), err)
		}
		if r.StatusCode != 201 || !r.Close {
			t.Fatalf("a request %v after SIGTERM: %s, close %v; want 201 with Connection: close",
				time.Since(start).Round(time.Millisecond), r.Status, r.Close)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The endpoint is gone: no more connections, and the server stops.
	stoppedWithin(t, done, 4*time.Second, "the server still runs after connections stopped coming")
}

// postOn posts one message to queue over a raw connection and reads the
// whole answer: a request on a connection the test controls, so that
// whether the server cut it or answered is the test's to see.
func postOn(conn net.Conn, br *bufio.Reader, queue string) (*http.Response, error) {
	const body = `{"messages":[{"ttl":60,"body":1}]}`
	req := "POST /v2/queues/" + queue + "/messages HTTP/1.1\r\nHost: sluice\r\nClient-ID: " + testClient +
		"\r\nX-Project-ID: p1\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte(req)); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}
