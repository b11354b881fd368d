// Package storage defines what sluice-server asks of a backend: small
// interfaces per resource (queues, messages, claims) handed out by a Driver,
// one error model, and a registry of drivers by URI scheme.
//
// Drivers own correctness under concurrency (a claimed message is never handed
// to two live claims, a batch post is all-or-nothing) and expiry (an expired
// message or claim is never returned, without relying on a sweeper). They know
// nothing of HTTP: defaults are resolved in the API layer, out-of-range
// arguments are refused once by the instrumentation wrapper around every
// driver, and drivers report errors as kinds and reasons (errors.go) that the
// API words in one table.
package storage

import (
	"context"
	"encoding/json"
	"time"
)

// QueueRef names a queue inside a project. Every storage call is scoped by
// it, so one project can never reach another project's data.
type QueueRef struct {
	Project string
	Name    string
}

// Metadata is a queue's metadata document, reserved keys (`_default_message_ttl`,
// `_max_claim_count`, ...) included, stored as the client sent it.
type Metadata map[string]any

// Driver hands out the per-resource stores of one backend.
type Driver interface {
	// Queues returns the queue store.
	Queues() QueueStore
	// Messages returns the message store.
	Messages() MessageStore
	// Claims returns the claim store.
	Claims() ClaimStore
	// Subscriptions returns the subscription store.
	Subscriptions() SubscriptionStore
	// Deliveries returns the store of pending notification deliveries.
	Deliveries() DeliveryStore
	// Ping checks that the backend answers; it returns an Unavailable error
	// when it does not.
	Ping(ctx context.Context) error
	// Close releases connections. The driver is unusable afterwards.
	Close() error
}

// QueueInfo is one entry of a queue listing.
type QueueInfo struct {
	Name     string
	Metadata Metadata // filled only when ListQueuesOptions.Detailed
}

// ListQueuesOptions pages a queue listing by name.
type ListQueuesOptions struct {
	// Marker: only queues whose name sorts strictly after it.
	Marker string
	// Limit: at most this many queues (> 0).
	Limit int
	// Detailed: include each queue's metadata.
	Detailed bool
	// Name: only queues whose name contains it (empty: all).
	Name string
}

// QueueStats counts a queue's live messages. Oldest and Newest are nil when
// the queue holds no message.
type QueueStats struct {
	Free    int
	Claimed int
	Total   int
	Oldest  *Message
	Newest  *Message
}

// QueueStore manages queues and their metadata.
type QueueStore interface {
	// Create creates the queue with the given metadata and reports whether it
	// was created; an existing queue is left as it is (created == false).
	Create(ctx context.Context, q QueueRef, meta Metadata) (created bool, err error)
	// Exists reports whether the queue was created explicitly or by a post.
	Exists(ctx context.Context, q QueueRef) (bool, error)
	// GetMetadata returns the queue's stored metadata; a queue that does not
	// exist yields an empty Metadata and no error (queues are lazy).
	GetMetadata(ctx context.Context, q QueueRef) (Metadata, error)
	// SetMetadata replaces the queue's metadata, creating the queue if needed.
	SetMetadata(ctx context.Context, q QueueRef, meta Metadata) error
	// UpdateMetadata is one atomic read-modify-write of an existing queue's
	// metadata: update gets a copy of the stored metadata and returns what
	// to store; no concurrent UpdateMetadata or SetMetadata is lost in
	// between (drivers may call update again on a fresh read). An error
	// from update aborts and comes back unchanged. It returns the stored
	// metadata, or NotFound when the queue does not exist.
	UpdateMetadata(ctx context.Context, q QueueRef, update MetadataUpdate) (Metadata, error)
	// Delete removes the queue with its messages, claims, subscriptions and
	// pending deliveries. Deleting a queue that does not exist is not an
	// error.
	Delete(ctx context.Context, q QueueRef) error
	// List returns the project's queues sorted by name.
	List(ctx context.Context, project string, opts ListQueuesOptions) ([]QueueInfo, error)
	// Stats counts the queue's live (unexpired) messages.
	Stats(ctx context.Context, q QueueRef) (QueueStats, error)
	// Purge removes every message and claim of the queue, keeping the queue,
	// its metadata and its subscriptions. Deliveries already recorded for
	// the purged messages are still sent.
	Purge(ctx context.Context, q QueueRef) error
}

// NewMessage is a message as posted, with TTL and delay already resolved
// from the queue's defaults by the caller.
type NewMessage struct {
	TTL   time.Duration
	Delay time.Duration
	Body  json.RawMessage
	// Encrypt asks for the body to be stored encrypted (the queue has
	// _enable_encrypt_messages). The encryption wrapper (storage/encrypt)
	// replaces Body with its envelope and clears Encrypt, so no driver
	// ever sees it set: the instrumentation wrapper refuses a post that
	// still has it rather than store the body in the clear.
	Encrypt bool
}

