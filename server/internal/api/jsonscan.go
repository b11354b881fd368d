package api

import "bytes"

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
				end, ok := skipValue(b, j, 0)
				if !ok {
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

// skipValue returns the end of the JSON value starting at i.
func skipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > maxFastDepth {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{':
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			end, ok := skipString(b, i)
			if !ok {
				return 0, false
			}
			i = skipWS(b, end)
			if i >= len(b) || b[i] != ':' {
				return 0, false
			}
			if i, ok = skipValue(b, skipWS(b, i+1), depth+1); !ok {
				return 0, false
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return 0, false
			}
			if b[i] == '}' {
				return i + 1, true
			}
			if b[i] != ',' {
				return 0, false
			}
			i = skipWS(b, i+1)
		}
	case c == '[':
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = skipValue(b, i, depth+1); !ok {
				return 0, false
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return 0, false
			}
			if b[i] == ']' {
				return i + 1, true
			}
			if b[i] != ',' {
				return 0, false
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
	return 0, false
}

func skipLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// skipString accepts what encoding/json accepts: no control characters,
// valid escapes; bytes >= 0x80 pass (invalid UTF-8 is replaced on decode).
func skipString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return 0, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return 0, false
				}
				for _, h := range b[i+2 : i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return 0, false
					}
				}
				i += 6
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		default:
			i++
		}
	}
	return 0, false
}

func skipNumber(b []byte, i int) (int, bool) {
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
		return 0, false
	}
	if b[i] == '0' {
		i++
	} else if digits() == 0 {
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, false
		}
	}
	return i, true
}
