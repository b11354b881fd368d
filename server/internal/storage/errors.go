package storage

import (
	"errors"
	"fmt"
)

// Kind classifies a storage error. The API layer maps each kind to one HTTP
// status in a single table; drivers never choose status codes.
type Kind int

// The error kinds.
const (
	Internal    Kind = iota // a bug or an unexpected backend answer (500)
	NotFound                // the queue, message, claim, pool or flavor does not exist (404)
	Conflict                // the operation clashes with current state (409)
	Invalid                 // the request can never succeed as given (400)
	Forbidden               // the caller may not do this to the resource (403)
	TooLarge                // a size limit was exceeded (413)
	Unavailable             // the backend cannot be reached right now (503)
	Full                    // the backend is out of space: writes that grow it are refused (507)
)

var kindNames = [...]string{"internal", "not found", "conflict", "invalid", "forbidden", "too large", "unavailable", "full"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Reasons a driver gives with a kind when the API words the answer
// differently per reason. They identify a condition; the sentence a client
// reads lives in the API's error table, so every driver answers alike.
var (
	// ErrArgument: an argument no backend can honour (a limit or TTL out
	// of range), refused by the instrumentation wrapper.
	ErrArgument = errors.New("argument out of range")
	// ErrMarker: a listing marker that is neither a driver's own nor a
	// message id.
	ErrMarker = errors.New("malformed marker")
	// ErrClaimed: deleting a message a live claim holds, without a claim id.
	ErrClaimed = errors.New("message is claimed; a claim id is required")
	// ErrNotHolder: deleting a message with a claim id that does not hold it.
	ErrNotHolder = errors.New("the claim does not hold the message")
	// ErrNotClaimed: deleting a message with a claim id when no live claim
	// holds it (the caller's claim lapsed, or it never held the message).
	ErrNotClaimed = errors.New("a claim id was given but no claim holds the message")
	// ErrNoClaim: the claim does not exist or has lapsed.
	ErrNoClaim = errors.New("no such claim")
	// ErrNoMessage: the message does not exist or has expired.
	ErrNoMessage = errors.New("no such message")
	// ErrDeadLetterPool: the dead-letter queue lives on another pool than
	// the queue it serves.
	ErrDeadLetterPool = errors.New("dead-letter queue lives on another pool")
	// ErrNoKey: a post asks for encryption and the server has no
	// encryption key.
	ErrNoKey = errors.New("no encryption key configured")
	// ErrUndecryptable: a body stored encrypted that no configured key
	// decrypts (not returned as an error: it is what Message.Unreadable
	// means, and the delivery engine's error text for such a delivery).
	ErrUndecryptable = errors.New("the message body is encrypted and no configured key decrypts it")
)

// Public is a cause written for clients: the pool catalog's placement
// answers ("Flavor x does not exist"), worded as Zaqar words them, which the
// API shows as they are. Drivers never use it; their causes are reasons
// (the Err values above) or detail for the log.
type Public string

func (p Public) Error() string { return string(p) }

// Error is the one error type of the storage layer: what was attempted, what
// kind of failure it was, and the underlying cause.
type Error struct {
	Op   string // e.g. "messages.post"
	Kind Kind
	Err  error
}

// E builds an *Error. The cause may be a string, an error or nil.
func E(op string, kind Kind, cause any) error {
	e := &Error{Op: op, Kind: kind}
	switch c := cause.(type) {
	case nil:
	case error:
		e.Err = c
	case string:
		e.Err = errors.New(c)
	default:
		e.Err = fmt.Errorf("%v", c)
	}
	return e
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Op + ": " + e.Kind.String()
	}
	return e.Op + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of the first *Error in err's chain, or Internal.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// Is reports whether err carries the given kind.
func Is(err error, kind Kind) bool { return err != nil && KindOf(err) == kind }