// Message is a stored message as seen at the time it was read.
type Message struct {
	ID       string
	Body     json.RawMessage
	TTL      time.Duration
	Created  time.Time
	ClientID string // the Client-ID that posted it
	// DelayUntil is when the message becomes visible (zero: not delayed).
	DelayUntil time.Time
	// ClaimID is the live claim holding the message ("" when free).
	ClaimID string
	// ClaimExpires is when ClaimID lapses (zero when free).
	ClaimExpires time.Time
	// ClaimCount is how many claims have held the message so far.
	ClaimCount int
	// Unreadable: the body is stored encrypted and no configured key
	// decrypts it (the key was dropped, or the bytes were changed); Body
	// is nil. Set by the encryption wrapper, for this message only.
	Unreadable bool
}

// ListMessagesOptions filters and pages a message listing. Messages come
// oldest first. Marker is an opaque position returned by a previous List,
// or a message id, Zaqar's own marker form: the listing resumes strictly
// after that message, and from the start when the id is no longer stored
// (as Zaqar does). Anything else is Invalid.
type ListMessagesOptions struct {
	Marker string
	// Limit: at most this many messages (> 0).
	Limit int
	// ClientID is the caller; with Echo false its own messages are skipped.
	ClientID       string
	Echo           bool
	IncludeClaimed bool
	IncludeDelayed bool
}

// Remover is a MessageStore whose delete also says whether it removed the
// message (false: it was absent, or lapsed). The pooled driver needs it
// during a move: a delete that removed the message on the source, where it
// was visible and so at home, need not ask the target (docs/pooling.md, "The
// invariant"); one that found nothing there must.
type Remover interface {
	Remove(ctx context.Context, q QueueRef, id, claimID string) (removed bool, err error)
}

// MessageStore posts, reads and deletes messages.
type MessageStore interface {
	// Post appends the messages to the queue, creating the queue if needed.
	// All of them are stored or none is; IDs come back in the same order.
	// In the same step it records a Delivery of every message to every
	// deliverable live subscription of the queue.
	Post(ctx context.Context, q QueueRef, clientID string, msgs []NewMessage) ([]string, error)
	// List returns live messages after opts.Marker and the marker of the next
	// page ("" when there is none). A full page always carries a marker,
	// even when nothing follows it yet.
	List(ctx context.Context, q QueueRef, opts ListMessagesOptions) (msgs []Message, next string, err error)
	// Get returns one live message, or NotFound (also for a malformed id).
	Get(ctx context.Context, q QueueRef, id string) (Message, error)
	// GetMany returns the live messages among ids, skipping unknown ones.
	GetMany(ctx context.Context, q QueueRef, ids []string) ([]Message, error)
	// Delete removes a message. A message held by a live claim needs that
	// claim's id: without one the error is Forbidden (ErrClaimed), with
	// another one it is Invalid (ErrNotHolder), and any claim id for a free
	// message is Invalid too (ErrNotClaimed). Deleting an absent message is
	// not an error.
	Delete(ctx context.Context, q QueueRef, id, claimID string) error
	// DeleteMany removes the given messages that are not held by a live claim
	// (or are held by claimID when it is not empty), all in one atomic step.
	DeleteMany(ctx context.Context, q QueueRef, ids []string, claimID string) error
	// Pop removes and returns up to limit of the oldest free, visible messages.
	Pop(ctx context.Context, q QueueRef, limit int) ([]Message, error)
}

// DeadLetter is the queue's dead-letter policy, resolved from its metadata
// by the caller: a message already claimed MaxClaimCount times is moved to
// Queue (same project) with TTL instead of being claimed again. The moved
// message starts a fresh life there (claim count 0, at the back of the
// queue), also when Queue is the claimed queue itself, and the claim that
// moved it does not take it. A policy without a Queue is no policy: drivers
// never drop a message for its claim count (Zaqar acts only when both
// _max_claim_count and _dead_letter_queue are set).
type DeadLetter struct {
	MaxClaimCount int
	Queue         string
	TTL           time.Duration // 0 : keep the message's own TTL
}

// Active reports whether the policy moves anything: it needs both a claim
// limit and a queue to move to.
func (dl *DeadLetter) Active() bool { return dl != nil && dl.MaxClaimCount > 0 && dl.Queue != "" }

// ClaimOptions parameterise a new claim.
type ClaimOptions struct {
	TTL   time.Duration
	Grace time.Duration
	Limit int
	// DeadLetter is nil when the queue has no dead-letter policy.
	DeadLetter *DeadLetter
}

// Claim is a claim as seen at the time it was read.
type Claim struct {
	ID       string
	TTL      time.Duration
	Created  time.Time
	Messages []Message
}

// ClaimStore claims batches of free messages for exclusive processing.
type ClaimStore interface {
	// Create claims up to opts.Limit of the oldest free, visible messages.
	// A message's expiry is raised to at least claim TTL + grace. When none
	// is claimable it returns a Claim with no ID and no messages.
	Create(ctx context.Context, q QueueRef, opts ClaimOptions) (Claim, error)
	// Get returns a live claim with the messages it still holds.
	Get(ctx context.Context, q QueueRef, id string) (Claim, error)
	// Update renews a live claim's TTL (counted from now) and grace.
	Update(ctx context.Context, q QueueRef, id string, ttl, grace time.Duration) error
	// Delete releases a claim; its messages become free again. Releasing an
	// absent claim is not an error.
	Delete(ctx context.Context, q QueueRef, id string) error
}

// Clock tells the time. Drivers take it from their Options so tests can move
// time forward to expire messages and claims.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
