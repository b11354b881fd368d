package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	_ "sluice.dev/server/internal/storage/memory"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != 200 {
		t.Fatalf("scrape: %d", w.Code)
	}
	return w.Body.String()
}

func TestEndpointCountsByCode(t *testing.T) {
	m := New()
	e := m.Endpoint("POST", "/v2/queues/{queue_name}/messages")
	e.Observe(201, time.Millisecond)
	e.Observe(201, 2*time.Millisecond)
	e.Observe(400, time.Millisecond)
	e.Observe(42, time.Millisecond) // out of range: counted as 599
	m.ClaimsExpired(3)
	m.DeadLettered(2)
	out := scrape(t, m)
	for _, want := range []string{
		`sluice_http_requests_total{code="201",method="POST",route="/v2/queues/{queue_name}/messages"} 2`,
		`sluice_http_requests_total{code="400",method="POST",route="/v2/queues/{queue_name}/messages"} 1`,
		`sluice_http_requests_total{code="599",method="POST",route="/v2/queues/{queue_name}/messages"} 1`,
		`sluice_http_request_duration_seconds_count{method="POST",route="/v2/queues/{queue_name}/messages"} 4`,
		`sluice_claims_expired_total 3`,
		`sluice_dead_letter_moves_total 2`,
		`go_goroutines`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

// Goroutines answering random codes at once, new codes included, must
// each be counted once under their own code.
func TestEndpointCountsCodesConcurrently(t *testing.T) {
	m := New()
	e := m.Endpoint("GET", "/v2/queues")
	codes := []int{200, 204, 400, 404, 409, 503, 201, 410}
	rng := rand.New(rand.NewSource(7))
	plan := make([][]int, 8)
	want := map[int]int{}
	for g := range plan {
		for i := 0; i < 200; i++ {
			c := codes[rng.Intn(len(codes))]
			plan[g] = append(plan[g], c)
			want[c]++
		}
	}
	var wg sync.WaitGroup
	for _, p := range plan {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, c := range p {
				e.Observe(c, time.Microsecond)
			}
		}()
	}
	wg.Wait()
	out := scrape(t, m)
	for c, n := range want {
		line := fmt.Sprintf(`sluice_http_requests_total{code="%d",method="GET",route="/v2/queues"} %d`, c, n)
		if !strings.Contains(out, line+"\n") {
			t.Errorf("scrape lacks %s", line)
		}
	}
}

func TestStorageCollector(t *testing.T) {
	m := New()
	ctx := context.Background()
	d, err := storage.Open(ctx, "memory", storage.Options{Events: m})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m.WatchStorage(d, time.Second)
	q := storage.QueueRef{Project: "p", Name: "q"}
	msgs := []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`)}, {TTL: time.Hour, Body: json.RawMessage(`2`)}}
	if _, err := d.Messages().Post(ctx, q, "c", msgs); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	out := scrape(t, m)
	for _, want := range []string{`sluice_storage_up 1`, `sluice_queue_messages{state="free"} 1`, `sluice_queue_messages{state="claimed"} 1`} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
