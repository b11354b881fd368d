package api

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// bodyRoutes are the routes that take a JSON document, with a valid
// document for each; %s marks where a value goes.
var bodyRoutes = []struct{ method, path, ct, doc string }{
	{"POST", "/v2/queues/strict/messages", "application/json", `{"messages":[{"body":%s}]}`},
	{"PUT", "/v2/queues/strict", "application/json", `{"x":%s}`},
	{"PATCH", "/v2/queues/strict", patchMediaType, `[{"op":"add","path":"/metadata/x","value":%s}]`},
	{"POST", "/v2/queues/strict/claims", "application/json", `{"ttl":60,"x":%s}`},
	{"POST", "/v2/queues/strict/purge", "application/json", `{"resource_types":["messages"],"x":%s}`},
}

// TestInvalidTextRefused: invalid UTF-8 and lone surrogate escapes are a 400
// on every route that reads JSON, wherever they sit in the document. Before,
// a message body with invalid UTF-8 was stored (201) and served back raw,
// so every GET, list, claim and stats of the queue stopped being JSON.
func TestInvalidTextRefused(t *testing.T) {
	ts := startServer(t, nil)
	ts.must(201, "PUT", "/v2/queues/strict", std(), "")
	bad := []string{
		"\"\xff\"", "\"caf\xc3\"", "\"\xed\xa0\x80\"", "\"\xc0\xaf\"", // invalid, a UTF-8 encoded surrogate, overlong
		`"\ud800"`, `"\udc00"`, `"x\ud83dy"`, `"\ud83d\u0041"`, `"\ud83d"`, // lone halves
		`{"\ud800":1}`, "{\"k\xfe\":1}", // in keys
		`["ok","\uDFFF"]`,
	}
	for _, v := range bad {
		for _, rt := range bodyRoutes {
			doc := strings.Replace(rt.doc, "%s", v, 1)
			r := ts.do(rt.method, rt.path, std("Content-Type", rt.ct), doc)
			if m := r.json(t); r.status != 400 || m["description"] != "Request body could not be parsed." {
				t.Errorf("%s %s %q: %d %s", rt.method, rt.path, doc, r.status, r.body)
			}
		}
	}
	// Well-formed pairs and raw non-ASCII text are fine.
	for _, v := range []string{`"\ud83d\ude00"`, `"\uD83D\uDE00"`, "\"caf\u00e9 \U0001F600\""} {
		ts.must(201, "POST", "/v2/queues/strict/messages", std(), `{"messages":[{"body":`+v+`}]}`)
	}
	// Every answer of the queue is still JSON.
	for _, p := range []string{"/v2/queues/strict/messages?echo=true", "/v2/queues/strict/stats", "/v2/queues/strict"} {
		if r := ts.must(200, "GET", p, std(), ""); !json.Valid([]byte(r.body)) {
			t.Errorf("%s: %q", p, r.body)
		}
	}
}

// TestInvalidTextGenerated corrupts random valid message posts with one bad
// sequence inside a string at a random place: always 400, never stored.
func TestInvalidTextGenerated(t *testing.T) {
	ts := startServer(t, nil)
	r := rand.New(rand.NewPCG(rand.Uint64(), 1))
	inject := []string{"\xff", "\xc3", "\xed\xb0\x80", `\ud800`, `\udfff`, `\ud800\ud800`}
	for i := 0; i < 300; i++ {
		s := randomString(r)
		cuts := tokenStarts(s)
		cut := cuts[r.IntN(len(cuts))]
		body := s[:cut] + inject[r.IntN(len(inject))] + s[cut:]
		res := ts.do("POST", "/v2/queues/gen/messages", std(), `{"messages":[{"body":`+body+`}]}`)
		if res.status != 400 {
			t.Fatalf("body %q: %d %s", body, res.status, res.body)
		}
	}
	if r := ts.must(200, "GET", "/v2/queues/gen/stats", std(), ""); r.body != `{"messages":{"claimed":0,"free":0,"total":0}}` {
		t.Errorf("stats %s", r.body)
	}
}

// tokenStarts lists the offsets inside a JSON string literal where a new
// character starts (never inside an escape or a UTF-8 sequence).
func tokenStarts(s string) []int {
	var at []int
	for i := 1; i < len(s); {
		at = append(at, i)
		switch {
		case s[i] == '\\' && s[i+1] == 'u':
			i += 6
		case s[i] == '\\':
			i += 2
		default:
			_, n := utf8.DecodeRuneInString(s[i:])
			i += n
		}
	}
	return at
}

// TestKeysMatchExactly: JSON keys match case-sensitively, as in Zaqar.
// Before, {"MESSAGES":[{"BODY":1,"TtL":120}]} was accepted through
// encoding/json's case-insensitive struct decoding.
func TestKeysMatchExactly(t *testing.T) {
	ts := startServer(t, nil)
	cases := []struct{ body, desc string }{
		{`{"MESSAGES":[{"BODY":1,"TtL":120}]}`, "No messages were found in the request body."},
		{`{"Messages":[{"body":1}]}`, "No messages were found in the request body."},
		{`{"messages":[{"BODY":1}]}`, `Missing "body" field.`},
		{`{"messages":[{"Body":1,"body":2}], "messages ":1}`, ""},
	}
	for _, tc := range cases {
		r := ts.do("POST", "/v2/queues/keys/messages", std(), tc.body)
		if tc.desc == "" {
			if r.status != 201 {
				t.Errorf("%s: %d %s", tc.body, r.status, r.body)
			}
			continue
		}
		if m := r.json(t); r.status != 400 || m["description"] != tc.desc {
			t.Errorf("%s: %d %s", tc.body, r.status, r.body)
		}
	}
	// An uppercase TTL is not a ttl: the message gets the default.
	ts.must(201, "POST", "/v2/queues/keys2/messages", std(), `{"messages":[{"body":1,"TTL":61}]}`)
	m := ts.must(200, "GET", "/v2/queues/keys2/messages?echo=true", std(), "").json(t)
	if ttl := m["messages"].([]any)[0].(map[string]any)["ttl"]; ttl != 3600.0 {
		t.Errorf("ttl %v, want the default 3600", ttl)
	}
	// Claim bodies: "TTL" is not "ttl" either.
	ts.must(201, "POST", "/v2/queues/keys2/claims", std(), `{"TTL":10}`)
}

// TestDuplicateKeysLastWins: as in Python's json (Zaqar), the last of
// repeated keys wins, on the fast and the slow path alike.
func TestDuplicateKeysLastWins(t *testing.T) {
	ts := startServer(t, nil)
	ts.must(201, "POST", "/v2/queues/dup/messages", std(), `{"messages":[{"body":1}],"messages":[{"body":"last","ttl":70,"ttl":61}]}`)
	m := ts.must(200, "GET", "/v2/queues/dup/messages?echo=true", std(), "").json(t)
	msgs := m["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["body"] != "last" || msgs[0].(map[string]any)["ttl"] != 61.0 {
		t.Errorf("messages %v", msgs)
	}
	ts.must(201, "PUT", "/v2/queues/dup2", std(), `{"a":1,"a":2}`)
	if meta := ts.must(200, "GET", "/v2/queues/dup2", std(), "").json(t); meta["a"] != 2.0 {
		t.Errorf("metadata %v", meta)
	}
}
