// Package signedurl builds and checks Zaqar's pre-signed URLs: an
// HMAC-SHA256, keyed by the server's secret, over the paths, methods,
// project and expiry a holder may use. The construction is Zaqar's
// (zaqar/common/urls.py) byte for byte, so a URL signed by Zaqar with the
// same secret is accepted here and the other way round.
package signedurl

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ExpiresLayout is how an expiry is written: UTC, to the second, no zone.
const ExpiresLayout = "2006-01-02T15:04:05"

// DefaultLifetime is how long a URL lives when the request names no expiry.
const DefaultLifetime = 24 * time.Hour

// Signed is what /share answers and what a holder sends back as headers.
type Signed struct {
	Paths     []string
	Methods   []string
	Project   string
	Expires   string // ExpiresLayout, UTC
	Signature string // lower-case hex
}

// Errors of Sign and Verify, worded as Zaqar's.
var (
	ErrNoKey     = errors.New("The `key` can't be None")
	ErrNoPaths   = errors.New("`paths` must be a non-empty list")
	ErrExpired   = errors.New("`expires` is lower than the current time")
	ErrBadExpiry = errors.New("`expires` should be date format, for example 2016-01-01T00:00:00")
)

// Sign signs paths and methods for project until expires (zero: now +
// DefaultLifetime). Paths and methods are sorted, as Zaqar does, so the
// order a client lists them in never changes the signature.
func Sign(key []byte, paths, methods []string, project string, expires time.Time, now time.Time) (Signed, error) {
	if len(key) == 0 {
		return Signed{}, ErrNoKey
	}
	if len(paths) == 0 {
		return Signed{}, ErrNoPaths
	}
	if len(methods) == 0 {
		methods = []string{"GET"}
	}
	if expires.IsZero() {
		expires = now.Add(DefaultLifetime)
	}
	if !expires.After(now) {
		return Signed{}, ErrExpired
	}
	s := Signed{
		Paths:   sorted(paths),
		Methods: sorted(methods),
		Project: project,
		Expires: expires.UTC().Format(ExpiresLayout),
	}
	s.Signature = hex.EncodeToString(mac(key, s))
	return s, nil
}

// Verify reports whether signature is the signature of the other fields
// (in any order) and the expiry has not passed. Expiry text is read as
// Sign's caller would write it (see ParseExpires).
func Verify(key []byte, paths, methods []string, project, expires, signature string, now time.Time) bool {
	if len(key) == 0 || len(paths) == 0 {
		return false
	}
	at, err := ParseExpires(expires)
	if err != nil || !at.After(now) {
		return false
	}
	if len(methods) == 0 {
		methods = []string{"GET"}
	}
	s := Signed{Paths: sorted(paths), Methods: sorted(methods), Project: project,
		Expires: at.UTC().Format(ExpiresLayout)}
	// The text as Sign writes it (lower-case hex), as Zaqar compares it:
	// the same bytes in upper case are not the signature it issued.
	return hmac.Equal([]byte(hex.EncodeToString(mac(key, s))), []byte(signature))
}

// mac is HMAC-SHA256 over "paths\nmethods\nproject\nexpires" where each
// "\n" is the two characters backslash and n, not a newline: Zaqar formats
// the body with a raw string literal, and interoperating means doing so too.
func mac(key []byte, s Signed) []byte {
	const sep = `\n`
	h := hmac.New(sha256.New, key)
	h.Write([]byte(strings.Join(s.Paths, ",") + sep + strings.Join(s.Methods, ",") + sep +
		s.Project + sep + s.Expires))
	return h.Sum(nil)
}

func sorted(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out) // byte order, as Python sorts str
	return out
}

// isoTime is the subset of ISO 8601 that Zaqar's parser (iso8601, through
// oslo's parse_isotime) reads: a date, optionally a time with optional
// seconds, fraction and zone.
var isoTime = regexp.MustCompile(`^(\d{4})-?(\d{1,2})-?(\d{1,2})` +
	`(?:[T ](\d{2})(?::?(\d{2}))?(?::?(\d{1,2})(?:[.,](\d+))?)?` +
	`(Z|[+-]\d{2}(?::?\d{2})?)?)?$`)

// ParseExpires reads an expiry as Zaqar does: an integer is refused, any
// zone is converted to UTC, and a time without zone is UTC.
func ParseExpires(text string) (time.Time, error) {
	if n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64); err == nil && n != 0 {
		return time.Time{}, errors.New("`expires` should be date format, for example 2016-01-01T00:00:00, not integer value: " +
			strconv.FormatInt(n, 10))
	}
	m := isoTime.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}, ErrBadExpiry
	}
	num := func(s string) int {
		n, _ := strconv.Atoi(s)
		return n
	}
	nsec := 0
	if f := m[7]; f != "" {
		f = (f + "000000000")[:9]
		nsec = num(f)
	}
	loc := time.UTC
	if z := m[8]; z != "" && z != "Z" {
		digits := strings.ReplaceAll(z[1:], ":", "")
		off := num(digits[:2]) * 3600
		if len(digits) > 2 {
			off += num(digits[2:]) * 60
		}
		if z[0] == '-' {
			off = -off
		}
		loc = time.FixedZone("", off)
	}
	year, month, day := num(m[1]), num(m[2]), num(m[3])
	hour, minute, sec := num(m[4]), num(m[5]), num(m[6])
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, loc)
	// time.Date normalises out-of-range fields (Feb 30 -> Mar 2); Python
	// refuses them, and so do we.
	if t.Year() != year || int(t.Month()) != month || t.Day() != day || t.Hour() != hour ||
		t.Minute() != minute || t.Second() != sec {
		return time.Time{}, ErrBadExpiry
	}
	return t.UTC(), nil
}

// Allows reports whether a request path is one of paths or lies below one
// of them (a single message or claim under a signed collection). Zaqar
// tests each path as a regular expression anywhere in the request path; a
// prefix is what it means for the paths it signs, without the surprises.
func Allows(paths []string, path string) bool {
	for _, p := range paths {
		if p != "" && (path == p || strings.HasPrefix(path, p) && path[len(p)] == '/') {
			return true
		}
	}
	return false
}

// Methods are the HTTP methods a URL may be signed for. Zaqar signs
// anything it is given (PATCH included, though no shared resource takes it).
var Methods = []string{"DELETE", "GET", "HEAD", "POST", "PUT"}

// ValidMethod reports whether m may be signed.
func ValidMethod(m string) bool {
	for _, v := range Methods {
		if v == m {
			return true
		}
	}
	return false
}
