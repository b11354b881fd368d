package api

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// parseClientID accepts what Python's uuid.UUID accepts (Zaqar validates the
// Client-ID header with it): 32 hex digits, hyphens anywhere, optional braces
// and "urn:uuid:" prefix. It returns the canonical dashed lower-case form, so
// the same client is recognised however it spells its id (echo=false).
func parseClientID(s string) (string, bool) {
	if len(s) == 36 && isCanonicalUUID(s) {
		return s, true
	}
	if len(s) > 128 {
		return "", false
	}
	s = strings.ReplaceAll(s, "urn:", "")
	s = strings.ReplaceAll(s, "uuid:", "")
	s = strings.Trim(s, "{}")
	var hex [32]byte
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '-' {
			continue
		}
		if n == 32 {
			return "", false
		}
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		case c >= 'A' && c <= 'F':
			c += 'a' - 'A'
		default:
			return "", false
		}
		hex[n] = c
		n++
	}
	if n != 32 {
		return "", false
	}
	out := make([]byte, 0, 36)
	out = append(out, hex[0:8]...)
	out = append(out, '-')
	out = append(out, hex[8:12]...)
	out = append(out, '-')
	out = append(out, hex[12:16]...)
	out = append(out, '-')
	out = append(out, hex[16:20]...)
	out = append(out, '-')
	out = append(out, hex[20:32]...)
	return string(out), true
}

func isCanonicalUUID(s string) bool {
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// acceptsJSON reports whether an Accept header admits application/json: no
// header, */*, application/* or application/json with a non-zero quality.
func acceptsJSON(accept string) bool {
	if accept == "" || accept == "*/*" || accept == "application/json" {
		return true
	}
	for _, part := range strings.Split(accept, ",") {
		mt, params, _ := strings.Cut(part, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
		if mt != "*/*" && mt != "application/*" && mt != "application/json" {
			continue
		}
		if !zeroQuality(params) {
			return true
		}
	}
	return false
}

func zeroQuality(params string) bool {
	for _, p := range strings.Split(params, ";") {
		k, v, ok := strings.Cut(p, "=")
		if !ok || strings.ToLower(strings.TrimSpace(k)) != "q" {
			continue
		}
		v = strings.TrimSpace(v)
		return strings.Trim(v, "0.") == "" && v != ""
	}
	return false
}

// mediaType is the Content-Type without parameters, lower-cased.
func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	for i := 0; i < len(mt); i++ {
		if c := mt[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(mt)
		}
	}
	return mt
}

// Errors of the request headers, worded as Zaqar's.
var (
	errFormEncoded = &apiError{http.StatusBadRequest, "Invalid Content-Type",
		"Endpoint does not accept `application/x-www-form-urlencoded` content; currently supported media type is `application/json`; specify proper client-side media type with the \"Content-Type\" header."}
	errNoClientID  = &apiError{http.StatusBadRequest, "Missing header value", `The "Client-Id" header is required.`}
	errBadClientID = &apiError{http.StatusBadRequest, "Wrong UUID value", "Malformed hexadecimal UUID."}
	errNoProject   = &apiError{http.StatusBadRequest, "Project-Id Missing", "The header X-PROJECT-ID was missing"}
	errEmptyProj   = &apiError{http.StatusBadRequest, "Empty project header not allowed",
		"X-PROJECT-ID cannot be an empty string. Specify the right header X-PROJECT-ID and retry."}
	errNotAdmin = &apiError{http.StatusForbidden, "Not authorized", "You are not authorized to complete this action."}
	errNoToken  = &apiError{http.StatusUnauthorized, "Authentication required",
		"Send a token with \"Authorization: Bearer <token>\" or \"X-Auth-Token\"."}
	errBadToken = &apiError{http.StatusUnauthorized, "Authentication required", "The token is not valid."}
	errBadQueue = &apiError{http.StatusBadRequest, "Invalid queue identification",
		"The format of the submitted queue name or project id is not valid."}
)

// maxProjectLen is Zaqar's PROJECT_ID_MAX_LEN.
const maxProjectLen = 256

// authorize resolves the caller's project and admin role.
func (s *Server) authorize(r *http.Request, c *Call) *apiError {
	if s.keystone != nil {
		return s.authorizeKeystone(r, c)
	}
	if s.kube != nil {
		return s.authorizeKubernetes(r, c)
	}
	h := r.Header
	proj, hasProj := h["X-Project-Id"]
	if s.authRequired || s.adminToken != "" {
		tok := bearerToken(h)
		switch {
		case tok != "" && s.adminToken != "" &&
			subtle.ConstantTimeCompare([]byte(tok), []byte(s.adminToken)) == 1:
			c.Admin = true
		case !s.authRequired:
			// Only the admin role is protected: projects stay as noauth.
		case tok == "":
			return errNoToken
		default:
			p, ok := s.tokens[tok]
			if !ok {
				return errBadToken
			}
			if hasProj && proj[0] != "" && proj[0] != p {
				return &apiError{http.StatusForbidden, "Not authorized", "The token is not valid for project " + proj[0] + "."}
			}
			c.Project = p
			return nil
		}
	} else if s.trustRoles {
		c.Admin = hasRole(h["X-Roles"], "admin")
	}
	if !hasProj {
		return errNoProject
	}
	if proj[0] == "" {
		return errEmptyProj
	}
	c.Project = proj[0]
	return nil
}

// adminFor resolves a caller holding the static admin token in the modes
// that validate tokens elsewhere (keystone, kubernetes): the admin role,
// acting for the project X-Project-ID names.
func adminFor(h http.Header, c *Call) *apiError {
	c.Admin = true
	proj := h["X-Project-Id"]
	if len(proj) == 0 {
		return errNoProject
	}
	if proj[0] == "" {
		return errEmptyProj
	}
	c.Project = proj[0]
	return nil
}

func bearerToken(h http.Header) string {
	if a := h["Authorization"]; len(a) > 0 {
		if len(a[0]) > 7 && strings.EqualFold(a[0][:7], "bearer ") {
			return strings.TrimSpace(a[0][7:])
		}
	}
	if t := h["X-Auth-Token"]; len(t) > 0 {
		return strings.TrimSpace(t[0])
	}
	return ""
}

func hasRole(values []string, role string) bool {
	for _, v := range values {
		for _, r := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(r), role) {
				return true
			}
		}
	}
	return false
}

// validQueueName is Zaqar 23.0.1's rule, ^[a-zA-Z0-9_.-]{1,64}$ (its
// error message still leaves the dot out), except "." and "..", which a
// URL path cannot carry as a name: clients and proxies resolve them as
// steps up the path.
func validQueueName(name string) bool {
	if len(name) == 0 || len(name) > 64 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
