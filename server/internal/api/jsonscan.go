package api

import "sluice.dev/server/internal/jsontext"

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

// The generic scanner is jsontext's; these are its short names here.
func skipWS(b []byte, i int) int { return jsontext.SkipWS(b, i) }

func scanKey(b []byte, i int) ([]byte, int, bool) { return jsontext.ScanKey(b, i) }

func skipValue(b []byte, i, depth, maxDepth int) (int, jsonFault) {
	return jsontext.SkipValue(b, i, depth, maxDepth)
}

type jsonFault = jsontext.Fault

const (
	jsonOK       = jsontext.OK
	jsonSyntax   = jsontext.Syntax
	jsonEncoding = jsontext.Encoding
	jsonRange    = jsontext.Range
)

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
