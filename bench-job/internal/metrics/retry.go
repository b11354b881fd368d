package metrics

// RetryAfter is what the failed responses of one reason (zaqar.Reason:
// "http_503", "http_507", ...) said about trying again: how many carried a
// Retry-After header, and the shortest and longest delay they asked for,
// in whole seconds. Unreadable counts headers that were neither
// delay-seconds nor an HTTP-date; they are among Responses, not in Min and
// Max. The fields are single words so that the summary, the termination
// log and a Benchmark's status (camelCase) all spell them alike.
type RetryAfter struct {
	Responses  int64 `json:"responses"`
	Min        int64 `json:"min"`
	Max        int64 `json:"max"`
	Unreadable int64 `json:"unreadable,omitempty"`
}

// read is how many of the responses gave a delay that could be read.
func (r RetryAfter) read() int64 { return r.Responses - r.Unreadable }

// Add records one response whose header asked for secs seconds (secs < 0:
// the header could not be read).
func (r *RetryAfter) Add(secs int64) {
	if secs < 0 {
		r.Responses++
		r.Unreadable++
		return
	}
	r.Merge(RetryAfter{Responses: 1, Min: secs, Max: secs})
}

// Merge folds o into r: counts add, the delays' range widens.
func (r *RetryAfter) Merge(o RetryAfter) {
	switch {
	case o.read() <= 0:
	case r.read() <= 0:
		r.Min, r.Max = o.Min, o.Max
	default:
		r.Min, r.Max = min(r.Min, o.Min), max(r.Max, o.Max)
	}
	r.Responses += o.Responses
	r.Unreadable += o.Unreadable
}

// MergeRetries folds every reason of src into dst, allocating dst when
// there is something to fold and it is nil.
func MergeRetries(dst, src map[string]RetryAfter) map[string]RetryAfter {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]RetryAfter, len(src))
	}
	for k, v := range src {
		d := dst[k]
		d.Merge(v)
		dst[k] = d
	}
	return dst
}
