package storage

import (
	"bytes"
	"encoding/json"
)

// DecodeMetadata reads a stored metadata document keeping every number as
// the exact text that was stored (json.Number): a float64 round trip would
// turn 9007199254740993 into 9007199254740992 and make a value beyond the
// float64 range (1e400) an error on every later read.
func DecodeMetadata(b []byte, meta *Metadata) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(meta)
}

// Clone returns a deep copy of the metadata. Drivers store and hand out
// clones so that a caller editing a returned document (the API applies JSON
// patches in place) can never change what is stored.
func (m Metadata) Clone() Metadata {
	out := make(Metadata, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

// cloneValue copies the container types encoding/json produces; scalars are
// immutable and shared.
func cloneValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(t))
		for k, e := range t {
			c[k] = cloneValue(e)
		}
		return c
	case Metadata:
		return t.Clone()
	case []any:
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = cloneValue(e)
		}
		return c
	default:
		return v
	}
}
