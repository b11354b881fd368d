package api

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// net/http answers requests it cannot parse (malformed request line or
// headers, headers over max-header-bytes, an unknown Transfer-Encoding)
// itself, before any handler runs, with a text/plain body written in one
// piece straight to the connection. Every connection net/http serves is a
// zaqarErrorsConn (handoverListener.give wraps it), which recognises exactly
// that write (a status line followed by net/http's fixed error headers,
// which no response of a handler has: those carry a Date) and sends the
// same status with a Zaqar JSON body instead.
type zaqarErrorsConn struct{ net.Conn }

// rawErrorHeaders is what net/http puts after the status line of the
// answers it writes itself.
const rawErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c *zaqarErrorsConn) Write(b []byte) (int, error) {
	if out, ok := rewriteRawError(b); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// CloseWrite keeps net/http's graceful close after an error answer (it
// half-closes TCP connections so the client reads the answer).
func (c *zaqarErrorsConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// rewriteRawError turns "HTTP/1.1 431 Request Header Fields Too Large" +
// rawErrorHeaders + text into the same status with a JSON body.
func rewriteRawError(b []byte) ([]byte, bool) {
	const proto = "HTTP/1.1 "
	if len(b) < len(proto)+4 || string(b[:len(proto)]) != proto {
		return nil, false
	}
	// The fixed headers follow the status line directly; a handler's
	// answer has other headers there, so this costs one short compare.
	end := bytes.IndexByte(b, '\r')
	if end < 0 || !bytes.HasPrefix(b[end:], []byte(rawErrorHeaders)) {
		return nil, false
	}
	code, err := strconv.Atoi(string(b[len(proto) : len(proto)+3]))
	if err != nil || code < 400 || code > 599 {
		return nil, false
	}
	title := strconv.Itoa(code) + " " + http.StatusText(code)
	// net/http's text repeats the status, then may say why after ": ".
	desc, _ := strings.CutPrefix(string(b[end+len(rawErrorHeaders):]), title)
	desc = strings.TrimPrefix(desc, ": ")
	switch {
	case code == http.StatusRequestHeaderFieldsTooLarge:
		desc = "The request line and headers are too large."
	case desc == "":
		desc = "The request could not be read as HTTP."
	}
	body := appendString([]byte(`{"title":`), title)
	body = append(body, `,"description":`...)
	body = appendString(body, desc)
	body = append(body, '}')
	out := make([]byte, 0, 160+len(body))
	out = append(out, proto...)
	out = append(out, title...)
	out = append(out, "\r\nContent-Type: application/json\r\nVary: Accept\r\nConnection: close\r\nContent-Length: "...)
	out = strconv.AppendInt(out, int64(len(body)), 10)
	out = append(out, "\r\n\r\n"...)
	return append(out, body...), true
}
