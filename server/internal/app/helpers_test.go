package app

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

const testClient = "3381af92-2b9e-11e3-b191-71861300734c"

// client calls a server Run started, as a Zaqar client would.
type client struct {
	t    *testing.T
	base string
}

// must sends one request with the Zaqar headers (plus extra name, value
// pairs; none for the unauthenticated paths when bare) and fails the test
// unless the status is want. It returns the body.
func (c client) must(want int, method, path, body string, extra ...string) string {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Client-ID", testClient)
	req.Header.Set("X-Project-ID", "p1")
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		c.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, res.StatusCode, want, b)
	}
	return string(b)
}

// hangUp closes the test client's idle keep-alive connections, which a
// stopping server would otherwise wait for (its linger, up to most of
// ShutdownTimeout).
func hangUp() { http.DefaultClient.CloseIdleConnections() }
