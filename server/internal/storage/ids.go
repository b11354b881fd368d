package storage

import "github.com/google/uuid"

func init() {
	// Message and claim ids are random UUIDs like Zaqar's Redis driver hands
	// out. A buffered random pool makes each id a copy instead of a
	// getrandom(2) call on the hot post path; init runs before any id can be
	// generated, which is what uuid.EnableRandPool requires.
	uuid.EnableRandPool()
}

// NewID returns a new random message or claim id (a UUID string).
func NewID() string { return uuid.NewString() }

// IsMessageID reports whether s has the form of a message id (a UUID, as
// NewID makes), so drivers can tell an id marker from their own positions.
func IsMessageID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}
