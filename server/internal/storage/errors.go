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
)

var kindNames = [...]string{"internal", "not found", "conflict", "invalid", "forbidden", "too large", "unavailable"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

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
