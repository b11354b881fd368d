package jsontext

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// SkipWS returns the index of the first non-whitespace byte at or after i.
func SkipWS(b []byte, i int) int {
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

// ScanKey reads `"key"` and the colon after it, returning the key and the
// index after the colon; keys with escapes or control bytes give ok=false
// (the caller falls back to encoding/json).
func ScanKey(b []byte, i int) (key []byte, next int, ok bool) {
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
	j := SkipWS(b, i+2+end)
	if j >= len(b) || b[j] != ':' {
		return nil, 0, false
	}
	return key, SkipWS(b, j+1), true
}

// Fault says why a JSON value was refused; a checker turns it into an
// answer, a fast decoder just falls back.
type Fault uint8

const (
	// OK: a valid value.
	OK Fault = iota
	// Syntax: not JSON at all (or nested deeper than allowed).
	Syntax
	// Encoding: invalid UTF-8 or a lone UTF-16 surrogate escape, which
	// no JSON consumer can decode to the text that was sent.
	Encoding
	// Range: a number outside the float64 range (1e400), which most
	// JSON consumers cannot decode at all.
	Range
)

// SkipValue returns the end of the JSON value starting at i. It is strict:
// strings must be valid UTF-8 without lone surrogates and numbers must fit
// a float64, so whatever it accepts every consumer can read back.
func SkipValue(b []byte, i, depth, maxDepth int) (int, Fault) {
	if i >= len(b) || depth > maxDepth {
		return 0, Syntax
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{':
		i = SkipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, OK
		}
		for {
			end, f := skipString(b, i)
			if f != OK {
				return 0, f
			}
			i = SkipWS(b, end)
			if i >= len(b) || b[i] != ':' {
				return 0, Syntax
			}
			if i, f = SkipValue(b, SkipWS(b, i+1), depth+1, maxDepth); f != OK {
				return 0, f
			}
			i = SkipWS(b, i)
			if i >= len(b) {
				return 0, Syntax
			}
			if b[i] == '}' {
				return i + 1, OK
			}
			if b[i] != ',' {
				return 0, Syntax
			}
			i = SkipWS(b, i+1)
		}
	case c == '[':
		i = SkipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, OK
		}
		for {
			var f Fault
			if i, f = SkipValue(b, i, depth+1, maxDepth); f != OK {
				return 0, f
			}
			i = SkipWS(b, i)
			if i >= len(b) {
				return 0, Syntax
			}
			if b[i] == ']' {
				return i + 1, OK
			}
			if b[i] != ',' {
				return 0, Syntax
			}
			i = SkipWS(b, i+1)
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
	return 0, Syntax
}

func skipLiteral(b []byte, i int, lit string) (int, Fault) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, Syntax
	}
	return i + len(lit), OK
}

// skipString accepts what encoding/json accepts (no control characters,
// valid escapes) minus what it would silently change: invalid UTF-8 and
// lone surrogate escapes, both of which it replaces with U+FFFD.
func skipString(b []byte, i int) (int, Fault) {
	if i >= len(b) || b[i] != '"' {
		return 0, Syntax
	}
	i++
	for i < len(b) {
		i += plainRun(b[i:])
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, OK
		case c == '\\':
			if i+1 >= len(b) {
				return 0, Syntax
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				r, ok := hex4(b, i+2)
				if !ok {
					return 0, Syntax
				}
				i += 6
				switch {
				case r >= 0xDC00 && r <= 0xDFFF:
					return 0, Encoding // low half without a high half
				case r >= 0xD800 && r <= 0xDBFF:
					// A high half must be followed by an escaped low half.
					if i+1 >= len(b) || b[i] != '\\' || b[i+1] != 'u' {
						return 0, Encoding
					}
					lo, ok := hex4(b, i+2)
					if !ok {
						return 0, Syntax
					}
					if lo < 0xDC00 || lo > 0xDFFF {
						return 0, Encoding
					}
					i += 6
				}
			default:
				return 0, Syntax
			}
		case c < 0x20:
			return 0, Syntax
		case c < utf8.RuneSelf:
			i++
		default:
			// DecodeRune also refuses overlong forms and UTF-8-encoded
			// surrogates (RuneError of width 1).
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return 0, Encoding
			}
			i += n
		}
	}
	return 0, Syntax
}

// plainRun returns how many leading bytes of b need no look: printable
// ASCII other than '"' and '\\'. It tests eight bytes per step, as a message
// body is mostly such bytes and scanning it one byte at a time was a
// twentieth of a POST's server CPU (docs/benchmarks.md). It may stop early
// (a byte after a flagged one can be flagged too), never late.
func plainRun(b []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	n := 0
	for len(b)-n >= 8 {
		x := binary.LittleEndian.Uint64(b[n:])
		q := x ^ (ones * '"')
		e := x ^ (ones * '\\')
		flagged := ((q - ones) &^ q) | ((e - ones) &^ e) | ((x - ones*0x20) &^ x) | x
		if flagged &= highs; flagged != 0 {
			return n + bits.TrailingZeros64(flagged)/8
		}
		n += 8
	}
	return n
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

func skipNumber(b []byte, i int) (int, Fault) {
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
		return 0, Syntax
	}
	intDigits := 1
	if b[i] == '0' {
		i++
	} else if intDigits = digits(); intDigits == 0 {
		return 0, Syntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return 0, Syntax
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
			return 0, Syntax
		}
	}
	// Digits are kept as sent (big integers stay exact); only a value no
	// float64 can hold at all is refused.
	if exp || intDigits > maxExactDigits {
		if f, _ := strconv.ParseFloat(string(b[start:i]), 64); math.IsInf(f, 0) {
			return 0, Range
		}
	}
	return i, OK
}
