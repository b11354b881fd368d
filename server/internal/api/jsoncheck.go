package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
)

// maxCheckDepth is how deeply request documents may nest; it is the bound
// encoding/json itself applies.
const maxCheckDepth = 10000

var errNumberRange = badBody("JSON contains a number that is too large.")

// errUnknownKey names the key a body of what (a pool, a flavor) does not
// take, and the keys it does.
func errUnknownKey(key, what string, t reflect.Type) *apiError {
	known := make([]string, t.NumField())
	for i := range known {
		known[i] = jsonName(t.Field(i))
	}
	list := strings.Join(known, ", ")
	if n := len(known); n > 1 {
		list = strings.Join(known[:n-1], ", ") + " and " + known[n-1]
	}
	return badBody(`Unknown field "` + key + `"; ` + what + ` takes ` + list + `.`)
}

// jsonName is the key a struct field is read from.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// checkJSON is the one gate every request document passes before it is
// decoded or stored. Zaqar (Python's json) refuses bytes that are not
// UTF-8 and documents that are neither an object nor an array; sluice also
// refuses what it could not hand back unchanged: lone surrogate escapes and
// numbers beyond the float64 range. Duplicate keys are allowed: the last
// one wins, as in Python and in encoding/json.
func checkJSON(body []byte) *apiError {
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' && body[i] != '[' {
		return errUnparsable
	}
	end, f := skipValue(body, i, 0, maxCheckDepth)
	if f == jsonOK && skipWS(body, end) != len(body) {
		f = jsonSyntax
	}
	switch f {
	case jsonOK:
		return nil
	case jsonRange:
		return errNumberRange
	}
	return errUnparsable
}

// decodePostSlow decodes a message post that the fast path did not take,
// matching keys exactly as Zaqar does (encoding/json's struct decoding
// would also accept "MESSAGES" or "Body"). body has passed checkJSON.
func decodePostSlow(body []byte) ([]postedMessage, *apiError) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, decodeErr(err)
	}
	raw, has := doc["messages"]
	if !has {
		return nil, errNoMessages
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil || list == nil {
		return nil, errDocType // Zaqar: "messages" must be a JSON array
	}
	out := make([]postedMessage, len(list))
	for i, item := range list {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(item, &m); err != nil {
			// Refused when the checks reach it: Zaqar checks message by
			// message, so an earlier message's fault is the one reported.
			out[i].notObject = true
			continue
		}
		// Unknown keys are ignored, as Zaqar's sanitize drops them.
		out[i] = postedMessage{TTL: m["ttl"], Delay: m["delay"], Body: m["body"]}
	}
	return out, nil
}

// checkKeys refuses top-level keys of a JSON object that are not exactly
// one of the json tags of the struct v points to: encoding/json matches
// struct fields case-insensitively, Zaqar matches keys exactly. what names
// the body for the error.
func checkKeys(body []byte, what string, v any) *apiError {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil // not an object: the struct decode words the error
	}
	t := reflect.TypeOf(v).Elem()
	for key := range doc {
		if _, ok := jsonField(t, key); !ok {
			return errUnknownKey(key, what, t)
		}
	}
	return nil
}

// jsonField is the field of struct type t read from key.
func jsonField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); jsonName(f) == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// fieldKind is how a type error names the JSON type of v's field key: the
// decoder reports an array item's type under the array's key.
func fieldKind(v any, key string) string {
	f, ok := jsonField(reflect.TypeOf(v).Elem(), key)
	if !ok {
		return "object"
	}
	ft := f.Type
	if ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
	}
	return jsonKind(ft.String())
}

// isNull reports whether a raw JSON value is the literal null.
func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }
