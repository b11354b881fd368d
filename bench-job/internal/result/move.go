package result

import (
	"fmt"
	"strings"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"sluice.dev/bench/internal/metrics"
)

// MoveDone is the state of a move that finished (the server's word, from
// GET /v2/queues/{q}/migrate); any other final state fails the verdict.
const MoveDone = "done"

// Move is a queue move the run asked for part-way through its load
// (sluice-bench --move-to-pool): where to, how it ended, and what clients
// saw while it ran. Times are unix ms; latencies are milliseconds over
// every operation of the load.
type Move struct {
	Pool   string `json:"pool"`
	Queues int    `json:"queues"`
	// State: "done" when every queue's move finished; else the first
	// queue's state that was not done: "failed" (the server's, or a refused
	// POST), "unfinished" (not done within --move-timeout) or
	// "not_started" (the load ended first).
	State string `json:"state"`
	Moved int64  `json:"messages_moved"`
	Start int64  `json:"start_unix_ms"`
	End   int64  `json:"end_unix_ms"`
	// Duration: from the first POST .../migrate to the poll that saw the
	// last queue done (polled every --move-poll).
	Duration float64 `json:"duration_s"`
	// P99Before is over whole seconds of the load before the move,
	// P99During over the seconds the move overlapped, both from the
	// per-second histograms. A merge of several pods keeps the worst pod's.
	P99Before float64 `json:"p99_before_ms"`
	P99During float64 `json:"p99_during_ms"`
	Error     string  `json:"error,omitempty"`
}

// Failure says why the move fails the run, "" when it finished.
func (m *Move) Failure() string {
	if m.State == MoveDone {
		return ""
	}
	why := "state " + m.State
	if m.Error != "" {
		why += ": " + m.Error
	}
	return fmt.Sprintf("queue move to pool %s did not finish (%s)", m.Pool, why)
}

// MoveLatency measures the p99 of every operation over the seconds before
// the move, [r.Start, from), and over those it overlapped, [from, to]
// (to clamped to the load's end), from the per-second series: a second
// counts as "before" only if it ended before the move began.
func MoveLatency(r *Result, from, to int64) (before, during float64) {
	hb, hd := metrics.NewHist(), metrics.NewHist()
	for _, o := range r.Ops {
		for _, p := range o.Series {
			var dst *hdr.Histogram
			switch {
			case (p.T+1)*1000 <= from && p.T >= r.Start/1000:
				dst = hb
			case (p.T+1)*1000 > from && p.T*1000 <= to:
				dst = hd
			default:
				continue
			}
			if p.Hist == "" {
				continue
			}
			if h, err := hdr.Decode([]byte(p.Hist)); err == nil {
				dst.Merge(h)
			}
		}
	}
	return p99(hb), p99(hd)
}

func p99(h *hdr.Histogram) float64 {
	if h.TotalCount() == 0 {
		return 0
	}
	return metrics.Ms(h.ValueAtQuantile(99))
}

// mergeMoves combines the pods' moves: counts add up, the window is the
// union, the latencies are the worst pod's, and the state is done only if
// every pod's move was.
func mergeMoves(a, b *Move) *Move {
	if a == nil {
		c := *b
		return &c
	}
	out := *a
	out.Queues += b.Queues
	out.Moved += b.Moved
	out.Start, out.End = min(a.Start, b.Start), max(a.End, b.End)
	out.Duration = float64(out.End-out.Start) / 1000
	out.P99Before, out.P99During = max(a.P99Before, b.P99Before), max(a.P99During, b.P99During)
	if a.State == MoveDone && b.State != MoveDone {
		out.State = b.State
	}
	if b.Error != "" && !strings.Contains(out.Error, b.Error) {
		out.Error = strings.TrimPrefix(out.Error+"; "+b.Error, "; ")
	}
	return &out
}
