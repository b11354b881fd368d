package mongo

import (
	"context"
	"errors"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"sluice.dev/server/internal/storage"
)

// Codes of a server out of space: OutOfDiskSpace (14031) and a database
// over its quota (12501).
const (
	codeOutOfDiskSpace = 14031
	codeQuotaExceeded  = 12501
)

// kindOf classifies a driver error: a server out of space is Full,
// anything that means "the server cannot be reached right now" is
// Unavailable, the rest is Internal.
func kindOf(err error) storage.Kind {
	var se mongo.ServerError
	switch {
	case err == nil:
		return storage.Internal
	case errors.As(err, &se) && (se.HasErrorCode(codeOutOfDiskSpace) || se.HasErrorCode(codeQuotaExceeded)):
		return storage.Full
	case mongo.IsNetworkError(err), mongo.IsTimeout(err),
		errors.Is(err, topology.ErrTopologyClosed),
		errors.Is(err, mongo.ErrClientDisconnected),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, ErrLockBusy):
		return storage.Unavailable
	}
	var sse topology.ServerSelectionError
	if errors.As(err, &sse) {
		return storage.Unavailable
	}
	return storage.Internal
}

// wrap turns a driver error into a storage error for op.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return storage.E(op, kindOf(err), err)
}

// IsDuplicateKey reports a write refused by a unique index. MongoDB says so
// with code 11000 whatever the write; FerretDB does for an insert, but an
// update that would break a unique index comes back as an InternalError
// carrying its SQL backend's words (SQLite's, or PostgreSQL's).
func IsDuplicateKey(err error) bool {
	if err == nil {
		return false
	}
	if mongo.IsDuplicateKeyError(err) {
		return true
	}
	var ce mongo.CommandError
	var we mongo.WriteException
	msg := ""
	switch {
	case errors.As(err, &ce):
		msg = ce.Message
	case errors.As(err, &we):
		msg = we.Error()
	default:
		return false
	}
	return strings.Contains(msg, "UNIQUE constraint failed") || strings.Contains(msg, "duplicate key value violates unique constraint")
}

// isNotImplemented reports the server's NotImplemented (238) or
// CommandNotSupported answers, with which FerretDB refuses what it lacks.
func isNotImplemented(err error) bool {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code == 238 || ce.Code == 115 || ce.Name == "NotImplemented"
	}
	return false
}
