package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/storage"
)

// FuzzRouter drives the whole server in process (memory store) with
// arbitrary method, request target, headers and body, parsed by net/http
// from the raw request as the listener would. Whatever comes in, the answer
// is never a 5xx, a panic or a redirect, and every error has Zaqar's JSON
// body: a title, and a description except where Zaqar itself has none
// (falcon's 404/405 carry only a title, a 406 has no body). The server is
// renewed every few hundred inputs so that state stays small, and kept in
// between so that sequences (post, claim, patch) are reached. Seeds are in
// testdata/fuzz/FuzzRouter; run longer with
// go test -run='^$' -fuzz=FuzzRouter ./internal/api.
func FuzzRouter(f *testing.F) {
	f.Add("POST", "/v2/queues/q1/messages?x=1", true, "Content-Type: application/json\n", []byte(`{"messages":[{"body":{"a":1},"ttl":60}]}`))
	f.Add("PATCH", "/v2/queues/q1", true, "Content-Type: application/openstack-messaging-v2.0-json-patch\n", []byte(`[{"op":"add","path":"/metadata/k","value":1e3}]`))
	f.Add("POST", "/v2/queues/q1/claims?limit=2", true, "", []byte(`{"ttl":60,"grace":60}`))
	f.Add("PUT", "/v2/pools/p1", true, "X-Roles: admin\n", []byte(`{"weight":1,"uri":"redis://127.0.0.1:1"}`))
	f.Add("GET", "/v2/queues/q1/messages?echo=true&include_claimed=true", true, "Accept: text/html\n", []byte(nil))
	f.Add("DELETE", "/v2/queues/q1/messages?pop=3", false, "Client-ID: 1\nX-Project-ID: p\n", []byte(nil))
	var (
		s *Server
		n int
	)
	f.Fuzz(func(t *testing.T, method, target string, std bool, headers string, body []byte) {
		if n%500 == 0 {
			if s != nil {
				s.drv.Close()
			}
			s = fuzzServer(t)
		}
		n++
		var raw bytes.Buffer
		raw.WriteString(method + " " + target + " HTTP/1.1\r\nHost: sluice\r\n")
		if std {
			raw.WriteString("Client-ID: " + testClient + "\r\nX-Project-ID: fuzz\r\n")
		}
		for _, line := range strings.Split(headers, "\n") {
			if line = strings.TrimRight(line, "\r"); line != "" {
				raw.WriteString(line + "\r\n")
			}
		}
		raw.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
		raw.Write(body)
		r, err := http.ReadRequest(bufio.NewReader(&raw))
		if err != nil {
			return // net/http's own answer; the listener tests cover its body
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		checkAnswer(t, r, w)
	})
}

// fuzzServer is a memory-store server with small body limits (so that
// inputs reach the limits) and no cleanup tied to one input.
func fuzzServer(t *testing.T) *Server {
	opts := config.Defaults()
	opts.AccessLog = false
	opts.MaxBodyBytes, opts.MaxMessagesPostSize, opts.MaxQueueMetadata = 64<<10, 32<<10, 4<<10
	drv, err := storage.Open(context.Background(), opts.Store, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return New(opts, drv, nil, nil)
}

// checkAnswer holds an answer to the properties FuzzRouter promises.
func checkAnswer(t *testing.T, r *http.Request, w *httptest.ResponseRecorder) {
	t.Helper()
	code, b := w.Code, w.Body.Bytes()
	// 300 is Zaqar's versions document at /; any other 3xx is a redirect.
	if code >= 500 || code > 300 && code < 400 {
		t.Fatalf("%s %s -> %d %s", r.Method, r.RequestURI, code, b)
	}
	if code < 400 {
		if len(b) > 0 && !json.Valid(b) {
			t.Fatalf("%s %s -> %d non-JSON %q", r.Method, r.RequestURI, code, b)
		}
		return
	}
	if code == http.StatusNotAcceptable && len(b) == 0 {
		return // Zaqar: no error the client would accept
	}
	var e map[string]any
	if err := json.Unmarshal(b, &e); err != nil || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%s %s -> %d not a JSON error (%s): %q", r.Method, r.RequestURI, code, w.Header().Get("Content-Type"), b)
	}
	title, _ := e["title"].(string)
	desc, _ := e["description"].(string)
	falcon := code == 404 && title == "404 Not Found" || code == 405 && title == "405 Method Not Allowed"
	if title == "" || desc == "" && !falcon {
		t.Fatalf("%s %s -> %d error without title or description: %s", r.Method, r.RequestURI, code, b)
	}
}
