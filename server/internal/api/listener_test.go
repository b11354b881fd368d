package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"sluice.dev/server/internal/config"
)

// rawExchange writes payload on a fresh connection and reads one answer,
// waiting at most wait; it fails the test when none comes.
func rawExchange(t *testing.T, ts *testServer, payload string, wait time.Duration) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(c, payload); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: no answer within %v: %v", payload, wait, err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(b)
}

// zaqarBody fails unless body is {"title": ..., "description": ...}.
func zaqarBody(t *testing.T, res *http.Response, body string) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal([]byte(body), &m); err != nil || m["title"] == "" || m["description"] == "" ||
		res.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%d %s: not a Zaqar error body: %q (%v)", res.StatusCode, res.Header.Get("Content-Type"), body, err)
	}
	return m
}

// TestShortBodyAnswered: a body shorter than its Content-Length gets a 408
// once the read timeout passes. Before, the request got no answer and the
// connection stayed open for ever (the listener had no read timeout).
func TestShortBodyAnswered(t *testing.T) {
	ts := startServer(t, func(o *config.Options) { o.ReadHeaderTimeout, o.ReadTimeout = time.Second, time.Second })
	res, body := rawExchange(t, ts, "POST /v2/queues/slow/messages HTTP/1.1\r\nHost: x\r\nClient-ID: "+testClient+
		"\r\nX-Project-ID: p1\r\nContent-Length: 100\r\n\r\n{\"messages\":", 15*time.Second)
	if res.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status %d %s", res.StatusCode, body)
	}
	zaqarBody(t, res, body)
}

// TestUncleanPathsNotRedirected: paths with "..", "." or "//" answer 404
// and act on nothing. Before, ServeMux answered 307 to the cleaned path,
// and clients replayed the method (a PUT, a DELETE) on another queue.
func TestUncleanPathsNotRedirected(t *testing.T) {
	ts := startServer(t, nil)
	for _, p := range []string{"/v2/queues/a/../b", "/v2//queues/b", "/v2/queues/./b", "//v2/queues/b", "/v2/queues/b/claims/.."} {
		for _, m := range []string{"PUT", "DELETE", "GET"} {
			res, body := rawExchange(t, ts, m+" "+p+" HTTP/1.1\r\nHost: x\r\nClient-ID: "+testClient+"\r\nX-Project-ID: p1\r\nContent-Length: 0\r\n\r\n", 5*time.Second)
			var e map[string]any
			json.Unmarshal([]byte(body), &e)
			if res.StatusCode != 404 || e["title"] != "404 Not Found" || res.Header.Get("Location") != "" {
				t.Errorf("%s %s: %d %s location %q", m, p, res.StatusCode, body, res.Header.Get("Location"))
			}
		}
	}
	if b := ts.must(200, "GET", "/v2/queues", std(), "").body; strings.Contains(b, `"b"`) {
		t.Errorf("a queue was created: %s", b)
	}
}

// TestServerWrittenErrorsAreZaqar: what net/http answers by itself
// (malformed requests, oversized headers, unknown transfer codings) and a
// handler's panic carry a Zaqar JSON body. Before, they were text/plain (or,
// for a panic, a dropped connection).
func TestServerWrittenErrorsAreZaqar(t *testing.T) {
	ts := startServer(t, func(o *config.Options) { o.MaxHeaderBytes = 4096 })
	ts.Handle("GET", "/boom", Public, func(http.ResponseWriter, *http.Request, *Call) { panic("boom") })
	cases := []struct {
		name, payload string
		status        int
	}{
		{"garbage", "NOT HTTP AT ALL\r\n\r\n", 400},
		{"bad header line", "GET /v2/queues HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400},
		{"no host", "GET /v2/queues HTTP/1.1\r\n\r\n", 400},
		{"headers too large", "GET /v2/queues HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 20000) + "\r\n\r\n", 431},
		{"unknown transfer coding", "POST /v2/queues/q/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
		{"panic", "GET /boom HTTP/1.1\r\nHost: x\r\n\r\n", 500},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, body := rawExchange(t, ts, tc.payload, 5*time.Second)
			if res.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %s", res.StatusCode, tc.status, body)
			}
			zaqarBody(t, res, body)
		})
	}
	// The server still serves after all that.
	ts.must(204, "GET", "/v2/ping", std(), "")
}

// TestProjectNotUTF8Refused: an X-Project-ID of bytes that are not UTF-8
// (the request is written byte for byte) is refused as a bad project id
// is, for every store. A
// MongoDB pool cannot store such a project: a post there answered 503
// "try again" for ever, and a queue of any store can move to one.
func TestProjectNotUTF8Refused(t *testing.T) {
	forEachStore(t, func(t *testing.T, store func(*config.Options)) {
		ts := startServer(t, store)
		body := `{"messages":[{"body":1}]}`
		for _, project := range []string{"p\xff\xfe", "pro\xc3", "\xed\xa0\x80"} {
			res, got := rawExchange(t, ts, "POST /v2/queues/demo/messages HTTP/1.1\r\nHost: x\r\nClient-ID: "+testClient+
				"\r\nX-Project-ID: "+project+"\r\nContent-Type: application/json\r\nContent-Length: "+fmt.Sprint(len(body))+"\r\n\r\n"+body, 10*time.Second)
			m := zaqarBody(t, res, got)
			if res.StatusCode != http.StatusBadRequest || m["title"] != "Invalid queue identification" {
				t.Errorf("project %q: %d %s", project, res.StatusCode, got)
			}
		}
	})
}
