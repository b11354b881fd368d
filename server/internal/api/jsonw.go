package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// The hot answers (posted ids, message lists, claims) are appended to a byte
// slice by hand: no reflection, no intermediate maps, and message bodies are
// copied through as the raw JSON they were posted as.

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaping as encoding/json does
// (invalid UTF-8 replaced; no HTML escaping, as Python's json.dumps).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendEscaped(b, s)
	return append(b, '"')
}

// plainByte marks the ASCII bytes a JSON string holds as they are.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendEscaped appends the inside of a JSON string.
func appendEscaped(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plainByte[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}

func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

// appendAny marshals a value the slow way (metadata documents).
func appendAny(b []byte, v any) ([]byte, error) {
	out, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, out...), nil
}

// WriteJSON answers with a JSON document; it is exported for handlers added
// with Server.Handle.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "Internal server error", "The answer could not be encoded.")
		return
	}
	writeRaw(w, status, b)
}

// writeRaw answers with an already encoded JSON body.
func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = ctJSON
	w.WriteHeader(status)
	w.Write(body)
}

// writeEmpty answers with no body (201 with Location, 204).
func writeEmpty(w http.ResponseWriter, status int) {
	w.WriteHeader(status)
}
