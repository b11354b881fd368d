package storage

import (
	"context"
	"errors"
	"time"
)

// Moving a queue between backends while it is in use. The protocol, and the
// invariant that makes it safe, are in docs/pooling.md ("Moving a queue");
// this file is what each driver offers for its part. The pooled driver drives
// it: the source is the backend the queue lives on, the target the backend it
// moves to, and neither knows the other.
//
// Every call is idempotent, so a mover that crashed anywhere resumes by
// calling the same steps again.

// Migrator is implemented by drivers that can take part in a move. The
// instrumentation wrapper passes it through.
type Migrator interface {
	Migrations() MigrationStore
}

// Sealed is what Seal reports about the source queue.
type Sealed struct {
	// Seq is the queue's highest message sequence number so far: messages
	// posted on the target after the seal must sort after every message of
	// the source, so Prepare raises the target's sequence above it.
	Seq int64
	// Metadata is the queue's metadata at the seal, for Prepare.
	Metadata Metadata
	// Exists reports whether the queue exists on the source at all.
	Exists bool
}

// MovedMessage is one message with everything that must survive the move.
type MovedMessage struct {
	Message
	// Seq is the message's position in its queue (FIFO order).
	Seq int64
}

// MovedClaim is one live claim with everything that must survive the move.
type MovedClaim struct {
	ID      string
	TTL     time.Duration
	Grace   time.Duration
	Created time.Time
	Expires time.Time
}

// Batch is one step of a move: messages, newest first, and every live claim
// that holds any of them together with all of that claim's messages, so a
// claim is never split between backends. A batch is always a suffix of the
// source queue in Seq order: when a claim also holds older messages, every
// message from its oldest one on comes too, so what stays on the source
// still sorts before everything moved (FIFO).
type Batch struct {
	Messages []MovedMessage
	Claims   []MovedClaim
}

// Empty reports whether the batch moves nothing.
func (b Batch) Empty() bool { return len(b.Messages) == 0 && len(b.Claims) == 0 }

// MigrationStore is one backend's part in moving a queue. On the source:
// Seal, Take, InTransit, Settle, Finish (and Unseal to roll back before
// anything was taken). On the target: Prepare, Import, Done. How the other
// stores answer on a source while its queue moves (calls with many ids,
// refused steps, the tombstone) is spelled out, and checked for every
// driver, by storagetest.RunMigration.
type MigrationStore interface {
	// Seal marks the queue as moving to target. From then on Post on this
	// backend answers Moved(target); every other call keeps working on the
	// messages still here. Sealing a sealed queue reports the same Sealed.
	Seal(ctx context.Context, q QueueRef, target string) (Sealed, error)
	// Unseal removes the seal. It is refused (Conflict) once a batch was
	// taken: from then on the move can only go forward.
	Unseal(ctx context.Context, q QueueRef) error

	// Take moves up to limit of the newest messages not yet moved, with the
	// claims holding them (see Batch), into transit, in one atomic step, and
	// returns them. Calls naming a message in transit, and new claims,
	// answer Moving until Settle; List still shows them, after every
	// message left here. At most one batch is in transit: while one is,
	// Take returns it again.
	Take(ctx context.Context, q QueueRef, limit int) (Batch, error)
	// InTransit returns the batch in transit (empty when none), so a mover
	// that crashed between Take and Settle imports it again.
	InTransit(ctx context.Context, q QueueRef) (Batch, error)
	// Settle ends the transit of b: from then on calls naming its messages
	// or claims answer Moved(target) here. A Settle (or an Import) made of
	// several writes goes newest first, so a listing never shows a gap in
	// the middle of the batch (storagetest "Migration/ListsRaceMove").
	Settle(ctx context.Context, q QueueRef, b Batch) error
	// Finish removes what is left of the queue on the source once every
	// message was moved, and leaves a tombstone: for ttl, every call on the
	// queue here answers Moved(target), so a server routing with a stale
	// placement is sent on instead of reading an empty queue.
	Finish(ctx context.Context, q QueueRef, ttl time.Duration) error

	// Prepare creates the queue on the target with meta and raises its
	// sequence to at least floor. Preparing twice changes nothing. A
	// tombstone an earlier move away left here goes: the queue comes back.
	Prepare(ctx context.Context, q QueueRef, meta Metadata, floor int64) error
	// Import stores b on the target with ids, bodies, TTLs, creation times,
	// delays, claims and claim counts as they were, each message at its
	// Seq. It is idempotent: a message or claim imported before is never
	// stored again, even when it was deleted since (the target remembers the
	// ids it imported until Done).
	Import(ctx context.Context, q QueueRef, b Batch) error
	// Done drops the target's record of imported ids.
	Done(ctx context.Context, q QueueRef) error

	// Deliveries passes the queue's pending notification deliveries on
	// the source to f, at most limit at a time, for the target's
	// ImportDeliveries: the mover calls it once the last batch settled and
	// before Finish, which drops them here. It changes nothing: the source
	// hands them out until Finish (the pooled driver settles a delivery on
	// both sides while the queue moves, so one sent meanwhile is not sent
	// again by the target). A delivery pending throughout the call is
	// passed once; one settled during it may be passed or not. A finished
	// source passes nothing.
	Deliveries(ctx context.Context, q QueueRef, limit int, f func([]MovedDelivery) error) error
	// ImportDeliveries records ds on the target as they were: body,
	// expiry, attempts, due at Due. One whose message expired, whose
	// subscription is not live here, or that is pending here already is
	// skipped, so importing again records nothing twice.
	ImportDeliveries(ctx context.Context, q QueueRef, ds []MovedDelivery) error
	// ImportDeliveryCounts adds the source's running counters (st, its
	// Stats: sent, given up, and per subscription live here) to the
	// queue's here, and takes its last error where it is the later one.
	// It adds once per move: called again with the same token it changes
	// nothing, so a mover that resumes does not count twice.
	ImportDeliveryCounts(ctx context.Context, q QueueRef, st DeliveryStats, token string) error

	// StorageID names the database this store keeps its queues in, with a
	// mark the first call leaves there: two stores reaching one database
	// (two URIs for one Redis, say) give one id, whatever their URIs say.
	// A move between them would copy the queue onto itself and then
	// finish it there, so the mover refuses it.
	StorageID(ctx context.Context) (string, error)
}

