package load

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// progress prints one self-overwriting line per second (rate, errors,
// elapsed) while the run is going; the returned func stops and clears it.
func (r *run) progress(start time.Time, total time.Duration) func() {
	w := r.cfg.Progress
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var lastOK int64
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case now := <-t.C:
				r.liveMu.Lock()
				var reqs, ok int64
				for _, op := range r.live {
					n, k := op.Live()
					reqs, ok = reqs+n, ok+k
				}
				r.liveMu.Unlock()
				fmt.Fprintf(w, "\r\033[K%s  %4.0fs/%.0fs  %8d req/s  %d ok  %d errors  %d dropped",
					r.cfg.Scenario, now.Sub(start).Seconds(), total.Seconds(), ok-lastOK, ok, reqs-ok, r.dropped.Load())
				lastOK = ok
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// sampleLog writes every request as "op,start_unix_ns,latency_us,status":
// the raw samples, for checking the histograms or custom analysis.
type sampleLog struct {
	off atomic.Bool
	mu  sync.Mutex
	w   *bufio.Writer
	buf []byte
}

func newSampleLog(w io.Writer) *sampleLog {
	l := &sampleLog{w: bufio.NewWriterSize(w, 1<<20)}
	l.w.WriteString("op,start_unix_ns,latency_us,status\n")
	return l
}

func (l *sampleLog) add(op string, start, end time.Time, status int) {
	if l == nil || l.off.Load() {
		return
	}
	l.mu.Lock()
	b := append(l.buf[:0], op...)
	b = append(b, ',')
	b = strconv.AppendInt(b, start.UnixNano(), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, end.Sub(start).Microseconds(), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, '\n')
	l.w.Write(b)
	l.buf = b
	l.mu.Unlock()
}

func (l *sampleLog) flush() {
	l.mu.Lock()
	l.w.Flush()
	l.mu.Unlock()
}
