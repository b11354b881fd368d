package api

import (
	"bytes"
	"math"
	"strconv"
	"unicode/utf8"
)

// decodePostFast reads the common shape of a message post,
// {"messages":[{"ttl":N,"delay":N,"body":V},...]}, in one pass over the
// bytes, validating every value as encoding/json would. Anything unusual
// (escaped or repeated keys, other keys, deep nesting, a syntax error)
// returns ok=false and the caller decodes with encoding/json, which also
// produces the exact error. The returned slices alias body.
func decodePostFast(body []byte) (msgs []postedMessage, ok bool) {
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false
	}
	i = skipWS(body, i+1)
	found := false
	if i < len(body) && body[i] == '}' {
		return nil, false // no "messages": let the slow path word it
	}
	for {
		key, j, ok := scanKey(body, i)
		if !ok || string(key) != "messages" || found {
			return nil, false
		}
		found = true
		j = skipWS(body, j)
		if j >= len(body) || body[j] != '[' {
			return nil, false
		}
		msgs, i, ok = scanMessages(body, j+1)
		if !ok {
			return nil, false
		}
		i = skipWS(body, i)
		if i >= len(body) {
			return nil, false
		}
		if body[i] == '}' {
			i++
			break
		}
		if body[i] != ',' {
			return nil, false
		}
		i = skipWS(body, i+1)
	}
	if skipWS(body, i) != len(body) {
		return nil, false
	}
	return msgs, true
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// scanKey reads `"key"` and the colon after it; keys with escapes are left
// to the slow path.
func scanKey(b []byte, i int) (key []byte, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	end := bytes.IndexByte(b[i+1:], '"')
	if end < 0 {
		return nil, 0, false
	}
	key = b[i+1 : i+1+end]
	if bytes.IndexByte(key, '\\') >= 0 {
		return nil, 0, false
	}
	for _, c := range key {
		if c < 0x20 {
			return nil, 0, false
		}
	}
	j := skipWS(b, i+2+end)
	if j >= len(b) || b[j] != ':' {
		return nil, 0, false
	}
	return key, skipWS(b, j+1), true
}

// scanMessages reads the message objects after '[' up to and past ']'.
func scanMessages(b []byte, i int) ([]postedMessage, int, bool) {
	msgs := make([]postedMessage, 0, 4)
	i = skipWS(b, i)
	if i < len(b) && b[i] == ']' {
		return msgs, i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '{' {
			return nil, 0, false
		}
		var m postedMessage
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			i++
		} else {
			for {
				key, j, ok := scanKey(b, i)
				if !ok {
					return nil, 0, false
				}
				end, f := skipValue(b, j, 0, maxFastDepth)
				if f != jsonOK {
					return nil, 0, false
				}
				var dst *[]byte
				switch string(key) {
				case "body":
					dst = (*[]byte)(&m.Body)
				case "ttl":
					dst = (*[]byte)(&m.TTL)
				case "delay":
					dst = (*[]byte)(&m.Delay)
				default:
					return nil, 0, false
				}
				if *dst != nil {
					return nil, 0, false
				}
				*dst = b[j:end:end]
				i = skipWS(b, end)
				if i >= len(b) {
					return nil, 0, false
				}
				if b[i] == '}' {
					i++
					break
				}
				if b[i] != ',' {
					return nil, 0, false
				}
				i = skipWS(b, i+1)
			}
		}
		msgs = append(msgs, m)
		i = skipWS(b, i)
		if i >= len(b) {
			return nil, 0, false
		}
		if b[i] == ']' {
			return msgs, i + 1, true
		}
		if b[i] != ',' {
			return nil, 0, false
		}
		i = skipWS(b, i+1)
	}
}

// maxFastDepth bounds recursion; deeper documents take the slow path.
const maxFastDepth = 64

// jsonFault says why a JSON value was refused; the checker turns it into
// the answer, the fast path just falls back.
type jsonFault uint8

const (
	jsonOK jsonFault = iota
	// jsonSyntax: not JSON at all (or nested deeper than allowed).
	jsonSyntax
	// jsonEncoding: invalid UTF-8 or a lone UTF-16 surrogate escape, which
	// no JSON consumer can decode to the text that was sent.
	jsonEncoding
	// jsonRange: a number outside the float64 range (1e400), which most
	// JSON consumers cannot decode at all.
	jsonRange
)