// MovedDelivery is one pending notification delivery with everything that
// must survive the move (Delivery's Queue and Lease are not used).
type MovedDelivery struct {
	Delivery
	// Due is when it is next handed out: its next attempt, or the end of
	// the lease that holds it, so a send under way on the source is not
	// started again on the target before that lease lapses.
	Due time.Time
}

// SettleTaker is implemented by migration stores that can settle a batch
// and take the next one in one call (Redis: one script, one round trip
// instead of two). It does what Settle(settled) then Take(limit) do, with
// nothing in between; an error from the settle half leaves the batch in
// transit, as Settle's would.
type SettleTaker interface {
	SettleAndTake(ctx context.Context, q QueueRef, settled Batch, limit int) (Batch, error)
}

// Reasons a driver gives while a queue moves. The pooled driver acts on
// them; they reach a client only if a server without pooling meets a moved
// queue, as 503 with Retry-After (Moving) or 409 (Moved).
var (
	// ErrMoving: the call names a message or claim in transit, or claims
	// from a queue with a batch in transit; try again shortly.
	ErrMoving = errors.New("queue is moving; try again shortly")
)

// Moved is the cause a source gives for a call it no longer serves: the
// queue, or the messages the call names, now live on Target.
type Moved struct{ Target string }

func (m Moved) Error() string { return "queue moved to " + m.Target }

// MovedTo returns the target of a Moved error in err's chain.
func MovedTo(err error) (string, bool) {
	var m Moved
	if errors.As(err, &m) {
		return m.Target, true
	}
	return "", false
}

// ImportableDeliveries is what a target's ImportDeliveries records of ds:
// the deliveries whose message is still live at now and whose ids have the
// form every driver hands out (a Redis key joins them with separators).
// Whether the subscription is live there is each driver's to check.
func ImportableDeliveries(ds []MovedDelivery, now time.Time) []MovedDelivery {
	out := make([]MovedDelivery, 0, len(ds))
	for _, d := range ds {
		if d.Expires.After(now) && IsMessageID(d.MessageID) && IsMessageID(d.SubscriptionID) {
			out = append(out, d)
		}
	}
	return out
}

// PassDeliveries passes ds to f at most limit at a time, in the order
// given; the drivers' Deliveries use it once they hold the queue's whole
// list.
func PassDeliveries(ds []MovedDelivery, limit int, f func([]MovedDelivery) error) error {
	if limit < 1 {
		return E(OpMigrateDeliveries, Invalid, ErrArgument)
	}
	for len(ds) > 0 {
		k := min(limit, len(ds))
		if err := f(ds[:k]); err != nil {
			return err
		}
		ds = ds[k:]
	}
	return nil
}
