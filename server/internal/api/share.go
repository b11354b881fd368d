package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"sluice.dev/server/internal/signedurl"
)

// sharePaths are the resources of a queue a pre-signed URL may cover.
var sharePaths = map[string]bool{"messages": true, "subscriptions": true, "claims": true}

// errSignature is Zaqar's answer to a signed request that does not hold:
// a bare 404, so a guesser learns nothing about what exists.
var errSignature = &apiError{http.StatusNotFound, "404 Not Found", ""}

// shareQueue: POST /v2/queues/{queue_name}/share {"paths", "methods",
// "expires"} -> 200 with the signed URL's fields.
func (s *Server) shareQueue(w http.ResponseWriter, r *http.Request, c *Call) {
	body, e := s.readBody(r, c.w)
	if e != nil {
		s.fail(w, e)
		return
	}
	// Zaqar: no Content-Length is "can not be empty"; an empty body that
	// says so (Content-Length: 0) is JSON that could not be parsed.
	if len(body) == 0 && r.Header["Content-Length"] == nil {
		s.fail(w, badBody("Request body can not be empty"))
		return
	}
	v, e := parseJSONDocument(body)
	if e != nil {
		s.fail(w, e)
		return
	}
	doc, ok := v.(map[string]any)
	if !ok {
		s.fail(w, errDocType)
		return
	}
	var unknown []string
	for k := range doc {
		if k != "paths" && k != "methods" && k != "expires" {
			unknown = append(unknown, pyRepr(k))
		}
	}
	if len(unknown) > 0 {
		s.fail(w, badRequest("Unknown keys: "+pySet(unknown)))
		return
	}
	base := strings.TrimSuffix(r.URL.Path, "share")
	paths, e := sharedPaths(doc["paths"], base)
	if e != nil {
		s.fail(w, e)
		return
	}
	methods, e := sharedMethods(doc["methods"])
	if e != nil {
		s.fail(w, e)
		return
	}
	var expires time.Time
	if raw, has := doc["expires"]; has && raw != nil {
		if expires, e = sharedExpiry(raw); e != nil {
			s.fail(w, e)
			return
		}
	}
	signed, err := signedurl.Sign(s.signKey, paths, methods, c.Project, expires, time.Now())
	if err != nil {
		s.fail(w, badRequest(err.Error()))
		return
	}
	out, _ := json.Marshal(struct {
		Paths     []string `json:"paths"`
		Methods   []string `json:"methods"`
		Project   string   `json:"project"`
		Expires   string   `json:"expires"`
		Signature string   `json:"signature"`
	}{signed.Paths, signed.Methods, signed.Project, signed.Expires, signed.Signature})
	writeRaw(w, http.StatusOK, out)
}

// sharedPaths resolves "paths" (names of the queue's resources) to full
// paths; anything Python finds falsy means the messages, as in Zaqar.
func sharedPaths(v any, base string) ([]string, *apiError) {
	if falsy(v) {
		return []string{base + "messages"}, nil
	}
	if text, ok := v.(string); ok {
		// Zaqar takes a string's characters for the names, and no single
		// character names a resource.
		var chars []string
		for _, r := range text {
			if c := pyRepr(string(r)); !slices.Contains(chars, c) {
				chars = append(chars, c)
			}
		}
		return nil, badRequest("Invalid paths: " + pySet(chars))
	}
	list, ok := v.([]any)
	if !ok {
		return nil, badRequest("Invalid paths: " + jsonText(v))
	}
	var bad []string
	out := make([]string, 0, len(list))
	for _, p := range list {
		name, ok := p.(string)
		if !ok || !sharePaths[name] {
			bad = append(bad, pyValue(p))
			continue
		}
		out = append(out, base+name)
	}
	if len(bad) > 0 {
		return nil, badRequest("Invalid paths: " + pySet(bad))
	}
	return out, nil
}

// sharedMethods checks "methods": a list of methods a shared resource
// serves. Zaqar signs any string (PATCH too); sluice refuses what could
// never be useful or is not a method.
func sharedMethods(v any) ([]string, *apiError) {
	if falsy(v) {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, badRequest("`methods` should be a list")
	}
	var bad []string
	out := make([]string, 0, len(list))
	for _, m := range list {
		name, ok := m.(string)
		if !ok || !signedurl.ValidMethod(name) {
			bad = append(bad, pyValue(m))
			continue
		}
		out = append(out, name)
	}
	if len(bad) > 0 {
		return nil, badRequest("Invalid methods: " + pySet(bad) + "; allowed: " +
			strings.Join(signedurl.Methods, ", "))
	}
	return out, nil
}

// sharedExpiry reads "expires": a date, never a number (Zaqar's message).
func sharedExpiry(v any) (time.Time, *apiError) {
	switch x := v.(type) {
	case string:
		t, err := signedurl.ParseExpires(x)
		if errors.Is(err, signedurl.ErrBadExpiry) {
			// Zaqar passes on its date parser's words.
			return time.Time{}, badRequest("Unable to parse date string " + pyRepr(x))
		}
		if err != nil {
			return time.Time{}, badRequest(err.Error())
		}
		return t, nil
	case json.Number:
		if f, err := x.Float64(); err == nil && int64(f) != 0 {
			return time.Time{}, badRequest("`expires` should be date format, for example 2016-01-01T00:00:00, not integer value: " +
				strconv.FormatInt(int64(f), 10))
		}
	}
	return time.Time{}, badRequest(signedurl.ErrBadExpiry.Error())
}

// falsy is Python's truth test on a decoded JSON value.
func falsy(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case string:
		return x == ""
	case json.Number:
		f, err := x.Float64()
		return err == nil && f == 0
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// checkSignature is Zaqar's first request hook: a request carrying
// URL-Signature, even an empty one (23.0.1 tests the header for None), is
// served only if the signature holds for its method, path, project and
// expiry; signed tells authorize to take the project from the signed
// X-Project-ID instead of asking for a token.
func (s *Server) checkSignature(r *http.Request) (signed bool, e *apiError) {
	h := r.Header
	sig := h["Url-Signature"]
	if len(sig) == 0 {
		return false, nil
	}
	// No trimming around commas: the signature covers the text as sent.
	methods := strings.Split(h.Get("Url-Methods"), ",")
	paths := strings.Split(h.Get("Url-Paths"), ",")
	if !contains(methods, r.Method) || !signedurl.ValidMethod(r.Method) || !signedurl.Allows(paths, r.URL.Path) {
		return true, errSignature
	}
	// Zaqar formats a missing project as Python's None.
	project := "None"
	if p, ok := h["X-Project-Id"]; ok {
		project = p[0]
	}
	if !signedurl.Verify(s.signKey, paths, methods, project, h.Get("Url-Expires"), sig[0], time.Now()) {
		return true, errSignature
	}
	return true, nil
}

// authorizeSigned resolves the caller of a verified signed request: the
// signed project, never the admin role, whatever tokens are configured.
func authorizeSigned(r *http.Request, c *Call) *apiError {
	proj, ok := r.Header["X-Project-Id"]
	if !ok {
		return errNoProject
	}
	if proj[0] == "" {
		return errEmptyProj
	}
	c.Project = proj[0]
	c.Admin = false
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
