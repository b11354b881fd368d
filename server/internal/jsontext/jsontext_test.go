package jsontext

import (
	"encoding/json"
	mrand "math/rand"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"testing/quick"
	"unicode/utf8"
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

// stringPieces are what generated JSON strings are made of: plain runs of
// several lengths (so specials fall at every offset of an eight-byte word),
// escapes valid and not, surrogate pairs and lone halves, control bytes,
// UTF-8 valid and not. None is U+FFFD, so a decoded U+FFFD can only come
// from something encoding/json replaced.
var stringPieces = []string{
	"a", "xy", "plain", "0123456789abcdef", "~ }{", `"`, `\`, `\\`, `\"`, `\/`, `\n`, `\x`,
	`\u00e9`, `\u00`, `\uD83D\uDE00`, `\ud83d`, `\ude00`, "\n", "\t", "\x1f", "\x7f",
	"é", "日本", "😀", "\xff", "\xc3", "\xed\xa0\x80", "\xc0\xaf",
}

// accepted is what skipString must accept: a document encoding/json reads
// as a string without replacing anything.
func accepted(doc []byte) bool {
	var s string
	if !json.Valid(doc) || json.Unmarshal(doc, &s) != nil || !utf8.Valid(doc) {
		return false
	}
	return !strings.ContainsRune(s, utf8.RuneError)
}

// TestSkipStringAgreesWithEncodingJSON: over generated strings, skipString
// ends at the first prefix encoding/json reads as a string unchanged, and
// refuses a document that has none.
func TestSkipStringAgreesWithEncodingJSON(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 11))
	for n := 0; n < 20000; n++ {
		doc := []byte{'"'}
		for k := r.IntN(24); k > 0; k-- {
			doc = append(doc, stringPieces[r.IntN(len(stringPieces))]...)
		}
		if r.IntN(4) > 0 {
			doc = append(doc, '"')
		}
		first := -1
		for end := 2; end <= len(doc); end++ {
			if doc[end-1] == '"' && accepted(doc[:end]) {
				first = end
				break
			}
		}
		end, f := skipString(doc, 0)
		switch {
		case first < 0 && f == OK:
			t.Fatalf("%q: accepted up to %d, encoding/json reads no prefix unchanged", doc, end)
		case first >= 0 && (f != OK || end != first):
			t.Fatalf("%q: end %d fault %d, want end %d", doc, end, f, first)
		}
	}
}

// TestPlainRunStopsAtTheFirstByteToLookAt: plainRun skips whole words up
// to the first byte skipString must look at, exactly.
func TestPlainRunStopsAtTheFirstByteToLookAt(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }
	f := func(b []byte) bool {
		first := 0
		for first < len(b) && plain(b[first]) {
			first++
		}
		return plainRun(b) == min(first, len(b)&^7)
	}
	gen := &quick.Config{MaxCount: 20000, Values: func(v []reflect.Value, r *mrand.Rand) {
		b := make([]byte, r.Intn(40))
		for i := range b {
			b[i] = byte(0x20 + r.Intn(0x5f))
			if r.Intn(16) == 0 {
				b[i] = byte(r.Intn(256))
			}
		}
		v[0] = reflect.ValueOf(b)
	}}
	if err := quick.Check(f, gen); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkSkipValueMessageBody(b *testing.B) {
	doc := []byte(`{"messages":[{"ttl":300,"body":{"payload":"` + strings.Repeat("x", 980) + `"}}]}`)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, f := SkipValue(doc, 0, 0, 32); f != OK {
			b.Fatal(f)
		}
	}
}
