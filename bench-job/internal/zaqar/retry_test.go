package zaqar

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 23, 17, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		secs int64
		ok   bool
	}{
		{"2", 2, true},
		{"0", 0, true},
		{" 120 ", 120, true},
		{"86400", 86400, true},
		{now.Add(10 * time.Second).Format(http.TimeFormat), 10, true},
		{now.Add(1500 * time.Millisecond).Format(time.RFC850), 1, true}, // dates have whole seconds: 17:00:01
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},          // already past: retry now
		{now.Format(time.ANSIC), 0, true},
		{"", 0, false},
		{"-1", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"99999999999999999999", 0, false}, // overflows int64
	} {
		secs, ok := ParseRetryAfter(c.in, now)
		if secs != c.secs || ok != c.ok {
			t.Errorf("ParseRetryAfter(%q) = %d, %t; want %d, %t", c.in, secs, ok, c.secs, c.ok)
		}
	}
}

// TestSessionRetryAfter: a real server's answers, 503 and 507 with and
// without the header, and a success between them; each call sees its own
// response's header only, and a call without a response sees none.
func TestSessionRetryAfter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.URL.Query().Get("ra"); v != "" {
			w.Header().Set("Retry-After", v)
		}
		st, _ := strconv.Atoi(r.URL.Query().Get("st"))
		w.WriteHeader(st)
		w.Write([]byte(`{"title": "Service Unavailable", "description": "x"}`))
	}))
	defer srv.Close()
	c, err := New(Options{BaseURL: srv.URL, Conns: 1, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := c.NewSession("cid")
	for _, q := range []struct {
		query string
		st    int
		secs  int64
		given bool
	}{
		{"st=503&ra=2", 503, 2, true},
		{"st=503", 503, 0, false},
		{"st=507&ra=30", 507, 30, true},
		{"st=200", 200, 0, false},
		{"st=507", 507, 0, false},
		{"st=503&ra=later", 503, -1, true},
		{"st=503&ra=" + url.QueryEscape(time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat)), 503, 0, true},
	} {
		st, err := s.Do("GET", c.URL("/x", q.query), nil)
		if err != nil || st != q.st {
			t.Fatalf("%s: %d %v", q.query, st, err)
		}
		if secs, given := s.RetryAfter(); secs != q.secs || given != q.given {
			t.Errorf("%s: RetryAfter() = %d, %t; want %d, %t", q.query, secs, given, q.secs, q.given)
		}
	}
	srv.Close()
	if _, err := s.Do("GET", c.URL("/x", "st=503&ra=2"), nil); err == nil {
		t.Fatal("a closed server answered")
	}
	if _, given := s.RetryAfter(); given {
		t.Error("a call without a response kept the previous Retry-After")
	}
}
