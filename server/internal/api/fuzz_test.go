package api

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
)

// The fuzz targets check properties of every request parser: no panic, bad
// input always a 4xx, accepted input always within Zaqar's limits. Their
// seed corpora live in testdata/fuzz, so plain `go test` runs them in CI.

func FuzzPostMessages(f *testing.F) {
	f.Add([]byte(`{"messages":[{"ttl":300,"body":{"event":"x"}},{"body":[1,2,3],"delay":10}]}`))
	qs := queueSettings{maxPostSize: 4096, ttl: time.Hour}
	lim := messageLimits{maxTTL: 1209600 * time.Second}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, e := parsePostMessages(body, qs, lim)
		if e != nil {
			if e.status != 400 || e.title == "" || e.desc == "" {
				t.Fatalf("error %+v", e)
			}
			return
		}
		if len(msgs) == 0 || !json.Valid(body) {
			t.Fatalf("accepted %q as %d messages", body, len(msgs))
		}
		for _, m := range msgs {
			if !json.Valid(m.Body) || m.TTL < time.Minute || m.TTL > lim.maxTTL || m.Delay < 0 || m.Delay > 900*time.Second {
				t.Fatalf("accepted message %+v", m)
			}
		}
	})
}

func FuzzClaimBody(f *testing.F) {
	f.Add([]byte(`{"ttl":300,"grace":60}`), false)
	lim := claimLimits{defTTL: 300 * time.Second, defGrace: 60 * time.Second, maxTTL: 43200 * time.Second, maxGrace: 43200 * time.Second}
	f.Fuzz(func(t *testing.T, body []byte, update bool) {
		ttl, grace, e := parseClaimBody(body, lim, update)
		if e != nil {
			if e.status != 400 || e.desc == "" {
				t.Fatalf("error %+v", e)
			}
			return
		}
		if ttl < time.Minute || ttl > lim.maxTTL || grace < 0 || grace > lim.maxGrace {
			t.Fatalf("accepted ttl %v grace %v from %q", ttl, grace, body)
		}
	})
}

func FuzzQueueMetadata(f *testing.F) {
	f.Add([]byte(`{"description":"d","_default_message_ttl":3600,"_max_claim_count":2,"_dead_letter_queue":"dlq"}`))
	s := newTestServer(f, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		meta, e := s.parseQueueMetadata(body)
		if e != nil {
			if e.status != 400 || e.desc == "" {
				t.Fatalf("error %+v", e)
			}
			return
		}
		out, err := s.appendMetadata(nil, meta)
		if err != nil || !json.Valid(out) {
			t.Fatalf("metadata %q encodes to %q (%v)", body, out, err)
		}
		qs := s.settingsOf(meta)
		if qs.maxPostSize < 1 || qs.ttl < time.Minute || qs.delay < 0 || qs.delay > 900*time.Second {
			t.Fatalf("settings %+v from %q", qs, body)
		}
	})
}

func FuzzPatch(f *testing.F) {
	f.Add([]byte(`[{"op":"add","path":"/metadata/k","value":{"a":1}},{"op":"remove","path":"/metadata/k"}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ops, e := parsePatch(body)
		if e != nil {
			if e.status != 400 || e.desc == "" {
				t.Fatalf("error %+v", e)
			}
			return
		}
		meta := storage.Metadata{"existing": 1.0}
		if e := applyPatch(meta, ops); e != nil && e.status != 409 {
			t.Fatalf("apply error %+v", e)
		}
		if _, err := json.Marshal(meta); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzListQuery(f *testing.F) {
	f.Add("marker=5&limit=2&echo=true&include_claimed=1&include_delayed=false")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		lq, e := parseListMessages(q, 20)
		if e != nil {
			if e.status != 400 {
				t.Fatalf("error %+v", e)
			}
			return
		}
		if lq.limit < 1 || lq.limit > 20 {
			t.Fatalf("limit %d from %q", lq.limit, raw)
		}
		lq.link.setMarker("next")
		back, err := url.ParseQuery(strings.TrimPrefix(lq.link.String(), "?"))
		if err != nil || back.Get("marker") != "next" {
			t.Fatalf("link %q does not parse back: %v", lq.link.String(), err)
		}
	})
}

func FuzzHeaders(f *testing.F) {
	f.Add("3381AF92-2b9e-11e3-b191-71861300734c", "text/html, application/json;q=0.5", "Application/JSON; charset=utf-8")
	f.Fuzz(func(t *testing.T, clientID, accept, contentType string) {
		if id, ok := parseClientID(clientID); ok {
			if len(id) != 36 || !isCanonicalUUID(id) {
				t.Fatalf("%q -> %q", clientID, id)
			}
			if again, ok := parseClientID(id); !ok || again != id {
				t.Fatalf("canonical %q does not parse to itself", id)
			}
		}
		acceptsJSON(accept)
		if mt := mediaType(contentType); strings.ContainsRune(mt, ';') {
			t.Fatalf("media type %q keeps parameters", mt)
		}
	})
}

func FuzzAppendString(f *testing.F) {
	f.Add("caf\u00e9 \"quoted\" \\ \n \x00 \u2028")
	f.Fuzz(func(t *testing.T, s string) {
		var back string
		if err := json.Unmarshal(appendString(nil, s), &back); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		// encoding/json is the oracle: it too replaces each byte that is
		// not part of valid UTF-8 with U+FFFD (strings.ToValidUTF8 would
		// replace a run of them with one).
		std, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var want string
		if err := json.Unmarshal(std, &want); err != nil {
			t.Fatal(err)
		}
		if back != want {
			t.Fatalf("%q round-trips to %q, encoding/json to %q", s, back, want)
		}
	})
}

// FuzzRequest sends arbitrary method, path, headers and body through the
// whole server: the answer is never a 5xx and always JSON when it has a body.
func FuzzRequest(f *testing.F) {
	f.Add("POST", "/v2/queues/q1/messages", "", "application/json", []byte(`{"messages":[{"body":1}]}`))
	s := newTestServer(f, nil)
	f.Fuzz(func(t *testing.T, method, path, query, contentType string, body []byte) {
		if methodIndex(method) < 0 || !strings.HasPrefix(path, "/") {
			return
		}
		u := &url.URL{Path: path, RawQuery: query}
		r := httptest.NewRequest("GET", "/", bytes.NewReader(body))
		r.Method = method
		r.URL = u
		r.RequestURI = u.RequestURI()
		r.Header.Set("Client-ID", testClient)
		r.Header.Set("X-Project-ID", "fuzz")
		r.Header.Set("Content-Type", contentType)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s %s?%s %q -> %d %s", method, path, query, body, w.Code, w.Body.String())
		}
		if w.Body.Len() > 0 && method != http.MethodHead && !json.Valid(w.Body.Bytes()) {
			t.Fatalf("%s %s -> %d non-JSON %q", method, path, w.Code, w.Body.String())
		}
	})
}

// FuzzPostFastPath checks the one-pass post decoder against the strict
// checker and the encoding/json path: whatever it accepts, they accept with
// the same fields.
func FuzzPostFastPath(f *testing.F) {
	f.Add([]byte(`{"messages":[{"ttl":300,"body":{"a":[1,2.5e3,"x\u00e9"]},"delay":0}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := decodePostFast(body)
		if !ok {
			return
		}
		if e := checkJSON(body); e != nil {
			t.Fatalf("fast path accepted %q, the checker refuses it: %v", body, e)
		}
		slow, e := decodePostSlow(body)
		if e != nil {
			t.Fatalf("fast path accepted %q, the slow path: %v", body, e)
		}
		if len(slow) != len(fast) {
			t.Fatalf("fast path read %d messages from %q", len(fast), body)
		}
		for i, m := range slow {
			f := fast[i]
			if !bytes.Equal(m.Body, f.Body) || !bytes.Equal(m.TTL, f.TTL) || !bytes.Equal(m.Delay, f.Delay) {
				t.Fatalf("message %d of %q: fast %+v, encoding/json %+v", i, body, f, m)
			}
		}
	})
}

// FuzzClaimFastPath checks the one-pass claim reader against encoding/json:
// whatever it accepts, encoding/json reads with the same fields.
func FuzzClaimFastPath(f *testing.F) {
	f.Add([]byte(`{"ttl":300,"grace":60}`))
	f.Add([]byte(` { "grace" : 1 , "x":{"ttl":[1,{"grace":2}]}, "ttl":"3", "ttl" : 4e2 } `))
	f.Fuzz(func(t *testing.T, body []byte) {
		if checkJSON(body) != nil {
			return
		}
		claimFastAgrees(t, body)
	})
}

func claimFastAgrees(t *testing.T, body []byte) {
	t.Helper()
	ttl, grace, ok := claimFieldsFast(body)
	if !ok {
		return
	}
	sTTL, sGrace, e := claimFieldsSlow(body)
	if e != nil {
		t.Fatalf("fast path read %q, encoding/json: %v", body, e)
	}
	if !bytes.Equal(ttl, sTTL) || (ttl == nil) != (sTTL == nil) || !bytes.Equal(grace, sGrace) || (grace == nil) != (sGrace == nil) {
		t.Fatalf("%q: fast ttl %q grace %q, encoding/json %q %q", body, ttl, grace, sTTL, sGrace)
	}
}

// TestClaimFastPathOnGeneratedBodies: over generated objects (repeated,
// escaped and nested keys, values of every kind, odd spacing), the one-pass
// claim reader agrees with encoding/json, and takes every body whose keys
// have no escapes.
func TestClaimFastPathOnGeneratedBodies(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	keys := []string{`"ttl"`, `"grace"`, `"TTL"`, `"x"`, `"tt\u006c"`, `"grace "`, `""`}
	values := []string{`300`, `60`, `-1`, `4e2`, `1.5`, `"300"`, `null`, `true`, `[]`, `[1,{"ttl":9}]`, `{"grace":2}`, `{}`}
	ws := []string{"", " ", "\n\t", "  "}
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	taken := 0
	for n := 0; n < 5000; n++ {
		var b strings.Builder
		b.WriteString(pick(ws) + "{" + pick(ws))
		escaped := false
		for k := r.IntN(5); k > 0; k-- {
			key := pick(keys)
			escaped = escaped || strings.Contains(key, `\`)
			b.WriteString(key + pick(ws) + ":" + pick(ws) + pick(values) + pick(ws))
			if k > 1 {
				b.WriteString("," + pick(ws))
			}
		}
		b.WriteString("}" + pick(ws))
		body := []byte(b.String())
		if e := checkJSON(body); e != nil {
			t.Fatalf("generated %q: %v", body, e)
		}
		claimFastAgrees(t, body)
		if _, _, ok := claimFieldsFast(body); ok == escaped {
			t.Fatalf("%q: fast path took it: %v", body, ok)
		}
		if !escaped {
			taken++
		}
	}
	t.Logf("%d of 5000 bodies read by the fast path", taken)
}
