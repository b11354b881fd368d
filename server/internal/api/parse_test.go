package api

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParseClientID(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"3381af92-2b9e-11e3-b191-71861300734c", "3381af92-2b9e-11e3-b191-71861300734c", true},
		{"3381AF922B9E11E3B19171861300734C", "3381af92-2b9e-11e3-b191-71861300734c", true},
		{"{3381af92-2b9e-11e3-b191-71861300734c}", "3381af92-2b9e-11e3-b191-71861300734c", true},
		{"urn:uuid:3381af92-2b9e-11e3-b191-71861300734c", "3381af92-2b9e-11e3-b191-71861300734c", true},
		{"3381af92-2b9e11e3b191-71861300734c", "3381af92-2b9e-11e3-b191-71861300734c", true},
		{"not-a-uuid", "", false},
		{"", "", false},
		{"3381af922b9e11e3b19171861300734", "", false},
		{"3381af922b9e11e3b19171861300734c0", "", false},
		{"3381af92-2b9e-11e3-b191-71861300734g", "", false},
		{strings.Repeat("-", 200), "", false},
	}
	for _, tc := range cases {
		got, ok := parseClientID(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseClientID(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestAcceptsJSON(t *testing.T) {
	cases := map[string]bool{
		"": true, "*/*": true, "application/json": true, "application/*": true,
		"text/html, */*;q=0.1": true, "APPLICATION/JSON; charset=utf-8": true,
		"text/html": false, "application/json;q=0": false, "application/json;q=0.0, text/plain": false,
		"application/xml": false, "*/*;q=0.000": false,
	}
	for in, want := range cases {
		if got := acceptsJSON(in); got != want {
			t.Errorf("acceptsJSON(%q) = %v", in, got)
		}
	}
}

func TestParsePostMessages(t *testing.T) {
	qs := queueSettings{maxPostSize: 1000, ttl: time.Hour, delay: 5 * time.Second}
	lim := messageLimits{maxTTL: 1209600 * time.Second}
	ok := []struct {
		name, body string
		ttls       []time.Duration
		delays     []time.Duration
		bodies     []string
	}{
		{"defaults", `{"messages":[{"body":1}]}`, []time.Duration{time.Hour}, []time.Duration{5 * time.Second}, []string{"1"}},
		{"explicit", `{"messages":[{"ttl":60,"delay":0,"body":{"a":[1,"x"]}},{"ttl":1209600,"delay":900,"body":"s"}]}`,
			[]time.Duration{time.Minute, 1209600 * time.Second}, []time.Duration{0, 900 * time.Second}, []string{`{"a":[1,"x"]}`, `"s"`}},
		{"null body", `{"messages":[{"body":null}]}`, []time.Duration{time.Hour}, []time.Duration{5 * time.Second}, []string{"null"}},
		{"duplicate keys: the last wins", `{"messages":[{"body":1,"body":2,"ttl":61,"ttl":62}]}`, []time.Duration{62 * time.Second}, []time.Duration{5 * time.Second}, []string{"2"}},
		{"extra fields ignored", `{"x":1,"messages":[{"body":true,"other":2}]}`, []time.Duration{time.Hour}, []time.Duration{5 * time.Second}, []string{"true"}},
	}
	for _, tc := range ok {
		msgs, e := parsePostMessages([]byte(tc.body), qs, lim)
		if e != nil {
			t.Errorf("%s: %v", tc.name, e)
			continue
		}
		for i, m := range msgs {
			if m.TTL != tc.ttls[i] || m.Delay != tc.delays[i] || string(m.Body) != tc.bodies[i] {
				t.Errorf("%s[%d]: %+v", tc.name, i, m)
			}
		}
	}
	bad := []struct{ name, body, desc string }{
		{"too large", `{"messages":[{"body":"` + strings.Repeat("x", 1000) + `"}]}`, "Message collection size is too large. Max size 1000"},
		{"empty", ``, "Request body could not be parsed."},
		{"garbage", `nope`, "Request body could not be parsed."},
		{"trailing garbage", `{"messages":[{"body":1}]} x`, "Request body could not be parsed."},
		{"array", `[{"body":1}]`, "No messages were found in the request body."},
		{"no messages", `{}`, "No messages were found in the request body."},
		{"messages null", `{"messages":null}`, "Document type not supported."},
		{"ttl null", `{"messages":[{"ttl":null,"body":1}]}`, `The value of the "ttl" field must be a int.`},
		{"delay null", `{"messages":[{"delay":null,"body":1}]}`, `The value of the "delay" field must be a int.`},
		{"scalar document", `5`, "Request body could not be parsed."},
		{"messages object", `{"messages":{}}`, "Document type not supported."},
		{"message not object", `{"messages":[1]}`, "Document type not supported."},
		{"empty list", `{"messages":[]}`, "No messages to enqueu."},
		{"missing body", `{"messages":[{"ttl":60}]}`, `Missing "body" field.`},
		{"ttl string", `{"messages":[{"ttl":"60","body":1}]}`, `The value of the "ttl" field must be a int.`},
		{"ttl bool", `{"messages":[{"ttl":true,"body":1}]}`, `The value of the "ttl" field must be a int.`},
		{"ttl exponent", `{"messages":[{"ttl":6e1,"body":1}]}`, `The value of the "ttl" field must be a int.`},
		{"ttl huge", `{"messages":[{"ttl":99999999999999999999999,"body":1}]}`, `The value of the "ttl" field must be a int.`},
		{"ttl small", `{"messages":[{"ttl":59,"body":1}]}`, "The TTL for a message may not exceed 1209600 seconds, and must be at least 60 seconds long."},
		{"delay negative", `{"messages":[{"delay":-1,"body":1}]}`, "The Delay TTL for a message may not exceed 900 seconds,and must be at least 0 seconds long."},
		{"second bad", `{"messages":[{"body":1},{"ttl":5,"body":2}]}`, "The TTL for a message may not exceed 1209600 seconds, and must be at least 60 seconds long."},
		// Zaqar checks message by message: an earlier message's fault is
		// reported before a later one's, and in a message the ttl's type
		// before the body.
		{"earlier fault first", `{"messages":[{"ttl":60},"x"]}`, `Missing "body" field.`},
		{"earlier type first", `{"messages":[{"body":1},{"ttl":"x"},1]}`, `The value of the "ttl" field must be a int.`},
		{"ttl before body", `{"messages":[{"ttl":"x"}]}`, `The value of the "ttl" field must be a int.`},
		{"types before ranges", `{"messages":[{"ttl":5,"body":1},[]]}`, "Document type not supported."},
	}
	for _, tc := range bad {
		msgs, e := parsePostMessages([]byte(tc.body), qs, lim)
		if e == nil {
			t.Errorf("%s: accepted %v", tc.name, msgs)
			continue
		}
		if e.status != 400 || e.desc != tc.desc {
			t.Errorf("%s: %d %q, want %q", tc.name, e.status, e.desc, tc.desc)
		}
	}
}

func TestParseClaimBody(t *testing.T) {
	lim := claimLimits{defTTL: 300 * time.Second, defGrace: 60 * time.Second, maxTTL: 43200 * time.Second, maxGrace: 43200 * time.Second}
	cases := []struct {
		name, body  string
		update      bool
		ttl, grace  time.Duration
		errContains string
	}{
		{"empty create", "", false, 300 * time.Second, 60 * time.Second, ""},
		{"ttl only", `{"ttl":120}`, false, 120 * time.Second, 60 * time.Second, ""},
		{"both", `{"ttl":43200,"grace":43200}`, false, 43200 * time.Second, 43200 * time.Second, ""},
		{"update short grace", `{"ttl":120,"grace":30}`, true, 120 * time.Second, 30 * time.Second, ""},
		{"update without ttl", `{"grace":30}`, true, 300 * time.Second, 30 * time.Second, ""},
		{"update empty object", `{}`, true, 300 * time.Second, 60 * time.Second, ""},
		{"update empty", ``, true, 0, 0, "could not be parsed"},
		{"ttl small", `{"ttl":59}`, false, 0, 0, "TTL for a claim"},
		{"ttl large", `{"ttl":43201}`, false, 0, 0, "TTL for a claim"},
		{"grace small", `{"ttl":60,"grace":59}`, false, 0, 0, "grace for a claim"},
		{"ttl float", `{"ttl":60.0}`, false, 0, 0, `"ttl" field must be a int`},
		{"grace string", `{"grace":"60"}`, false, 0, 0, `"grace" field must be a int`},
		{"array", `[]`, false, 0, 0, "Document type"},
		{"null", `null`, false, 0, 0, "could not be parsed"},
		{"broken", `{"ttl":`, false, 0, 0, "could not be parsed"},
	}
	for _, tc := range cases {
		ttl, grace, e := parseClaimBody([]byte(tc.body), lim, tc.update)
		if tc.errContains != "" {
			if e == nil || !strings.Contains(e.desc, tc.errContains) {
				t.Errorf("%s: %v, want error containing %q", tc.name, e, tc.errContains)
			}
			continue
		}
		if e != nil || ttl != tc.ttl || grace != tc.grace {
			t.Errorf("%s: %v %v %v", tc.name, ttl, grace, e)
		}
	}
}

func TestParsePatchAndApply(t *testing.T) {
	ops, e := parsePatch([]byte(`[{"op":"add","path":"/metadata/a~1b","value":1},{"op":"replace","path":"/metadata/_max_claim_count","value":3},{"op":"remove","path":"/metadata/gone"}]`))
	if e != nil {
		t.Fatal(e)
	}
	meta := map[string]any{"gone": true}
	if e := applyPatch(meta, ops); e != nil {
		t.Fatal(e)
	}
	if b, _ := json.Marshal(meta); string(b) != `{"_max_claim_count":3,"a/b":1}` {
		t.Errorf("patched %s", b)
	}
	for _, body := range []string{`[{"op":"add","path":"/metadata/x"}]`, `[{"op":"add","path":"/metadata/","value":1}]`,
		`[{"op":"add","path":"/metadata/a/b","value":1}]`, `[{"path":"/metadata/x"}]`, `[1]`, `{}`, `[{"op":"add","value":1}]`} {
		if _, e := parsePatch([]byte(body)); e == nil || e.status != 400 {
			t.Errorf("parsePatch(%s) = %v", body, e)
		}
	}
}

func TestQueryParsing(t *testing.T) {
	q, _ := url.ParseQuery("marker=m1&limit=5&echo=yes&include_claimed=0")
	lq, e := parseListMessages(q, 20)
	if e != nil || lq.marker != "m1" || lq.limit != 5 || !lq.echo || lq.claimed || lq.delayedGiven {
		t.Fatalf("%+v %v", lq, e)
	}
	lq.link.setMarker("m2")
	if got := lq.link.String(); got != "?marker=m2&limit=5&echo=true&include_claimed=false" {
		t.Errorf("link %q", got)
	}
	// falcon's spellings only: case matters.
	for _, raw := range []string{"limit=0", "limit=21", "limit=-1", "limit=x", "echo=2", "include_delayed=maybe",
		"echo=FALSE", "echo=TRUE", "include_claimed=Yes", "echo= true", "limit=99999999999999999999"} {
		q, _ := url.ParseQuery(raw)
		if _, e := parseListMessages(q, 20); e == nil || e.status != 400 {
			t.Errorf("%s accepted", raw)
		}
	}
	q, _ = url.ParseQuery("limit=99&echo=x")
	if _, e := parseListMessages(q, 20); e == nil || e.title != "Invalid parameter" {
		t.Errorf("limit=99&echo=x: %+v, want the boolean reported first, as Zaqar does", e)
	}
	for _, raw := range []string{"echo=True", "echo=t", "echo=on", "echo=y", "echo=False", "echo=off", "echo=n"} {
		q, _ := url.ParseQuery(raw)
		if _, e := parseListMessages(q, 20); e != nil {
			t.Errorf("%s refused: %v", raw, e.desc)
		}
	}
	// As falcon splits them (Zaqar's parser): blank items dropped, the
	// others kept as sent, spaces included, so " c" names no message.
	q, _ = url.ParseQuery("ids=a,,b, c,&ids=d&ids=")
	if got := strings.Join(queryList(q, "ids"), "|"); got != "a|b| c|d" {
		t.Errorf("ids %q", got)
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uo\te`, "tab\tnl\n\x01", "caf\u00e9 \u2028", "bad\xffutf8", "<&>"} {
		var back string
		if err := json.Unmarshal(appendString(nil, s), &back); err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if back != want {
			t.Errorf("%q round-trips to %q", s, back)
		}
	}
}

func TestValidateMetadata(t *testing.T) {
	s := newTestServer(t, nil)
	cases := map[string]string{
		`{"_default_message_ttl":60}`:                     "",
		`{"_default_message_ttl":null,"x":[1]}`:           "",
		`{"_default_message_ttl":"60"}`:                   "_default_message_ttl must be integer.",
		`{"_default_message_ttl":60.5}`:                   "_default_message_ttl must be integer.",
		`{"_max_messages_post_size":262145}`:              "_max_messages_post_size can not exceed 262144, and must be at least greater than 0.",
		`{"_max_claim_count":"3"}`:                        "_max_claim_count must be integer.",
		`{"_dead_letter_queue_messages_ttl":1}`:           "The TTL for a message may not exceed 1209600 seconds, and must be at least 60 seconds long.",
		`{"_default_message_delay":901}`:                  "The TTL can not exceed 900 seconds, and must be at least 0 seconds long.",
		`{"_dead_letter_queue":"bad name"}`:               "_dead_letter_queue must be a valid queue name.",
		`{"_enable_encrypt_messages":"yes"}`:              "_enable_encrypt_messages must be boolean.",
		`{"_max_claim_count":2,"_dead_letter_queue":"d"}`: "",
	}
	for body, want := range cases {
		v, e := parseJSONDocument([]byte(body))
		if e != nil {
			t.Fatal(body, e)
		}
		if got := s.validateMetadata(v.(map[string]any)); got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}
