package storage

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