// skipValue returns the end of the JSON value starting at i. It is strict:
// strings must be valid UTF-8 without lone surrogates and numbers must fit
// a float64, so whatever it accepts every consumer can read back.
func skipValue(b []byte, i, depth, maxDepth int) (int, jsonFault) {
	if i >= len(b) || depth > maxDepth {
		return 0, jsonSyntax
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{':
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, jsonOK
		}
		for {
			end, f := skipString(b, i)
			if f != jsonOK {
				return 0, f
			}
			i = skipWS(b, end)
			if i >= len(b) || b[i] != ':' {
				return 0, jsonSyntax
			}
			if i, f = skipValue(b, skipWS(b, i+1), depth+1, maxDepth); f != jsonOK {
				return 0, f
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return 0, jsonSyntax
			}
			if b[i] == '}' {
				return i + 1, jsonOK
			}
			if b[i] != ',' {
				return 0, jsonSyntax
			}
			i = skipWS(b, i+1)
		}
	case c == '[':
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, jsonOK
		}
		for {
			var f jsonFault
			if i, f = skipValue(b, i, depth+1, maxDepth); f != jsonOK {
				return 0, f
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return 0, jsonSyntax
			}
			if b[i] == ']' {
				return i + 1, jsonOK
			}
			if b[i] != ',' {
				return 0, jsonSyntax
			}
			i = skipWS(b, i+1)
		}
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return skipNumber(b, i)
	}
	return 0, jsonSyntax
}

func skipLiteral(b []byte, i int, lit string) (int, jsonFault) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, jsonSyntax
	}
	return i + len(lit), jsonOK
}

// skipString accepts what encoding/json accepts (no control characters,
// valid escapes) minus what it would silently change: invalid UTF-8 and
// lone surrogate escapes, both of which it replaces with U+FFFD.
func skipString(b []byte, i int) (int, jsonFault) {
	if i >= len(b) || b[i] != '"' {
		return 0, jsonSyntax
	}
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, jsonOK
		case c == '\\':
			if i+1 >= len(b) {
				return 0, jsonSyntax
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				r, ok := hex4(b, i+2)
				if !ok {
					return 0, jsonSyntax
				}
				i += 6
				switch {
				case r >= 0xDC00 && r <= 0xDFFF:
					return 0, jsonEncoding // low half without a high half
				case r >= 0xD800 && r <= 0xDBFF:
					// A high half must be followed by an escaped low half.
					if i+1 >= len(b) || b[i] != '\\' || b[i+1] != 'u' {
						return 0, jsonEncoding
					}
					lo, ok := hex4(b, i+2)
					if !ok {
						return 0, jsonSyntax
					}
					if lo < 0xDC00 || lo > 0xDFFF {
						return 0, jsonEncoding
					}
					i += 6
				}
			default:
				return 0, jsonSyntax
			}
		case c < 0x20:
			return 0, jsonSyntax
		case c < utf8.RuneSelf:
			i++
		default:
			// DecodeRune also refuses overlong forms and UTF-8-encoded
			// surrogates (RuneError of width 1).
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return 0, jsonEncoding
			}
			i += n
		}
	}
	return 0, jsonSyntax
}

// hex4 reads the four hex digits of a \u escape at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, h := range b[i : i+4] {
		switch {
		case h >= '0' && h <= '9':
			h -= '0'
		case h >= 'a' && h <= 'f':
			h -= 'a' - 10
		case h >= 'A' && h <= 'F':
			h -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	return r, true
}

// maxExactDigits: an integer with more digits than this may exceed the
// float64 range (1.8e308); shorter ones without an exponent never do.
const maxExactDigits = 308

func skipNumber(b []byte, i int) (int, jsonFault) {
	start := i
	if b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i >= len(b) {
		return 0, jsonSyntax
	}
	intDigits := 1
	if b[i] == '0' {
		i++
	} else if intDigits = digits(); intDigits == 0 {
		return 0, jsonSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return 0, jsonSyntax
		}
	}
	exp := false
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		exp = true
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, jsonSyntax
		}
	}
	// Digits are kept as sent (big integers stay exact); only a value no
	// float64 can hold at all is refused.
	if exp || intDigits > maxExactDigits {
		if f, _ := strconv.ParseFloat(string(b[start:i]), 64); math.IsInf(f, 0) {
			return 0, jsonRange
		}
	}
	return i, jsonOK
}
