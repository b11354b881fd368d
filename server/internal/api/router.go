package api

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"unicode/utf8"

	"sluice.dev/server/internal/metrics"
	"sluice.dev/server/internal/storage"
)

// Access says which request headers a route needs.
type Access int

const (
	// Public routes need no headers ("/", /metrics, /healthz).
	Public Access = iota
	// Project routes need Client-ID and a project (X-Project-ID or a token).
	Project
	// Admin routes need the admin role as well.
	Admin
)

// HandlerFunc serves one route. Call carries what the checks resolved.
type HandlerFunc func(w http.ResponseWriter, r *http.Request, c *Call)

// Call is what the server resolved about a request before its handler runs.
type Call struct {
	Project   string
	ClientID  string // canonical dashed UUID
	RequestID string
	Admin     bool
	queue     string
	topic     bool // queue names a topic (routes under /v2/topics)
	ctx       context.Context
	w         *respWriter
}

// Context bounds storage calls by the storage timeout.
func (c *Call) Context() context.Context { return c.ctx }

// Handle mounts a handler for a method on a path pattern in net/http's
// ServeMux syntax ("/v2/pools/{pool_name}"). It is the extension point for
// the admin API (pools, flavors): access Admin runs the admin check before
// h. A {queue_name} wildcard is validated before h runs. Handle may be
// called until the server starts serving.
func (s *Server) Handle(method, pattern string, access Access, h HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := s.routes[pattern]
	if rt == nil {
		label := strings.TrimSuffix(pattern, "{$}")
		rt = &route{s: s, label: label, hasQueue: strings.Contains(pattern, "{queue_name}"),
			topics: strings.HasPrefix(pattern, "/v2/topics"), hasTopic: strings.Contains(pattern, "{topic_name}")}
		rt.other = s.m.Endpoint("other", label)
		s.routes[pattern] = rt
		s.mux.Handle(pattern, rt)
	}
	i := methodIndex(method)
	if i < 0 {
		panic("api: unsupported method " + method)
	}
	rt.eps[i] = &endpoint{access: access, h: h, m: s.m.Endpoint(method, rt.label)}
	rt.allow = rt.allowHeader()
}

var methods = [...]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}

func methodIndex(m string) int {
	switch m {
	case "GET":
		return 0
	case "HEAD":
		return 1
	case "POST":
		return 2
	case "PUT":
		return 3
	case "PATCH":
		return 4
	case "DELETE":
		return 5
	}
	return -1
}

type endpoint struct {
	access Access
	h      HandlerFunc
	m      *metrics.Endpoint
}

// route holds the handlers of one path pattern by method, so that a known
// path with the wrong method gets 405 with an Allow header, as Zaqar does.
type route struct {
	s        *Server
	label    string // route template used in metrics and logs
	hasQueue bool
	topics   bool // under /v2/topics
	hasTopic bool
	eps      [len(methods)]*endpoint
	allow    string
	other    *metrics.Endpoint // 405 and OPTIONS
}

func (rt *route) allowHeader() string {
	var names []string
	for i, ep := range rt.eps {
		if ep != nil {
			names = append(names, methods[i])
		}
	}
	sort.Strings(names)
	return strings.Join(append(names, "OPTIONS"), ", ")
}

var errNotAllowed = &apiError{http.StatusMethodNotAllowed, "405 Method Not Allowed", ""}

func (rt *route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rw := w.(*respWriter)
	rw.route = rt.label
	i := methodIndex(r.Method)
	var ep *endpoint
	if i >= 0 {
		ep = rt.eps[i]
	}
	// Zaqar checks a signature first, before routing by method: a signed
	// request that does not hold is 404 on every route, public ones and
	// methods the route does not serve included.
	signed, e := rt.s.checkSignature(r)
	if e != nil {
		rw.ep = rt.other
		if ep != nil {
			rw.ep = ep.m
		}
		rt.s.fail(w, e)
		return
	}
	if ep == nil {
		rw.ep = rt.other
		w.Header()["Allow"] = []string{rt.allow}
		if r.Method == http.MethodOptions {
			writeEmpty(w, http.StatusOK)
			return
		}
		writeErr(w, errNotAllowed, 0)
		return
	}
	rw.ep = ep.m
	s := rt.s
	c := &rw.call
	c.w = rw
	if ep.access == Public {
		c.ctx = r.Context()
		ep.h(w, r, c)
		return
	}
	if e := s.checkHeaders(r, c, ep.access, signed); e != nil {
		if e == errNotAcceptable {
			// Zaqar cannot encode an error the client would accept: no body.
			w.Header()["Vary"] = varyAccept
			w.Header()["Content-Type"] = ctJSON
			writeEmpty(w, http.StatusNotAcceptable)
			return
		}
		s.fail(w, e)
		return
	}
	if rt.hasQueue {
		c.queue = r.PathValue("queue_name")
		if !validQueueName(c.queue) {
			s.fail(w, errBadQueue)
			return
		}
	}
	if rt.topics {
		c.topic = true
		if rt.hasTopic {
			c.queue = r.PathValue("topic_name")
			if !validQueueName(c.queue) {
				s.fail(w, errBadTopic)
				return
			}
		}
	}
	if !s.boundCalls {
		c.ctx = r.Context()
		ep.h(w, r, c)
		return
	}
	c.ctx = s.deadlines.context(rw.start)
	ep.h(w, r, c)
}

var errNotAcceptable = &apiError{status: http.StatusNotAcceptable}

// checkHeaders runs the rest of Zaqar's request hooks in its order, after
// the signature (signed: the request carried one that holds): form-encoded
// bodies, Accept, Client-ID, project, then the admin role.
func (s *Server) checkHeaders(r *http.Request, c *Call, access Access, signed bool) *apiError {
	h := r.Header
	var e *apiError
	// Zaqar's hook skips only a request without Content-Length, so a form
	// type with "Content-Length: 0" is refused too.
	if ct := h["Content-Type"]; len(ct) > 0 && (r.ContentLength != 0 || h["Content-Length"] != nil) &&
		mediaType(ct[0]) == "application/x-www-form-urlencoded" {
		return errFormEncoded
	}
	if a := h["Accept"]; len(a) > 0 && !acceptsJSON(strings.Join(a, ",")) {
		return errNotAcceptable
	}
	cid := h["Client-Id"]
	if len(cid) == 0 {
		return errNoClientID
	}
	id, ok := parseClientID(cid[0])
	if !ok {
		return errBadClientID
	}
	c.ClientID = id
	if signed {
		e = authorizeSigned(r, c)
	} else {
		e = s.authorize(r, c)
	}
	if e != nil {
		return e
	}
	// Bytes that are not UTF-8 are refused for every store: a MongoDB pool
	// cannot store them, and a queue of any store can move to one.
	if len(c.Project) > maxProjectLen || storage.ReservedProject(c.Project) || !utf8.ValidString(c.Project) {
		return errBadQueue
	}
	if access == Admin && !c.Admin {
		return errNotAdmin
	}
	return nil
}

// notFound answers paths no route matches, as falcon does.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	writeErr(w, &apiError{http.StatusNotFound, "404 Not Found", ""}, 0)
}
