package load

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"sluice.dev/bench/internal/result"
)

// ReceiverFault is a window during which the notifications scenario's
// webhook receiver misbehaves: it holds each call for Latency before it
// answers, and answers 500 to Fail percent of the calls. A call answered
// 500, or abandoned by the server while it was held, is not a delivery:
// the server has to redeliver it, which the run's lost / duplicated
// accounting then checks.
type ReceiverFault struct {
	At       time.Duration // after the load phase starts
	Duration time.Duration // > 0
	Latency  time.Duration // 0..MaxReceiverLatency; 0 = answer at once
	Fail     int           // percent of the window's calls answered 500, 0..100
}

// MaxReceiverLatency bounds a receiver fault's latency.
const MaxReceiverLatency = 30 * time.Second

// maxFaultSeconds bounds at and duration (a day: no benchmark runs longer).
const maxFaultSeconds = 86400

// SlowReceiverFault is the name receiver faults carry in a faults list
// (result.Fault, what `report --faults` and `merge --faults` analyze).
const SlowReceiverFault = "slow-receiver"

// Counters the receiver adds to ops.notify.extra while a fault is active.
const (
	FaultCalls     = "receiver_fault_calls"     // well-formed calls that arrived in a fault window
	FaultDelayed   = "receiver_fault_delayed"   // calls held for the fault's latency
	FaultFailed    = "receiver_fault_failed"    // calls answered 500
	FaultAbandoned = "receiver_fault_abandoned" // held calls the server gave up on (or the run ended) before the answer
)

// ReceiverFaultSyntax is the flag's value syntax, for usage texts.
const ReceiverFaultSyntax = "at=SECONDS,duration=SECONDS[,latency=DURATION][,fail=PERCENT]"

// ParseReceiverFault reads "at=SECONDS,duration=SECONDS,latency=DURATION,fail=PERCENT"
// (latency and fail optional, one of them non-zero; e.g.
// "at=6,duration=10,latency=500ms,fail=50").
func ParseReceiverFault(s string) (ReceiverFault, error) {
	var f ReceiverFault
	seen := map[string]bool{}
	if strings.TrimSpace(s) == "" {
		return f, fmt.Errorf("empty: want %s", ReceiverFaultSyntax)
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return f, fmt.Errorf("%q is not key=value (want %s)", kv, ReceiverFaultSyntax)
		}
		if seen[k] {
			return f, fmt.Errorf("%s given twice", k)
		}
		seen[k] = true
		var err error
		switch k {
		case "at":
			f.At, err = faultSeconds(k, v, true)
		case "duration":
			f.Duration, err = faultSeconds(k, v, false)
		case "latency":
			f.Latency, err = time.ParseDuration(v)
			if err != nil {
				err = fmt.Errorf("latency %q is not a duration (e.g. 500ms, 2s)", v)
			}
		case "fail":
			f.Fail, err = strconv.Atoi(v)
			if err != nil {
				err = fmt.Errorf("fail %q is not a whole percentage", v)
			}
		default:
			err = fmt.Errorf("unknown key %q (keys: at, duration, latency, fail)", k)
		}
		if err != nil {
			return f, err
		}
	}
	for _, k := range []string{"at", "duration"} {
		if !seen[k] {
			return f, fmt.Errorf("%s is missing (want %s)", k, ReceiverFaultSyntax)
		}
	}
	return f, f.validate()
}

// faultSeconds reads a number of seconds (decimals allowed).
func faultSeconds(key, v string, zeroOK bool) (time.Duration, error) {
	x, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil || math.IsNaN(x) || math.IsInf(x, 0):
		return 0, fmt.Errorf("%s %q is not a number of seconds", key, v)
	case x < 0 || x == 0 && !zeroOK:
		if zeroOK {
			return 0, fmt.Errorf("%s must be >= 0 seconds, not %s", key, v)
		}
		return 0, fmt.Errorf("%s must be > 0 seconds, not %s", key, v)
	case x > maxFaultSeconds:
		return 0, fmt.Errorf("%s must be at most %d seconds, not %s", key, maxFaultSeconds, v)
	}
	return time.Duration(math.Round(x * 1e9)), nil
}

