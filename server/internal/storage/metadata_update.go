package storage

import "context"

// MetadataUpdate computes a queue's new metadata from its current one (a
// copy it may change). It must not keep or share either map, and may be
// called more than once for one update. Values are opaque JSON to the
// storage layer: drivers store what it returns as they would for
// SetMetadata.
type MetadataUpdate func(current Metadata) (Metadata, error)

// swapAttempts bounds the compare-and-swap loop. Each round at least one
// writer of a contended queue wins, so a round per concurrent writer is
// enough; past this the backend is too busy and the caller may retry.
const swapAttempts = 100

// MetadataCAS is how a driver that keeps metadata as one encoded value
// reads and conditionally replaces it.
type MetadataCAS struct {
	// Load returns the stored encoding, or found == false when the queue
	// does not exist.
	Load func(ctx context.Context) (raw string, found bool, err error)
	// Swap stores next only if the stored encoding is still prev; it
	// reports swapped == false when it was not, found == false when the
	// queue is gone.
	Swap func(ctx context.Context, prev, next string) (swapped, found bool, err error)
	// Decode and Encode convert between the stored text and Metadata.
	Decode func(raw string) (Metadata, error)
	Encode func(Metadata) (string, error)
}

// SwapMetadata runs update as an optimistic read-modify-write over cas:
// read, compute, store if unchanged, else start over on a fresh read. The
// errors of cas come back as they are (drivers wrap them with their kind).
func SwapMetadata(ctx context.Context, op string, cas MetadataCAS, update MetadataUpdate) (Metadata, error) {
	for range swapAttempts {
		raw, found, err := cas.Load(ctx)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, E(op, NotFound, nil)
		}
		cur, err := cas.Decode(raw)
		if err != nil {
			return nil, err
		}
		next, err := update(cur)
		if err != nil {
			return nil, err
		}
		if next == nil {
			next = Metadata{}
		}
		enc, err := cas.Encode(next)
		if err != nil {
			return nil, err
		}
		swapped, found, err := cas.Swap(ctx, raw, enc)
		switch {
		case err != nil:
			return nil, err
		case !found:
			return nil, E(op, NotFound, nil)
		case swapped:
			return next, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, E(op, Unavailable, err)
		}
	}
	return nil, E(op, Unavailable, "metadata kept changing under concurrent updates")
}
