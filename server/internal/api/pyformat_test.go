package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPyRepr: the reprs are what python3 prints for each string.
func TestPyRepr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "''"},
		{"plain", "'plain'"},
		{"it's", "\"it's\""},
		{"say \"hi\"", "'say \"hi\"'"},
		{"both ' and \"", "'both \\' and \"'"},
		{"back\\slash", "'back\\\\slash'"},
		{"tab\tnl\n", "'tab\\tnl\\n'"},
		{"\u0001\u007f", "'\\x01\\x7f'"},
		{"caf\u00e9", "'caf\u00e9'"},
		{"\u2028", "'\\u2028'"},
		{"\U0001F600", "'\U0001F600'"},
		{" ", "' '"},
	} {
		if got := pyRepr(tc.in); got != tc.want {
			t.Errorf("pyRepr(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if got := pyList([]string{" a", "b"}); got != "[' a', 'b']" {
		t.Errorf("pyList: %s", got)
	}
	var v any
	d := json.NewDecoder(strings.NewReader(`[1, 2.5, true, null, "x", {"b": [], "a": {}}]`))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if got := pyValue(v); got != "[1, 2.5, True, None, 'x', {'a': {}, 'b': []}]" {
		t.Errorf("pyValue: %s", got)
	}
}
