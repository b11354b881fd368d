package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sluice.dev/server/internal/logging"
)

// discardWriter is a minimal ResponseWriter so benchmarks measure the server.
type discardWriter struct {
	h      http.Header
	status int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(s int)           { d.status = s }

func benchBody() []byte {
	b, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"ttl": 300, "body": map[string]any{"payload": strings.Repeat("x", 980)}}}})
	return b
}

func BenchmarkPostMessage(b *testing.B) {
	s := newTestServer(b, nil)
	body := benchBody()
	req := httptest.NewRequest("POST", "/v2/queues/bench/messages", nil)
	req.Header.Set("Client-ID", testClient)
	req.Header.Set("X-Project-ID", "bench")
	req.Header.Set("Content-Type", "application/json")
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := req.Clone(req.Context())
		r.Body = nopCloser{bytes.NewReader(body)}
		r.ContentLength = int64(len(body))
		clear(w.h)
		s.ServeHTTP(w, r)
		if w.status != 201 {
			b.Fatalf("status %d", w.status)
		}
		if i%1000 == 999 {
			// Keep the memory driver small so the benchmark measures the API.
			s.drv.Queues().Purge(req.Context(), refOf("bench", "bench"))
		}
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// BenchmarkAccessLogLine is the cost of one request's JSON log line.
func BenchmarkAccessLogLine(b *testing.B) {
	log, closer := logging.New(io.Discard, "info")
	defer closer.Close()
	s := &Server{log: log}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s.accessLog(201, "POST", "/v2/queues/{queue_name}/messages", "/v2/queues/bench/messages",
			123*time.Microsecond, "req-3e34b1cf-ce19-48a0-9023-09584e42d2e8")
	}
}

// BenchmarkClaimFields reads the claim body every claim+delete cycle sends,
// with the one-pass reader and with encoding/json.
func BenchmarkClaimFields(b *testing.B) {
	body := []byte(`{"ttl": 300, "grace": 60}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := claimFieldsFast(body); !ok {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, e := claimFieldsSlow(body); e != nil {
				b.Fatal(e)
			}
		}
	})
}
