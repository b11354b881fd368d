package zaqar

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkSessionPost measures one POST round trip through a Session
// against an in-process handler (client and handler costs together):
// go test -bench . -benchmem ./internal/zaqar.
func BenchmarkSessionPost(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		w.Write([]byte(`{"resources": ["/v2/queues/q/messages/1"]}`))
	}))
	defer srv.Close()
	c, _ := New(Options{BaseURL: srv.URL, ProjectID: "p", Conns: 1})
	s := c.NewSession("cid")
	u := c.URL("/v2/queues/q/messages", "")
	body := []byte(`{"messages":[{"ttl":60,"body":{"evt":"x"}}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if st, err := s.Do("POST", u, body); err != nil || st != 201 {
			b.Fatal(st, err)
		}
	}
}
