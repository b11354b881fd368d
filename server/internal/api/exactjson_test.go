package api

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// Numbers whose text a float64 round trip would change or refuse, and
// strings that exercise escapes, HTML characters and non-BMP characters.
var (
	exactNumbers = []string{
		"9007199254740993", "-9007199254740993", "123456789012345678901234567890",
		"18446744073709551616", "-0", "0.1", "1E+2", "1e-400", "2.5e-3",
		"1.7976931348623157e308", "12345678901234567890.123456789", "0",
		strings.Repeat("9", 300),
	}
	exactStrings = []string{
		"", "plain", "caf\u00e9", `<a href="x">&amp;</a>`, "tab\there\nline",
		"\u2028\u2029", "emoji \U0001F600", "\x7f", "nul\u0000byte", "back\\slash /",
	}
)

// randomJSON builds a random JSON value from those pieces, as text; string
// escapes are chosen at random (\uXXXX, surrogate pairs, raw UTF-8).
func randomJSON(r *rand.Rand, depth int) string {
	k := r.IntN(7)
	if depth > 2 {
		k = r.IntN(4)
	}
	switch k {
	case 0:
		return exactNumbers[r.IntN(len(exactNumbers))]
	case 1:
		return randomString(r)
	case 2:
		return []string{"true", "false", "null"}[r.IntN(3)]
	case 3:
		return strconv.FormatInt(r.Int64()-r.Int64(), 10)
	case 4, 5:
		n := r.IntN(5)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = randomString(r) + ":" + randomJSON(r, depth+1)
		}
		return "{" + strings.Join(parts, ",") + "}"
	default:
		n := r.IntN(5)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = randomJSON(r, depth+1)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
}

func randomString(r *rand.Rand) string {
	s := exactStrings[r.IntN(len(exactStrings))] + strconv.Itoa(r.IntN(1000))
	if r.IntN(2) == 0 {
		b, _ := json.Marshal(s) // escapes <, >, & and controls
		return string(b)
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\' || c < 0x20:
			b.WriteString(`\u` + strconv.FormatInt(int64(c)|0x10000, 16)[1:])
		case c > 0xFFFF:
			c -= 0x10000
			b.WriteString(`\u` + strconv.FormatInt(int64(0xD800+(c>>10)), 16))
			b.WriteString(`\u` + strconv.FormatInt(int64(0xDC00+(c&0x3FF)), 16))
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// sameJSON compares two documents by value, numbers by their exact text.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	decode := func(s []byte) any {
		d := json.NewDecoder(bytes.NewReader(s))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}

// TestExactJSONRoundTrip posts random documents as message bodies and as
// queue metadata (PUT and PATCH) and reads them back through every driver:
// message bodies come back byte for byte, metadata value for value with
// numbers as the exact text sent. Before metadata was decoded with
// json.Number in the Redis and MongoDB drivers, 9007199254740993 read back
// as 9007199254740992 and larger integers as floats.
func TestExactJSONRoundTrip(t *testing.T) {
	forEveryDriver(t, func(t *testing.T, ts *testServer) {
		seed := rand.Uint64()
		t.Logf("seed %d", seed)
		r := rand.New(rand.NewPCG(seed, 7))
		for i := 0; i < 25; i++ {
			body := randomJSON(r, 0)
			m := ts.must(201, "POST", "/v2/queues/exact/messages", std(), `{"messages":[{"body":`+body+`}]}`).json(t)
			href := m["resources"].([]any)[0].(string)
			got := ts.must(200, "GET", href, std(), "")
			var msg struct{ Body json.RawMessage }
			if err := json.Unmarshal([]byte(got.body), &msg); err != nil {
				t.Fatal(err)
			}
			if string(msg.Body) != body {
				t.Fatalf("message body %s read back as %s", body, msg.Body)
			}

			key := strings.Trim(randomString(r), `"`)
			doc := `{"k":` + body + `,"n":` + exactNumbers[r.IntN(len(exactNumbers))] + `}`
			ts.must(204, "DELETE", "/v2/queues/meta", std(), "")
			ts.must(201, "PUT", "/v2/queues/meta", std(), doc)
			got = ts.must(200, "GET", "/v2/queues/meta", std(), "")
			var meta map[string]json.RawMessage
			if err := json.Unmarshal([]byte(got.body), &meta); err != nil {
				t.Fatal(err)
			}
			var sent map[string]json.RawMessage
			json.Unmarshal([]byte(doc), &sent)
			for k, v := range sent {
				if !sameJSON(t, v, meta[k]) {
					t.Fatalf("metadata %s: sent %s, read back %s", k, v, meta[k])
				}
			}
			value := exactNumbers[r.IntN(len(exactNumbers))]
			keyJSON, _ := json.Marshal(key)
			ptr := strings.ReplaceAll(strings.ReplaceAll(string(keyJSON[1:len(keyJSON)-1]), "~", "~0"), "/", "~1")
			patch := `[{"op":"add","path":"/metadata/` + ptr + `","value":` + value + `},{"op":"add","path":"/metadata/d","value":` + body + `}]`
			ts.must(200, "PATCH", "/v2/queues/meta", std("Content-Type", patchMediaType), patch)
			got = ts.must(200, "GET", "/v2/queues/meta", std(), "")
			meta = nil
			if err := json.Unmarshal([]byte(got.body), &meta); err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, []byte(value), meta[key]) || !sameJSON(t, []byte(body), meta["d"]) || !sameJSON(t, sent["n"], meta["n"]) {
				t.Fatalf("after patch %s: %s", patch, got.body)
			}
		}
		// Listing details read every queue's metadata back too.
		list := ts.must(200, "GET", "/v2/queues?detailed=true", std(), "")
		if !json.Valid([]byte(list.body)) {
			t.Fatalf("detailed listing %s", list.body)
		}
	})
}

// TestNumbersBeyondFloat64Refused: a number no float64 can hold is a 400 at
// write time on every driver. Before, PUT and PATCH stored 1e400, and from
// then on every read of the queue (GET, list, post, claim) answered 500 on
// Redis until the queue was deleted.
func TestNumbersBeyondFloat64Refused(t *testing.T) {
	forEveryDriver(t, func(t *testing.T, ts *testServer) {
		tooLarge := func(r resp) {
			t.Helper()
			m := r.json(t)
			if r.status != 400 || m["title"] != "Invalid request body" || m["description"] != "JSON contains a number that is too large." {
				t.Errorf("status %d body %s", r.status, r.body)
			}
		}
		tooLarge(ts.do("PUT", "/v2/queues/big", std(), `{"x":1e400}`))
		ts.must(201, "PUT", "/v2/queues/big", std(), `{"x":1}`)
		tooLarge(ts.do("PATCH", "/v2/queues/big", std("Content-Type", patchMediaType), `[{"op":"add","path":"/metadata/y","value":-1e400}]`))
		tooLarge(ts.do("POST", "/v2/queues/big/messages", std(), `{"messages":[{"body":{"n":1e400}}]}`))
		tooLarge(ts.do("POST", "/v2/queues/big/messages", std(), `{"messages":[{"body":`+strings.Repeat("9", 400)+`}]}`))
		tooLarge(ts.do("POST", "/v2/queues/big/claims", std(), `{"ttl":1e999}`))
		ts.must(200, "GET", "/v2/queues/big", std(), "")
		ts.must(200, "GET", "/v2/queues?detailed=true", std(), "")
		ts.must(201, "POST", "/v2/queues/big/messages", std(), `{"messages":[{"body":1e308}]}`)
		ts.must(201, "POST", "/v2/queues/big/claims", std(), "")
	})
}
