package instrument

import (
	"time"

	"sluice.dev/server/internal/storage"
)

// The wrapper is the one place that refuses arguments no backend can honour
// (the API layer never sends them; a caller that does gets Invalid with
// storage.ErrArgument before any backend is touched). Drivers trust what
// reaches them through it. Times are stored to the millisecond, so a TTL
// below one is refused too.

func badArgument(op string) error { return storage.E(op, storage.Invalid, storage.ErrArgument) }

func checkPost(msgs []storage.NewMessage) error {
	if len(msgs) == 0 {
		return badArgument(storage.OpMessagePost)
	}
	for _, m := range msgs {
		if m.TTL < time.Millisecond || m.Delay < 0 {
			return badArgument(storage.OpMessagePost)
		}
		if m.Encrypt {
			// The encryption wrapper clears it once the body is sealed:
			// still set, the body would be stored in the clear.
			return errUnsealed
		}
	}
	return nil
}

var errUnsealed = storage.E(storage.OpMessagePost, storage.Internal, "a body to be encrypted reached the driver unencrypted")

func checkLimit(op string, limit int) error {
	if limit <= 0 {
		return badArgument(op)
	}
	return nil
}

func checkClaim(o storage.ClaimOptions) error {
	if o.Limit <= 0 || o.TTL < time.Millisecond || o.Grace < 0 {
		return badArgument(storage.OpClaimCreate)
	}
	return nil
}

func checkClaimUpdate(ttl, grace time.Duration) error {
	if ttl < time.Millisecond || grace < 0 {
		return badArgument(storage.OpClaimUpdate)
	}
	return nil
}
