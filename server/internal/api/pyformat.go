package api

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Zaqar words some errors by formatting Python values into them (a list of
// ids, a set of bad names); these write the same text, so a client's error
// reads alike from either server.

// pyRepr is Python's repr of a str: single quotes unless the text holds a
// single quote and no double one, backslash escapes for the quote, the
// backslash and unprintable characters.
func pyRepr(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == unicode.ReplacementChar || !unicode.IsPrint(r) && r != ' ':
			switch {
			case r < 0x100:
				b.WriteString(`\x` + pad(strconv.FormatInt(int64(r), 16), 2))
			case r < 0x10000:
				b.WriteString(`\u` + pad(strconv.FormatInt(int64(r), 16), 4))
			default:
				b.WriteString(`\U` + pad(strconv.FormatInt(int64(r), 16), 8))
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

func pad(hex string, n int) string { return strings.Repeat("0", n-len(hex)) + hex }

// pyList is Python's repr of a list of str.
func pyList(items []string) string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = pyRepr(s)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// pyValue is Python's repr of a decoded JSON value (json.Number for
// numbers): what Zaqar prints when it names a value it refuses.
func pyValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		return pyRepr(x)
	case json.Number:
		return x.String()
	case []any:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = pyValue(e)
		}
		return "[" + strings.Join(out, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([]string, len(keys))
		for i, k := range keys {
			out[i] = pyRepr(k) + ": " + pyValue(x[k])
		}
		return "{" + strings.Join(out, ", ") + "}"
	}
	return jsonText(v)
}

// pySet writes values already in Python's repr as Python prints a set,
// sorted so the message is the same every time (Python's own order
// depends on the process' hash seed).
func pySet(reprs []string) string {
	sort.Strings(reprs)
	return "{" + strings.Join(reprs, ", ") + "}"
}
