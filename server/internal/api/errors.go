package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"sluice.dev/server/internal/storage"
)

// apiError is an answer that is not a success: a status and Zaqar's
// {"title", "description"} body.
type apiError struct {
	status int
	title  string
	desc   string
}

func (e *apiError) Error() string { return e.title + ": " + e.desc }

func badRequest(desc string) *apiError {
	return &apiError{http.StatusBadRequest, "Invalid API request", desc}
}

func badBody(desc string) *apiError {
	return &apiError{http.StatusBadRequest, "Invalid request body", desc}
}

func notFound(desc string) *apiError {
	return &apiError{http.StatusNotFound, "Not found", desc}
}

// Titles Zaqar uses for whole classes of answers.
const (
	titleUnavailable = "Service temporarily unavailable"
	retrySuffix      = " Please try again in a few seconds."
)

// kindStatus is the one table that turns a storage error kind into an HTTP
// status; drivers never choose status codes.
var kindStatus = [...]int{
	storage.Internal:    http.StatusInternalServerError,
	storage.NotFound:    http.StatusNotFound,
	storage.Conflict:    http.StatusConflict,
	storage.Invalid:     http.StatusBadRequest,
	storage.Forbidden:   http.StatusForbidden,
	storage.TooLarge:    http.StatusRequestEntityTooLarge,
	storage.Unavailable: http.StatusServiceUnavailable,
}

var kindTitle = [...]string{
	storage.Internal:    "Internal server error",
	storage.NotFound:    "Not found",
	storage.Conflict:    "Conflict",
	storage.Invalid:     "Invalid API request",
	storage.Forbidden:   "Not authorized",
	storage.TooLarge:    "Request entity too large",
	storage.Unavailable: titleUnavailable,
}

// StatusOf maps a storage error to its HTTP status. Context deadlines count
// as an unreachable backend: the request waited for storage too long.
func StatusOf(err error) int {
	return kindStatus[kindOf(err)]
}

func kindOf(err error) storage.Kind {
	var se *storage.Error
	if errors.As(err, &se) {
		if int(se.Kind) < len(kindStatus) {
			return se.Kind
		}
		return storage.Internal
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return storage.Unavailable
	}
	return storage.Internal
}

// storageErr turns a storage failure into an answer. what completes Zaqar's
// "<what> Please try again in a few seconds." (e.g. "Messages could not be
// enqueued."); missing is the description of a 404.
func storageErr(err error, what, missing string) *apiError {
	k := kindOf(err)
	e := &apiError{status: kindStatus[k], title: kindTitle[k]}
	switch k {
	case storage.Unavailable:
		e.desc = what + retrySuffix
	case storage.Internal:
		e.desc = what
	case storage.NotFound:
		e.desc = missing
	default:
		e.desc = causeText(err)
	}
	return e
}

// causeText is the driver's explanation without the operation prefix.
func causeText(err error) string {
	var se *storage.Error
	if errors.As(err, &se) && se.Err != nil {
		return se.Err.Error()
	}
	return err.Error()
}

// WriteError answers with a Zaqar error body. It is exported for handlers
// added with Server.Handle (the admin API).
func WriteError(w http.ResponseWriter, status int, title, description string) {
	writeErr(w, &apiError{status, title, description}, 0)
}

// WriteStorageError answers a failed storage call: what completes the 503
// description ("Pool could not be created."), missing is the 404 description.
func (s *Server) WriteStorageError(w http.ResponseWriter, err error, what, missing string) {
	s.fail(w, storageErr(err, what, missing))
}

func (s *Server) fail(w http.ResponseWriter, e *apiError) {
	writeErr(w, e, s.retryAfter)
}

func writeErr(w http.ResponseWriter, e *apiError, retryAfter int) {
	h := w.Header()
	h["Content-Type"] = ctJSON
	h["Vary"] = varyAccept
	if e.status == http.StatusServiceUnavailable && retryAfter > 0 {
		h["Retry-After"] = []string{strconv.Itoa(retryAfter)}
	}
	b := make([]byte, 0, 48+len(e.title)+len(e.desc))
	b = append(b, `{"title":`...)
	b = appendString(b, e.title)
	if e.desc != "" {
		b = append(b, `,"description":`...)
		b = appendString(b, e.desc)
	}
	b = append(b, '}')
	w.WriteHeader(e.status)
	w.Write(b)
}

var (
	ctJSON     = []string{"application/json"}
	ctJSONHome = []string{"application/json-home"}
	varyAccept = []string{"Accept"}
)
