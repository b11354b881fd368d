package metrics

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestRetryAfterAddAndMerge(t *testing.T) {
	for _, c := range []struct {
		name string
		adds []int64
		want RetryAfter
	}{
		{"none", nil, RetryAfter{}},
		{"one", []int64{2}, RetryAfter{Responses: 1, Min: 2, Max: 2}},
		{"range", []int64{5, 2, 30, 0}, RetryAfter{Responses: 4, Min: 0, Max: 30}},
		{"unreadable only", []int64{-1, -1}, RetryAfter{Responses: 2, Unreadable: 2}},
		{"unreadable first", []int64{-1, 7, 3}, RetryAfter{Responses: 3, Min: 3, Max: 7, Unreadable: 1}},
	} {
		var got RetryAfter
		for _, s := range c.adds {
			got.Add(s)
		}
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestRetryAfterMergeEqualsUnion: however responses are split between
// pods (or seconds), merging the parts gives what one recorder of all of
// them gives; an unreadable-only part never drags Min to 0.
func TestRetryAfterMergeEqualsUnion(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for i := range 1000 {
		var all RetryAfter
		parts := make([]RetryAfter, 1+r.IntN(4))
		for range r.IntN(20) {
			secs := r.Int64N(40) - 5 // about one in eight unreadable
			if secs < 0 {
				secs = -1
			}
			all.Add(secs)
			parts[r.IntN(len(parts))].Add(secs)
		}
		var merged RetryAfter
		for _, p := range r.Perm(len(parts)) {
			merged.Merge(parts[p])
		}
		if merged != all {
			t.Fatalf("case %d: merged %+v, want %+v (parts %+v)", i, merged, all, parts)
		}
		byReason := map[string]RetryAfter(nil)
		for _, p := range parts {
			byReason = MergeRetries(byReason, map[string]RetryAfter{"http_503": p})
		}
		if byReason["http_503"] != all {
			t.Fatalf("case %d: MergeRetries %+v, want %+v", i, byReason, all)
		}
	}
	if MergeRetries(nil, nil) != nil {
		t.Error("MergeRetries of nothing allocated")
	}
}

// TestOpRecordsRetryAfterPerSecondAndInTotal: failures with and without
// the header, of two statuses, over two seconds.
func TestOpRecordsRetryAfterPerSecondAndInTotal(t *testing.T) {
	o := NewOp("post")
	base := int64(1_800_000_000)
	o.FailureRetry(unix(base), "http_503", 2)
	o.FailureRetry(unix(base), "http_503", 2)
	o.Failure(unix(base), "http_503")
	o.Success(unix(base), time.Millisecond)
	o.FailureRetry(unix(base+1), "http_507", 30)
	o.FailureRetry(unix(base+1), "http_503", -1)
	o.Failure(unix(base+1), "timeout")
	snap := o.Finish()
	if snap.Errors["http_503"] != 4 || snap.Errors["http_507"] != 1 || snap.Errors["timeout"] != 1 {
		t.Fatalf("errors %v", snap.Errors)
	}
	want := map[string]RetryAfter{"http_503": {Responses: 3, Min: 2, Max: 2, Unreadable: 1}, "http_507": {Responses: 1, Min: 30, Max: 30}}
	if len(snap.Retry) != 2 || snap.Retry["http_503"] != want["http_503"] || snap.Retry["http_507"] != want["http_507"] {
		t.Fatalf("retry %+v, want %+v", snap.Retry, want)
	}
	if len(snap.Series) != 2 {
		t.Fatalf("series %+v", snap.Series)
	}
	first, second := snap.Series[0], snap.Series[1]
	if len(first.Retry) != 1 || first.Retry["http_503"] != (RetryAfter{Responses: 2, Min: 2, Max: 2}) || first.Kinds["http_503"] != 3 {
		t.Errorf("first second %+v", first)
	}
	if len(second.Retry) != 2 || second.Retry["http_503"] != (RetryAfter{Responses: 1, Unreadable: 1}) || second.Kinds["timeout"] != 1 {
		t.Errorf("second second %+v", second)
	}
	// Failures without the header leave no Retry map at all.
	o = NewOp("claim")
	o.Failure(unix(base), "http_503")
	if snap := o.Finish(); snap.Retry != nil || snap.Series[0].Retry != nil {
		t.Errorf("no Retry-After seen, yet %+v / %+v", snap.Retry, snap.Series[0].Retry)
	}
}
