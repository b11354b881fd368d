package zaqar

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"syscall"
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
