package load

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"sluice.dev/bench/internal/metrics"
	"sluice.dev/bench/internal/result"
)

func TestParseReceiverFault(t *testing.T) {
	for s, want := range map[string]ReceiverFault{
		"at=6,duration=10,latency=500ms,fail=50": {At: 6 * time.Second, Duration: 10 * time.Second, Latency: 500 * time.Millisecond, Fail: 50},
		"duration=1,at=0,fail=100":               {Duration: time.Second, Fail: 100},
		"at=1.5,duration=0.25,latency=30s":       {At: 1500 * time.Millisecond, Duration: 250 * time.Millisecond, Latency: 30 * time.Second},
		"at=2, duration=3, latency=0, fail=1":    {At: 2 * time.Second, Duration: 3 * time.Second, Fail: 1},
		"at=0,duration=86400,latency=1ns":        {Duration: 86400 * time.Second, Latency: 1},
	} {
		got, err := ParseReceiverFault(s)
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", s, got, err, want)
			continue
		}
		// String is the flag's syntax again.
		if again, err := ParseReceiverFault(got.String()); err != nil || again != got {
			t.Errorf("%q: String %q parses as %+v, %v", s, got.String(), again, err)
		}
	}

	// Every invalid case, generated: a good fault with one part replaced,
	// dropped or repeated, plus malformed lists.
	good := map[string]string{"at": "6", "duration": "10", "latency": "500ms", "fail": "50"}
	keys := []string{"at", "duration", "latency", "fail"}
	build := func(over map[string]string, drop string) string {
		var parts []string
		for _, k := range keys {
			if k == drop {
				continue
			}
			v := good[k]
			if o, ok := over[k]; ok {
				v = o
			}
			parts = append(parts, k+"="+v)
		}
		return strings.Join(parts, ",")
	}
	bad := map[string][]string{
		"at":       {"-1", "x", "", "NaN", "Inf", "1e9", "86401", "6s"},
		"duration": {"0", "-2", "x", "", "NaN", "-Inf", "86400.5", "10s"},
		"latency":  {"-1ms", "31s", "1h", "500", "x", ""},
		"fail":     {"-1", "101", "50.5", "x", "", "50%"},
	}
	var invalid []string
	for k, vs := range bad {
		for _, v := range vs {
			invalid = append(invalid, build(map[string]string{k: v}, ""))
		}
	}
	for _, k := range []string{"at", "duration"} {
		invalid = append(invalid, build(nil, k)) // missing
	}
	for _, k := range keys {
		invalid = append(invalid, build(nil, "")+","+k+"="+good[k]) // repeated
	}
	invalid = append(invalid,
		"", " ", ",", "at=6,,duration=10,fail=1", "at=6,duration=10,fail=1,", "at", "=6,duration=10,fail=1",
		"at=6,duration=10,fail=1,loss=3", "AT=6,duration=10,fail=1", "at=6;duration=10;fail=1",
		"at=6,duration=10", "at=6,duration=10,latency=0,fail=0", "at=6,duration=10,latency=0s")
	for _, s := range invalid {
		if f, err := ParseReceiverFault(s); err == nil {
			t.Errorf("%q accepted as %+v", s, f)
		}
	}
}

func TestValidateReceiverFaultsRefusesOverlaps(t *testing.T) {
	f := func(at, dur float64) ReceiverFault {
		return ReceiverFault{At: time.Duration(at * 1e9), Duration: time.Duration(dur * 1e9), Fail: 10}
	}
	if err := ValidateReceiverFaults([]ReceiverFault{f(10, 5), f(0, 10), f(15, 1)}); err != nil {
		t.Errorf("adjacent windows refused: %v", err)
	}
	if err := ValidateReceiverFaults([]ReceiverFault{f(10, 5), f(0, 10.5)}); err == nil {
		t.Error("overlapping windows accepted")
	}
	if err := ValidateReceiverFaults([]ReceiverFault{{At: 0, Duration: time.Second}}); err == nil {
		t.Error("a fault that does nothing accepted")
	}
}

// The failures of a window are spread evenly: of its first n calls,
// exactly floor(n*p/100) fail, for every share and every n.
func TestFailSpreadIsExact(t *testing.T) {
	for p := 0; p <= 100; p++ {
		var failed int64
		for n := int64(1); n <= 1000; n++ {
			if failsCall(n, p) {
				failed++
			}
			if want := n * int64(p) / 100; failed != want {
				t.Fatalf("p=%d: %d of the first %d calls failed, want %d", p, failed, n, want)
			}
		}
	}
	for n := int64(1); n <= 6; n++ {
		if got, want := failsCall(n, 50), n%2 == 0; got != want {
			t.Errorf("fail=50, call %d: fails %v, want %v (every other call)", n, got, want)
		}
	}
}

func postNotice(ctx context.Context, url string, body []byte) (int, time.Duration, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, time.Since(t0), err
	}
	resp.Body.Close()
	return resp.StatusCode, time.Since(t0), nil
}

