// Package logging builds sluice-server's logger: JSON lines (the fields
// slog.JSONHandler writes) through a buffered writer, cheap enough for one
// access-log line per request.
package logging

import (
	"bufio"
	"io"
	"log/slog"
	"sync"
	"time"
)

// New returns the JSON logger sluice-server writes with. Lines go
// through a buffer flushed every 100 ms and on Close, so the per-request
// access log costs no system call per request.
func New(w io.Writer, level string) (*slog.Logger, io.Closer) {
	bw := &bufferedWriter{w: bufio.NewWriterSize(w, 64<<10), done: make(chan struct{})}
	go bw.flushLoop()
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	return slog.New(newJSONHandler(bw, lv)), bw
}

type bufferedWriter struct {
	mu   sync.Mutex
	w    *bufio.Writer
	done chan struct{}
	once sync.Once
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.w.Write(p)
}

func (b *bufferedWriter) flushLoop() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.mu.Lock()
			b.w.Flush()
			b.mu.Unlock()
		case <-b.done:
			return
		}
	}
}

// Close flushes what is buffered and stops the flusher.
func (b *bufferedWriter) Close() error {
	b.once.Do(func() { close(b.done) })
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.w.Flush()
}
