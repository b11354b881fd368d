package result

import (
	"fmt"
	"sort"
	"strings"

	"sluice.dev/bench/internal/metrics"
)

// Reasons renders failures by reason for people, reasons in sorted order,
// each with what its responses said in Retry-After:
// "http_503: 120 (Retry-After on 120: 2 s), timeout: 3".
func Reasons(errs map[string]int64, retry map[string]metrics.RetryAfter) string {
	keys := make([]string, 0, len(errs))
	for k := range errs {
		keys = append(keys, k)
	}
	for k := range retry {
		if _, ok := errs[k]; !ok {
			keys = append(keys, k) // cannot happen in one run; say it if it does
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		s := fmt.Sprintf("%s: %d", k, errs[k])
		if ra, ok := retry[k]; ok && ra.Responses > 0 {
			s += " (" + RetryText(ra) + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// RetryText says what one reason's Retry-After headers asked for:
// "Retry-After on 120: 2 s", "Retry-After on 7: 1-30 s, 2 unreadable".
func RetryText(ra metrics.RetryAfter) string {
	s := fmt.Sprintf("Retry-After on %d", ra.Responses)
	switch read := ra.Responses - ra.Unreadable; {
	case read > 0 && ra.Min == ra.Max:
		s += fmt.Sprintf(": %d s", ra.Min)
	case read > 0:
		s += fmt.Sprintf(": %d-%d s", ra.Min, ra.Max)
	}
	if ra.Unreadable > 0 {
		sep := ", "
		if ra.Responses == ra.Unreadable {
			sep = ": "
		}
		s += fmt.Sprintf("%s%d unreadable", sep, ra.Unreadable)
	}
	return s
}
