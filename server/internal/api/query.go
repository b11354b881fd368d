package api

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Query parameters are read as falcon reads them for Zaqar: integers and
// booleans that do not parse are 400 "Invalid parameter"; an empty value
// counts as absent.

func invalidParam(name, why string) *apiError {
	return &apiError{http.StatusBadRequest, "Invalid parameter",
		`The "` + name + `" parameter is invalid. ` + why}
}

// queryInt returns the parameter, whether it was given, or an error.
func queryInt(q url.Values, name string) (int, bool, *apiError) {
	v := q.Get(name)
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if errors.Is(err, strconv.ErrRange) {
		// An integer all the same (Python's are unbounded): Atoi gives the
		// nearest int, which the caller's range check then refuses.
		return n, true, nil
	}
	if err != nil {
		return 0, false, invalidParam(name, "The value must be an integer.")
	}
	return n, true, nil
}

// queryBool accepts exactly falcon's spellings of true and false (its
// TRUE_STRINGS and FALSE_STRINGS): case matters, so "FALSE" is refused as
// Zaqar refuses it.
func queryBool(q url.Values, name string) (val, given bool, e *apiError) {
	switch v := q.Get(name); v {
	case "":
		return false, false, nil
	case "true", "True", "t", "yes", "y", "1", "on":
		return true, true, nil
	case "false", "False", "f", "no", "n", "0", "off":
		return false, true, nil
	}
	return false, false, invalidParam(name, `The value of the parameter must be "true" or "false".`)
}

// queryGiven reports whether name has a value that is not blank: falcon,
// as Zaqar sets it up, drops blank values (?ids= is no ids parameter at
// all, so the messages are listed) but keeps the rest (?ids=, names no id:
// 400).
func queryGiven(q url.Values, name string) bool {
	for _, v := range q[name] {
		if v != "" {
			return true
		}
	}
	return false
}

// queryList reads a list parameter in both spellings clients use:
// comma-separated (?ids=a,b) and repeated (?ids=a&ids=b, python-zaqarclient).
// Empty items are dropped and the rest kept as sent, spaces and all, as
// falcon splits them for Zaqar.
func queryList(q url.Values, name string) []string {
	var out []string
	for _, v := range q[name] {
		for _, p := range strings.Split(v, ",") {
			if p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func limitErr(max int) *apiError {
	return badRequest("Limit must be at least 1 and may not be greater than " + strconv.Itoa(max) + ".")
}

// catalogLimitErr is limitErr as Zaqar words it for listing queues,
// pools and flavors.
func catalogLimitErr(max int) *apiError {
	return badRequest("Limit must be at least 1 and no greater than " + strconv.Itoa(max) + ".")
}

// linkQuery rebuilds a next-page query string in Zaqar's parameter order:
// the request's recognised parameters, with marker replaced or appended.
type linkQuery struct {
	keys, vals []string
}

func (l *linkQuery) add(k, v string) {
	l.keys = append(l.keys, k)
	l.vals = append(l.vals, v)
}

func (l *linkQuery) setMarker(m string) {
	for i, k := range l.keys {
		if k == "marker" {
			l.vals[i] = m
			return
		}
	}
	l.add("marker", m)
}

func (l *linkQuery) String() string {
	var b strings.Builder
	for i, k := range l.keys {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(l.vals[i]))
	}
	return b.String()
}

func boolText(v bool) string {
	if v {
		return "true"
	}
	return "false"
}

// listMessagesQuery is a parsed GET .../messages (without ids).
type listMessagesQuery struct {
	marker                 string
	limit                  int
	echo, claimed, delayed bool
	delayedGiven           bool
	link                   linkQuery
}

// parseListMessages reads marker, limit, echo, include_claimed and
// include_delayed; maxLimit is max-messages-per-page.
func parseListMessages(q url.Values, maxLimit int) (listMessagesQuery, *apiError) {
	var lq listMessagesQuery
	lq.limit = 10
	if m := q.Get("marker"); m != "" {
		lq.marker = m
		lq.link.add("marker", m)
	}
	n, limitGiven, e := queryInt(q, "limit")
	if e != nil {
		return lq, e
	}
	if limitGiven {
		lq.limit = n
		lq.link.add("limit", strconv.Itoa(n))
	}
	for _, p := range []struct {
		name string
		dst  *bool
	}{{"echo", &lq.echo}, {"include_claimed", &lq.claimed}, {"include_delayed", &lq.delayed}} {
		v, given, e := queryBool(q, p.name)
		if e != nil {
			return lq, e
		}
		if given {
			*p.dst = v
			lq.link.add(p.name, boolText(v))
			if p.name == "include_delayed" {
				lq.delayedGiven = true
			}
		}
	}
	// As Zaqar: every parameter is read before the limit's range is
	// checked, so a bad boolean is reported before a limit out of range.
	if limitGiven && (n < 1 || n > maxLimit) {
		return lq, limitErr(maxLimit)
	}
	return lq, nil
}
