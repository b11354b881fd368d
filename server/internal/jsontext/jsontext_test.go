package jsontext

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/quick"
)

// TestAppendStringRoundTrips: whatever the string, encoding/json reads back
// what was written (invalid UTF-8 as U+FFFD, as encoding/json writes it).
func TestAppendStringRoundTrips(t *testing.T) {
	f := func(s string) bool {
		var back string
		if err := json.Unmarshal(AppendString(nil, s), &back); err != nil {
			t.Logf("%q: %v", s, err)
			return false
		}
		return back == strings.ToValidUTF8(s, "\uFFFD")
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 2000}); err != nil {
		t.Error(err)
	}
	for _, s := range []string{"", "\"\\", "\x00\x1f\x7f", "\u2028\u2029", "\xff", "é😀"} {
		if !f(s) {
			t.Errorf("%q does not round-trip", s)
		}
	}
}

// TestSkipValueAgreesWithEncodingJSON: SkipValue accepts exactly the
// documents encoding/json accepts, except the ones it refuses on purpose
// (lone surrogates, numbers beyond float64), and says which.
func TestSkipValueAgreesWithEncodingJSON(t *testing.T) {
	cases := []struct {
		doc  string
		want Fault
	}{
		{`{}`, OK}, {`[]`, OK}, {` {"a": [1, -2.5e3, true, false, null, "x\n\u00e9"]} `, OK},
		{`"\ud83d\ude00"`, OK}, {`0`, OK}, {`-0.0E+1`, OK},
		{`{"a":}`, Syntax}, {`[1,]`, Syntax}, {`01`, Syntax}, {`"\x"`, Syntax}, {`tru`, Syntax}, {`{"a" 1}`, Syntax},
		{`"\ud83d"`, Encoding}, {"\"\xff\"", Encoding},
		{`1e400`, Range}, {`[-1e999]`, Range},
	}
	for _, tc := range cases {
		b := []byte(tc.doc)
		i := SkipWS(b, 0)
		end, f := SkipValue(b, i, 0, 100)
		if f == OK && SkipWS(b, end) != len(b) {
			f = Syntax
		}
		if f != tc.want {
			t.Errorf("%s: fault %d, want %d", tc.doc, f, tc.want)
		}
		if tc.want == OK || tc.want == Syntax {
			if valid := json.Valid(b); valid != (tc.want == OK) {
				t.Errorf("%s: encoding/json says valid=%v", tc.doc, valid)
			}
		}
	}
}

func TestScanKey(t *testing.T) {
	key, next, ok := ScanKey([]byte(`"messages" : [`), 0)
	if !ok || string(key) != "messages" || next != 13 {
		t.Errorf("got %q %d %v", key, next, ok)
	}
	for _, doc := range []string{`"a\"b":1`, "\"a\x01\":1", `"a" 1`, `a:1`, `"open`} {
		if _, _, ok := ScanKey([]byte(doc), 0); ok {
			t.Errorf("%s: accepted", doc)
		}
	}
}
