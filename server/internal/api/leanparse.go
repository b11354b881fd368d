package api

import (
	"bytes"
	"net/http"
	"net/url"
	"strconv"
)

// The lean loop's request parser (lean.go): the strict subset of HTTP/1.1
// it serves, read into the connection's reused Request.

// leanMethods are the methods the lean loop serves (HEAD, whose answers
// have no body, and the rest go to net/http).
var leanMethods = [...]string{"GET", "POST", "PUT", "PATCH", "DELETE"}

// Bytes a lean request's path may hold: those url.URL.EscapedPath leaves
// as they are, so Path is the target's path as written and RawPath empty.
// A query may hold any visible ASCII but '#'.
var leanPathByte, leanQueryByte, leanNameByte, leanValueByte, leanHostByte = func() (p, q, n, v, h [256]bool) {
	for c := 0; c < 256; c++ {
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		p[c] = alnum || bytes.IndexByte([]byte("-._~/$&+,:;=@"), byte(c)) >= 0
		q[c] = c > 0x20 && c < 0x7f && c != '#'
		n[c] = alnum || c == '-'
		v[c] = c >= 0x20 && c < 0x7f || c == '\t'
		h[c] = alnum || bytes.IndexByte([]byte("-.:[]"), byte(c)) >= 0
	}
	return
}()

// parse reads a request head (through its blank line) into lc.req, or
// returns false for one outside the subset the lean loop serves.
func (lc *leanConn) parse(head []byte) bool {
	if max := lc.s.opts.MaxHeaderBytes; max > 0 && len(head) > max {
		return false
	}
	line, rest, ok := bytes.Cut(head, crlf)
	if !ok {
		return false
	}
	method := ""
	for _, m := range leanMethods {
		if len(line) > len(m) && string(line[:len(m)]) == m && line[len(m)] == ' ' {
			method = m
			break
		}
	}
	if method == "" {
		return false
	}
	line = line[len(method)+1:]
	const proto = " HTTP/1.1"
	if len(line) <= len(proto) || string(line[len(line)-len(proto):]) != proto {
		return false
	}
	target := line[:len(line)-len(proto)]
	if target[0] != '/' {
		return false
	}
	pathEnd := len(target)
	for i, c := range target {
		if c == '?' {
			pathEnd = i
			break
		}
		if !leanPathByte[c] {
			return false
		}
	}
	if pathEnd == len(target)-1 {
		return false // "?" and nothing after: url.URL's ForceQuery
	}
	for _, c := range target[pathEnd:] {
		if !leanQueryByte[c] {
			return false
		}
	}

	old := lc.header
	h := lc.spare
	if h == nil {
		h = make(http.Header, 8)
	}
	clear(h)
	host := ""
	var contentLength int64
	haveLength := false
	for len(rest) > 2 {
		line, rest, ok = bytes.Cut(rest, crlf)
		if !ok {
			return false
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return false
		}
		name := line[:colon]
		for _, c := range name {
			if !leanNameByte[c] {
				return false
			}
		}
		v := line[colon+1:]
		for _, c := range v {
			if !leanValueByte[c] {
				return false
			}
		}
		v = bytes.Trim(v, " \t")
		key := canonicalKey(name)
		switch key {
		case "Host":
			if host != "" || len(v) == 0 {
				return false
			}
			for _, c := range v {
				if !leanHostByte[c] {
					return false
				}
			}
			host = lc.str(&lc.hostStr, v)
			continue
		case "Content-Length":
			if haveLength || len(v) == 0 || len(v) > 15 {
				return false
			}
			for _, c := range v {
				if c < '0' || c > '9' {
					return false
				}
			}
			n, _ := strconv.ParseInt(string(v), 10, 64)
			contentLength, haveLength = n, true
		case "Connection":
			if !bytes.EqualFold(v, keepAlive) {
				return false
			}
		case "Transfer-Encoding", "Expect", "Upgrade", "Te", "Trailer", "Pragma", "Http2-Settings":
			return false
		case "":
			return false
		}
		if prev, ok := h[key]; ok {
			h[key] = append(prev, string(v))
			continue
		}
		if vs := old[key]; len(vs) == 1 && vs[0] == string(v) {
			h[key] = vs // the same value as on the connection's last request
		} else {
			h[key] = []string{string(v)}
		}
	}
	if host == "" || len(rest) != 2 {
		return false
	}
	lc.spare, lc.header = old, h

	lc.url = url.URL{Path: lc.str(&lc.pathStr, target[:pathEnd])}
	if pathEnd < len(target) {
		lc.url.RawQuery = lc.str(&lc.queryStr, target[pathEnd+1:])
	}
	lc.req = http.Request{
		Method:        method,
		URL:           &lc.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		ContentLength: contentLength,
		Host:          host,
		RemoteAddr:    lc.remote,
		RequestURI:    lc.str(&lc.targetStr, target),
	}
	lc.body = leanBody{lc: lc, left: contentLength}
	lc.req.Body = http.NoBody
	if contentLength > 0 {
		lc.req.Body = &lc.body
	}
	return true
}

var crlf, keepAlive = []byte("\r\n"), []byte("keep-alive")

// str returns b as a string, the one from the last request when the
// bytes are the same (a client sends the same path again and again).
func (lc *leanConn) str(last *string, b []byte) string {
	if *last != string(b) {
		*last = string(b)
	}
	return *last
}

// canonicalKey is textproto.CanonicalMIMEHeaderKey for a name of letters,
// digits and '-', without allocating for the names requests carry.
func canonicalKey(name []byte) string {
	var buf [64]byte
	if len(name) > len(buf) {
		return ""
	}
	upper := true
	for i, c := range name {
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
		upper = c == '-'
	}
	k := buf[:len(name)]
	if s, ok := commonKeys[string(k)]; ok {
		return s
	}
	return string(k)
}

var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Client-Id", "Connection", "Content-Length", "Content-Type", "Host", "User-Agent", "X-Auth-Token",
		"X-Project-Id", "X-Roles", "Transfer-Encoding", "Expect", "Upgrade", "Te", "Trailer", "Pragma",
		"Http2-Settings", "Url-Signature", "Url-Expires", "Url-Methods", "Url-Paths"} {
		m[k] = k
	}
	return m
}()
