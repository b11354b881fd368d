package logging

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"sluice.dev/server/internal/jsontext"
)

// Request writes the access-log line of one request to h: an Info record
// "request" with its status, method, route (the route template), path,
// duration_ms and request_id. On this package's handler the line is
// encoded straight from the arguments, the same bytes Handle writes for
// that record: building the record's attributes and walking them cost
// about two thirds of the line (BenchmarkAccessLogLine, docs/benchmarks.md,
// "Instructions per request"). Other handlers get the record.
func Request(h slog.Handler, status int, method, route, path string, d time.Duration, id string) {
	ctx := context.Background()
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	ms := float64(d.Microseconds()) / 1000
	if jh, ok := h.(*jsonHandler); ok && jh.prefix == "" {
		jh.request(time.Now(), status, method, route, path, ms, id)
		return
	}
	_ = h.Handle(ctx, requestRecord(time.Now(), status, method, route, path, ms, id))
}

func requestRecord(t time.Time, status int, method, route, path string, ms float64, id string) slog.Record {
	rec := slog.NewRecord(t, slog.LevelInfo, "request", 0)
	rec.AddAttrs(
		slog.Int("status", status),
		slog.String("method", method),
		slog.String("route", route),
		slog.String("path", path),
		slog.Float64("duration_ms", ms),
		slog.String("request_id", id))
	return rec
}

// request writes what Handle writes for requestRecord's record (on a
// handler without a group: a group would prefix the keys).
func (h *jsonHandler) request(t time.Time, status int, method, route, path string, ms float64, id string) {
	bp, b := h.open(t, slog.LevelInfo, "request")
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"method":`...)
	b = jsontext.AppendString(b, method)
	b = append(b, `,"route":`...)
	b = jsontext.AppendString(b, route)
	b = append(b, `,"path":`...)
	b = jsontext.AppendString(b, path)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendFloat(b, ms, 'g', -1, 64)
	b = append(b, `,"request_id":`...)
	b = jsontext.AppendString(b, id)
	_ = h.close(bp, b)
}

// A second's worth of a line's time: RFC 3339 up to the seconds, and the
// zone that follows the fraction. Formatting them is most of formatting a
// time, and a busy server writes thousands of lines a second.
type timeParts struct {
	unix int64
	loc  *time.Location
	date []byte // "2006-01-02T15:04:05"
	zone []byte // "Z" or "-07:00"
}

var lastSecond atomic.Pointer[timeParts]

// appendTime appends t as time.RFC3339Nano does.
func appendTime(b []byte, t time.Time) []byte {
	p := lastSecond.Load()
	if p == nil || p.unix != t.Unix() || p.loc != t.Location() {
		whole := t.Truncate(time.Second)
		s := whole.AppendFormat(nil, time.RFC3339)
		n := len("2006-01-02T15:04:05")
		if whole.Year() < 0 || whole.Year() > 9999 {
			// Years of other widths: no parts to reuse.
			return t.AppendFormat(b, time.RFC3339Nano)
		}
		p = &timeParts{unix: t.Unix(), loc: t.Location(), date: s[:n], zone: s[n:]}
		lastSecond.Store(p)
	}
	b = append(b, p.date...)
	if ns := t.Nanosecond(); ns != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i := 9; i >= 1; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		end := 10
		for frac[end-1] == '0' {
			end--
		}
		b = append(b, frac[:end]...)
	}
	return append(b, p.zone...)
}
