package api

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestCheckJSON(t *testing.T) {
	cases := []struct {
		doc  string
		want *apiError
	}{
		{`{}`, nil}, {`[]`, nil}, {` {"a":[1,-0,2.5e-3,1E+2,"\u00e9\ud83d\ude00"]} `, nil},
		{`{"n":123456789012345678901234567890}`, nil}, {`[1e308,-1.7976931348623157e308,1e-400]`, nil},
		{`{"a":1,"a":2}`, nil},
		{`1`, errUnparsable}, {`"s"`, errUnparsable}, {`null`, errUnparsable}, {``, errUnparsable},
		{`{"a":1} x`, errUnparsable}, {`{"a":}`, errUnparsable},
		{"{\"a\":\"\xff\"}", errUnparsable}, {`{"a":"\ud800"}`, errUnparsable}, {`{"a":"\udc00\ud800"}`, errUnparsable},
		{`{"\ud800\u0041":1}`, errUnparsable},
		{`[1e400]`, errNumberRange}, {`[-1e309]`, errNumberRange}, {`{"a":{"b":[1E999]}}`, errNumberRange},
	}
	for _, tc := range cases {
		if got := checkJSON([]byte(tc.doc)); got != tc.want {
			t.Errorf("checkJSON(%q) = %v, want %v", tc.doc, got, tc.want)
		}
	}
	deep := bytes.Repeat([]byte("["), maxCheckDepth+2)
	if checkJSON(deep) != errUnparsable {
		t.Error("nesting beyond the bound accepted")
	}
}

// FuzzCheckJSON holds the checker to encoding/json: what it accepts is
// valid JSON and valid UTF-8, and valid UTF-8 JSON objects and arrays it
// refuses are refused for a lone surrogate or a number out of range only.
func FuzzCheckJSON(f *testing.F) {
	f.Add([]byte(`{"a":["\ud83d\ude00",1e3,{"b":null}]}`))
	f.Add([]byte(`["\ud800",1e400]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e := checkJSON(b)
		valid := json.Valid(b) && utf8.Valid(b)
		if e == nil && !valid {
			t.Fatalf("accepted %q", b)
		}
		i := skipWS(b, 0)
		if !valid || i >= len(b) || b[i] != '{' && b[i] != '[' || e == nil || e == errNumberRange {
			return
		}
		// Refused as unparsable although valid: it must hold a lone
		// surrogate, which encoding/json decodes to U+FFFD.
		var v any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		out, _ := json.Marshal(v)
		if !bytes.Contains(out, []byte("\ufffd")) {
			t.Fatalf("refused %q (decodes to %s)", b, out)
		}
	})
}