func (f ReceiverFault) validate() error {
	switch {
	case f.At < 0 || f.At > maxFaultSeconds*time.Second:
		return fmt.Errorf("at must be 0..%d seconds", maxFaultSeconds)
	case f.Duration <= 0 || f.Duration > maxFaultSeconds*time.Second:
		return fmt.Errorf("duration must be > 0 and at most %d seconds", maxFaultSeconds)
	case f.Latency < 0 || f.Latency > MaxReceiverLatency:
		return fmt.Errorf("latency must be 0..%v, not %v", MaxReceiverLatency, f.Latency)
	case f.Fail < 0 || f.Fail > 100:
		return fmt.Errorf("fail must be 0..100 (percent), not %d", f.Fail)
	case f.Latency == 0 && f.Fail == 0:
		return fmt.Errorf("neither latency nor fail: the fault would do nothing")
	}
	return nil
}

// String is the fault in the flag's syntax.
func (f ReceiverFault) String() string {
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }
	return fmt.Sprintf("at=%s,duration=%s,latency=%v,fail=%d", secs(f.At), secs(f.Duration), f.Latency, f.Fail)
}

// ValidateReceiverFaults checks each fault and that no two windows
// overlap (a call belongs to one window, whose spread of failures it counts in).
func ValidateReceiverFaults(fs []ReceiverFault) error {
	for _, f := range fs {
		if err := f.validate(); err != nil {
			return fmt.Errorf("receiver fault %s: %w", f, err)
		}
	}
	s := append([]ReceiverFault(nil), fs...)
	sort.Slice(s, func(i, j int) bool { return s[i].At < s[j].At })
	for i := 1; i < len(s); i++ {
		if s[i].At < s[i-1].At+s[i-1].Duration {
			return fmt.Errorf("receiver faults %s and %s overlap: give one window both a latency and a fail share instead", s[i-1], s[i])
		}
	}
	return nil
}

// ReceiverFaultMarks lists the faults at their times for a load phase
// that started at start (unix ms), named SlowReceiverFault: the list
// `sluice-bench report --faults` and `merge --faults` take.
func ReceiverFaultMarks(start int64, fs []ReceiverFault) []result.Fault {
	var out []result.Fault
	for _, f := range fs {
		out = append(out, result.Fault{Name: SlowReceiverFault, At: start + f.At.Milliseconds()})
	}
	return out
}

// failsCall reports whether call n (1-based) of a window failing p
// percent of its calls is answered 500: the failures are spread evenly,
// floor(n*p/100) of the first n calls (50 = every other call).
func failsCall(n int64, p int) bool {
	return n >= 1 && n*int64(p)/100 > (n-1)*int64(p)/100
}

// faultSchedule is the receiver's faults on the clock of the load phase.
type faultSchedule struct {
	faults []ReceiverFault
	calls  []atomic.Int64 // calls seen per window, for the fail spread
	start  atomic.Int64   // unix ns the load phase started; 0: not yet, no fault is active
}

func newFaultSchedule(fs []ReceiverFault) *faultSchedule {
	return &faultSchedule{faults: fs, calls: make([]atomic.Int64, len(fs))}
}

// begin sets the time the load phase started (and so every window).
func (s *faultSchedule) begin(start time.Time) { s.start.Store(start.UnixNano()) }

// active returns the index of the window now falls in, or -1.
func (s *faultSchedule) active(now time.Time) int {
	if s == nil || len(s.faults) == 0 {
		return -1
	}
	st := s.start.Load()
	if st == 0 {
		return -1
	}
	since := time.Duration(now.UnixNano() - st)
	for i, f := range s.faults {
		if since >= f.At && since < f.At+f.Duration {
			return i
		}
	}
	return -1
}

// call numbers a call of window i and says whether it is to fail.
func (s *faultSchedule) call(i int) (fail bool) {
	return failsCall(s.calls[i].Add(1), s.faults[i].Fail)
}
