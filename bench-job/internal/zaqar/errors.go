package zaqar

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var errBadURL = errors.New("server URL must be http(s)://host[:port]")

// Reason turns a failed request into a short, bounded label for the
// summary's per-operation error table: "http_503", "timeout", "dns",
// "connection_refused", ... Labels never carry addresses or free text, so
// the table stays small however many requests fail.
func Reason(status int, err error) string {
	if err == nil {
		return "http_" + strconv.Itoa(status)
	}
	var dnsErr *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &dnsErr):
		return "dns"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection_reset"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	}
	return "transport"
}

// ParseRetryAfter reads a Retry-After value (RFC 9110, section 10.2.3):
// delay-seconds, or an HTTP-date counted from now (0 once it has passed),
// rounded up to whole seconds. ok is false for anything else, a signed or
// fractional number included.
func ParseRetryAfter(v string, now time.Time) (secs int64, ok bool) {
	v = strings.TrimSpace(v)
	if v != "" && strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, false // too large for int64
		}
		return n, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0, true
	}
	return int64((d + time.Second - 1) / time.Second), true
}
