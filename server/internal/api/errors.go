package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"sluice.dev/server/internal/auth"
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
	storage.Full:        http.StatusInsufficientStorage,
}

var kindTitle = [...]string{
	storage.Internal:    "Internal server error",
	storage.NotFound:    "Not found",
	storage.Conflict:    "Conflict",
	storage.Invalid:     "Invalid API request",
	storage.Forbidden:   "Not authorized",
	storage.TooLarge:    "Request entity too large",
	storage.Unavailable: titleUnavailable,
	storage.Full:        "Insufficient storage",
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

// reasonText words the reasons drivers give with a kind (storage.Err*):
// the one place those sentences live, so every driver's answer to the same
// condition reads the same. The status still comes from the kind.
var reasonText = [...]struct {
	reason      error
	title, desc string
}{
	{storage.ErrClaimed, "Unable to delete", "This message is claimed; it cannot be deleted without a valid claim ID."},
	{storage.ErrNotHolder, "Unable to delete", "The specified claim does not exist or has expired."},
	{storage.ErrNotClaimed, "Unable to delete", "A claim was specified, but the message is not currently claimed."},
	{storage.ErrMarker, "Invalid API request", "The marker is not valid: use the marker of a next link or a message id."},
	{storage.ErrDeadLetterPool, "Invalid API request", "The dead-letter queue lives on another pool than this queue; " +
		"name a dead-letter queue that does not exist yet, and it is created next to the queue."},
	{storage.ErrArgument, "Invalid API request", "A limit or TTL is out of range."},
	{storage.ErrNoKey, "Unable to encrypt", "The queue encrypts its messages (_enable_encrypt_messages) " +
		"and this server has no encryption key (--encryption-key-file)."},
}

// Encryption at rest, worded here with the rest: a queue may not ask for
// it of a server without a key, and a message whose body no configured
// key decrypts is shown with "body": null and this "body_error".
const (
	descEncryptNeedsKey = "_enable_encrypt_messages needs the server to have an encryption key (--encryption-key-file)."
	descBodyUnreadable  = "The message is encrypted and none of the server's encryption keys decrypts it."
)

// kindDesc describes a kind when the driver gave no reason the table words.
var kindDesc = [...]string{
	storage.Conflict:  "The request conflicts with the current state of the resource.",
	storage.Invalid:   "The request could not be carried out as given.",
	storage.Forbidden: "You are not authorized to complete this action.",
	storage.TooLarge:  "The request is larger than the server accepts.",
	storage.Full: "The queue's storage is full: nothing of this request was stored. Reading, claiming and " +
		"deleting messages still work; posting works again once consumers have deleted messages.",
}

// storageErr turns a storage failure into an answer. what completes Zaqar's
// "<what> Please try again in a few seconds." (e.g. "Messages could not be
// enqueued."); missing is the description of a 404. Drivers' own text never
// reaches the client: a reason is worded by reasonText, a kind by kindDesc.
func storageErr(err error, what, missing string) *apiError {
	k := kindOf(err)
	e := &apiError{status: kindStatus[k], title: kindTitle[k]}
	switch k {
	case storage.Unavailable:
		e.desc = what + retrySuffix
		return e
	case storage.Internal:
		e.desc = what
		return e
	case storage.NotFound:
		e.desc = missing
		return e
	}
	for _, r := range reasonText {
		if errors.Is(err, r.reason) {
			e.title, e.desc = r.title, r.desc
			return e
		}
	}
	var pub storage.Public
	if errors.As(err, &pub) {
		e.desc = string(pub)
		return e
	}
	if int(k) < len(kindDesc) {
		e.desc = kindDesc[k]
	}
	return e
}

// trustErr words why the Keystone trust of a trust+ subscriber could not
// be created: the identity service's refusal is the user's to act on
// (403, with Keystone's reason); its absence is a 503.
func trustErr(err error) *apiError {
	var refused *auth.RefusedError
	switch {
	case errors.As(err, &refused):
		return &apiError{http.StatusForbidden, "Not authorized",
			"The identity service refused the trust that notifies a trust+ subscriber: " + refused.Message}
	case errors.Is(err, auth.ErrInvalid):
		return errBadToken
	case errors.Is(err, auth.ErrUnscoped):
		return errUnscoped
	case errors.Is(err, auth.ErrNoUser):
		return errTrustNeedsUser
	}
	return &apiError{http.StatusServiceUnavailable, titleUnavailable,
		"The identity service could not create the trust that notifies a trust+ subscriber." + retrySuffix}
}

// causeText is the cause without the operation prefix: the admin API shows
// the pool catalog's own explanations (a pool it cannot reach, a bad URI).
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
	// A full shard is told apart from one that is down (507, not 503), and
	// both say when to try again: consumers drain a full one.
	if (e.status == http.StatusServiceUnavailable || e.status == http.StatusInsufficientStorage) && retryAfter > 0 {
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
