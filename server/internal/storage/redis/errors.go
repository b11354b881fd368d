package redis

import (
	"errors"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"sluice.dev/server/internal/storage"
)

// transientPrefixes are Redis error replies that mean "not now" rather than
// "never": a loading or read-only (just failed over) server. OOM, a full
// server (maxmemory with noeviction), is a kind of its own: Full.
var transientPrefixes = []string{"LOADING", "READONLY", "MASTERDOWN", "TRYAGAIN", "BUSY", "CLUSTERDOWN", "NOREPLICAS"}

// wrap maps a go-redis error to the storage error model. Anything that is not
// an error reply from the server (refused or reset connections, timeouts, a
// closed pool, no reachable sentinel) means Redis is unavailable: the API
// answers 503 and the next request tries again.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var rerr goredis.Error
	if errors.As(err, &rerr) && !errors.Is(err, goredis.ErrClosed) {
		msg := rerr.Error()
		if e := moveReply(op, msg); e != nil {
			return e
		}
		if strings.HasPrefix(msg, "OOM") {
			return storage.E(op, storage.Full, err)
		}
		for _, p := range transientPrefixes {
			if strings.HasPrefix(msg, p) {
				return storage.E(op, storage.Unavailable, err)
			}
		}
		if !isNetworkText(msg) {
			return storage.E(op, storage.Internal, err)
		}
	}
	return storage.E(op, storage.Unavailable, err)
}

// isNetworkText recognises go-redis errors that implement redis.Error but
// describe connectivity (the sentinel and pool errors).
func isNetworkText(msg string) bool {
	return strings.Contains(msg, "unreachable") || strings.Contains(msg, "connection") ||
		strings.Contains(msg, "pool timeout") || strings.Contains(msg, "i/o timeout")
}

// moveReply maps the replies lib.lua's scripts give while a queue moves
// (moved_reply, moving_reply, conflict_reply) to the storage error model.
func moveReply(op, msg string) error {
	switch {
	case strings.HasPrefix(msg, "SLUICEMOVED "):
		return storage.E(op, storage.Conflict, storage.Moved{Target: strings.TrimPrefix(msg, "SLUICEMOVED ")})
	case strings.HasPrefix(msg, "SLUICEMOVING "):
		return storage.E(op, storage.Unavailable, storage.ErrMoving)
	case strings.HasPrefix(msg, "SLUICECONFLICT "):
		return storage.E(op, storage.Conflict, strings.TrimPrefix(msg, "SLUICECONFLICT "))
	}
	return nil
}