// extra waits (bounded) until the receiver's counter name reaches want.
func extra(t *testing.T, rc *receiver, name string, want int64) map[string]int64 {
	t.Helper()
	var x map[string]int64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if x = rc.op.Finish().Extra; x[name] >= want {
			break
		}
	}
	return x
}

// Over HTTP, with a window active: every call is held for the latency,
// every other one is answered 500 and not accounted; before the load
// starts and after the window, 204 at once and accounted.
func TestReceiverFaultWindow(t *testing.T) {
	del := metrics.NewDelivery("me")
	notes := metrics.NewNotifications()
	const lat = 200 * time.Millisecond
	rc, err := startReceiver(Notify{Listen: "127.0.0.1:0", Subscribe: true,
		Faults: []ReceiverFault{{At: time.Second, Duration: time.Hour, Latency: lat, Fail: 50}}}, del, notes)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.stop()
	t0 := time.Now()
	for seq := range int64(8) {
		del.Produced(seq)
		notes.Acked(seq, t0)
	}
	ctx := context.Background()
	send := func(seq int64) (int, time.Duration) {
		t.Helper()
		st, took, err := postNotice(ctx, rc.url, notice("me", seq, "Notification"))
		if err != nil {
			t.Fatal(err)
		}
		return st, took
	}
	// The load has not started: no fault.
	if st, took := send(0); st != 204 || took >= lat {
		t.Errorf("before the load: status %d in %v, want 204 at once", st, took)
	}
	// The load started 2 s ago: the window (1 s .. 1 h) is on.
	rc.faults.begin(time.Now().Add(-2 * time.Second))
	for i, seq := range []int64{1, 2, 3, 4} {
		st, took := send(seq)
		want := map[bool]int{false: 204, true: 500}[i%2 == 1]
		if st != want || took < lat {
			t.Errorf("call %d of the window (seq %d): status %d in %v, want %d after >= %v", i+1, seq, st, took, want, lat)
		}
	}
	// Seq 2 and 4 were refused: the server sends them again, after the
	// window (which began an hour and a second after this start).
	rc.faults.begin(time.Now().Add(-2 * time.Hour))
	for _, seq := range []int64{2, 4, 5} {
		if st, took := send(seq); st != 204 || took >= lat {
			t.Errorf("after the window (seq %d): status %d in %v, want 204 at once", seq, st, took)
		}
	}
	x := extra(t, rc, FaultFailed, 2)
	if x[FaultCalls] != 4 || x[FaultDelayed] != 4 || x[FaultFailed] != 2 || x[FaultAbandoned] != 0 {
		t.Errorf("fault counters %v, want 4 calls, 4 delayed, 2 failed, 0 abandoned", x)
	}
	if n := notes.Outstanding(); n != 2 { // 6 and 7 never came
		t.Errorf("outstanding %d, want 2", n)
	}
	d := result.DeliveryFrom(del.Finish())
	if err := (&result.Result{Ops: map[string]*result.OpResult{}, Delivery: d}).Summarize(); err != nil {
		t.Fatal(err)
	}
	if d.Consumed != 6 || d.Unique != 6 || d.Duplicated != 0 || d.Lost != 2 {
		t.Errorf("delivery %+v, want 6 consumed, none duplicated, 2 lost (the refused calls are not deliveries)", *d)
	}
}

// A held call whose caller gives up (the server's delivery timeout) is
// not a delivery; stop releases the calls still held.
func TestReceiverFaultAbandoned(t *testing.T) {
	del := metrics.NewDelivery("me")
	notes := metrics.NewNotifications()
	rc, err := startReceiver(Notify{Listen: "127.0.0.1:0", Subscribe: true,
		Faults: []ReceiverFault{{Duration: time.Hour, Latency: 20 * time.Second}}}, del, notes)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.stop()
	del.Produced(0)
	notes.Acked(0, time.Now())
	rc.faults.begin(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := postNotice(ctx, rc.url, notice("me", 0, "Notification")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the caller's timeout", err)
	}
	if x := extra(t, rc, FaultAbandoned, 1); x[FaultAbandoned] != 1 || x[FaultDelayed] != 1 {
		t.Errorf("fault counters %v, want 1 delayed, 1 abandoned", x)
	}
	if notes.Outstanding() != 1 {
		t.Error("an abandoned call was accounted")
	}

	done := make(chan int, 1)
	go func() {
		st, _, _ := postNotice(context.Background(), rc.url, notice("me", 0, "Notification"))
		done <- st
	}()
	extra(t, rc, FaultDelayed, 2)
	t0 := time.Now()
	rc.stop()
	select {
	case st := <-done:
		if st == 204 || time.Since(t0) > 3*time.Second {
			t.Errorf("held call at stop: status %d after %v", st, time.Since(t0))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not release the held call")
	}
	if notes.Outstanding() != 1 {
		t.Error("a call released by stop was accounted")
	}
}
