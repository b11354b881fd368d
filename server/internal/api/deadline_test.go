package api

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Every request's storage calls get at least the storage timeout and at
// most a step more, whatever the times requests begin at; requests that
// begin within a step of the one that made a context share it.
func TestCallDeadlinesBoundEveryRequest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		timeout := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(time.Minute)).Draw(t, "timeout"))
		d := newCallDeadlines(timeout)
		now := time.Unix(1_700_000_000, 0)
		made := 0
		var last any
		for i, n := 0, rapid.IntRange(1, 200).Draw(t, "requests"); i < n; i++ {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(3*maxDeadlineStep)).Draw(t, "gap")))
			ctx := d.context(now)
			end, ok := ctx.Deadline()
			if !ok {
				t.Fatalf("request %d: no deadline", i)
			}
			if got := end.Sub(now); got < timeout || got > timeout+d.step {
				t.Fatalf("request %d: %v for its calls, want %v to %v", i, got, timeout, timeout+d.step)
			}
			if ctx != last {
				made++
				last = ctx
			}
		}
		if d.step > 0 && made > 1+int(now.Sub(time.Unix(1_700_000_000, 0))/d.step) {
			t.Fatalf("%d contexts for requests over %v, steps of %v", made, now.Sub(time.Unix(1_700_000_000, 0)), d.step)
		}
	})
}

// A shared context ends at its deadline, so calls still waiting then are
// told so, as with a context of their own.
func TestCallDeadlinesEnd(t *testing.T) {
	d := newCallDeadlines(20 * time.Millisecond)
	ctx := d.context(time.Now())
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the context outlived its deadline by seconds")
	}
	if ctx.Err() == nil {
		t.Fatal("ended without an error")
	}
}
