package storage

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Subscription is a subscriber of a queue as stored. Subscriptions are scoped
// by the QueueRef like everything else, but they do not need the queue to
// exist (Zaqar accepts a subscription to a queue never created) and never
// create it: a subscribed queue does not appear in the queue listing.
type Subscription struct {
	ID         string
	Subscriber string // http(s)://..., trust+http(s)://... or mailto:...
	TTL        time.Duration
	Options    Metadata // the client's JSON object, stored as sent
	// Expires is when the subscription lapses: set to now+TTL by Create and
	// by an Update that changes the TTL.
	Expires   time.Time
	Confirmed bool
	// NeedsConfirmation: messages are recorded for delivery only once
	// Confirmed is true. The API sets it at creation from the server's
	// require-confirmation option, so the rule travels with the subscription.
	NeedsConfirmation bool
}

// Age is how long ago the subscription was created or last given a TTL, the
// "age" Zaqar shows.
func (s Subscription) Age(now time.Time) time.Duration {
	return s.TTL - s.Expires.Sub(now)
}

// Deliverable reports whether posted messages are recorded for it.
func (s Subscription) Deliverable() bool { return s.Confirmed || !s.NeedsConfirmation }

// SubscriptionUpdate changes some fields of a subscription; nil fields stay.
type SubscriptionUpdate struct {
	Subscriber *string
	TTL        *time.Duration // also restarts the subscription's lifetime
	Options    Metadata
}

// ListSubscriptionsOptions pages a subscription listing by id.
type ListSubscriptionsOptions struct {
	// Marker: only subscriptions whose id sorts strictly after it.
	Marker string
	// Limit: at most this many (> 0).
	Limit int
}

// SubscriptionStore manages the subscriptions of queues. Expired
// subscriptions are never returned and never receive deliveries.
type SubscriptionStore interface {
	// Create stores sub and returns its id: sub.ID when set (a move
	// re-creates a queue's subscriptions under their ids; a malformed one
	// is Invalid, checked first), else a new one. Expires is kept when set,
	// else assigned from TTL (CreatedExpiry). When a live subscription of the queue already has the same
	// subscriber, nothing changes and its id comes back with created ==
	// false (Zaqar's idempotent create).
	Create(ctx context.Context, q QueueRef, sub Subscription) (id string, created bool, err error)
	// Get returns a live subscription, or NotFound (also for a malformed id).
	Get(ctx context.Context, q QueueRef, id string) (Subscription, error)
	// List returns live subscriptions sorted by id (ids sort in creation
	// order) and the marker of the next page ("" when none can follow).
	List(ctx context.Context, q QueueRef, opts ListSubscriptionsOptions) (subs []Subscription, next string, err error)
	// Update applies u to a live subscription, or returns NotFound. A new
	// subscriber that another live subscription of the queue already has is
	// a Conflict.
	Update(ctx context.Context, q QueueRef, id string, u SubscriptionUpdate) error
	// Confirm sets the Confirmed flag of a live subscription, or NotFound.
	Confirm(ctx context.Context, q QueueRef, id string, confirmed bool) error
	// Delete removes a subscription and its pending deliveries. Deleting an
	// absent one is not an error.
	Delete(ctx context.Context, q QueueRef, id string) error
	// Purge deletes every subscription of the queue. QueueStore.Delete does
	// the same as part of deleting the queue.
	Purge(ctx context.Context, q QueueRef) error
}

// NewSubscriptionID returns a subscription id: a UUIDv7, so that ids sort in
// creation order and id paging lists subscriptions as they were made.
func NewSubscriptionID() string {
	u, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return u.String()
}

// CreatedSubscriptionID is the id SubscriptionStore.Create stores sub
// under: sub.ID when set, else a new one.
func CreatedSubscriptionID(sub Subscription) (string, error) {
	if sub.ID == "" {
		return NewSubscriptionID(), nil
	}
	if !IsMessageID(sub.ID) { // the same form: a UUID
		return "", E(OpSubscriptionCreate, Invalid, "malformed subscription id")
	}
	return sub.ID, nil
}

// CreatedExpiry is when a subscription SubscriptionStore.Create stores
// lapses: sub.Expires when set (a move re-creates a queue's subscriptions
// with the source's TTL and expiry, so their ttl and age go on as they
// were), else now+TTL. A given expiry not after now is Invalid.
func CreatedExpiry(sub Subscription, now time.Time) (time.Time, error) {
	if sub.Expires.IsZero() {
		return now.Add(sub.TTL), nil
	}
	if !sub.Expires.After(now) {
		return time.Time{}, E(OpSubscriptionCreate, Invalid, "subscription expiry has passed")
	}
	return sub.Expires, nil
}

// Delivery is one (message, subscription) notification still to be sent.
// MessageStore.Post records one for every deliverable live subscription of
// the queue in the same atomic step as the messages, so a message that was
// acknowledged always has its deliveries; they live on when the message is
// deleted or claimed, until they are sent or the message's lifetime ends.
type Delivery struct {
	Queue          QueueRef
	MessageID      string
	SubscriptionID string
	Body           json.RawMessage // the message body as posted
	TTL            time.Duration   // the message's TTL
	Posted         time.Time
	Expires        time.Time // the message's expiry: given up after it
	// Attempts is how many sends failed before this lease.
	Attempts int
	// Lease is the token of the lease this copy was handed out under; Retry
	// is ignored once the lease has moved on to another caller.
	Lease string
	// Unreadable: as Message.Unreadable, the body could not be decrypted
	// and is nil.
	Unreadable bool
}

// ID is the delivery's stable identity, the same on every attempt and every
// replica, so receivers can drop duplicates.
func (d Delivery) ID() string { return d.MessageID + "." + d.SubscriptionID }

// SubscriptionDeliveries counts one subscription's deliveries.
type SubscriptionDeliveries struct {
	ID          string
	Subscriber  string
	Pending     int64
	Failed      int64
	Delivered   int64
	LastError   string
	LastErrorAt time.Time // zero: no error recorded
}

// DeliveryStats counts a queue's deliveries. Pending is exact (live
// deliveries still to be sent); Delivered and Failed (given up because the
// message or the subscription expired first) are running counters.
type DeliveryStats struct {
	Pending       int64
	Failed        int64
	Delivered     int64
	LastError     string
	LastErrorAt   time.Time
	Subscriptions []SubscriptionDeliveries // live subscriptions, by id
}

// DeliveryStore hands deliveries to senders under leases, so that several
// server replicas never send the same delivery at once, and a replica that
// dies holding one only delays it until the lease lapses.
type DeliveryStore interface {
	// Lease takes up to limit deliveries that are due (their next attempt
	// time has come and no live lease holds them) from every queue of the
	// backend, oldest due first, and holds them for hold: until then no
	// other Lease returns them. Deliveries whose message expired or whose
	// subscription is gone are dropped (counted as failed) instead.
	//
	// next is when the earliest delivery still pending after the call
	// falls due: its next attempt, or the end of the lease that holds it
	// (this call's included). It is zero when none is pending, and at or
	// before the call's now when the call left due deliveries behind (it
	// reached limit, or a backend could not be asked). Until next, a Lease
	// finds nothing unless a post records new deliveries; a sender can
	// sleep until then instead of asking again.
	Lease(ctx context.Context, limit int, hold time.Duration) (ds []Delivery, next time.Time, err error)
	// Ack records a successful send: the delivery is removed and counted
	// delivered. Acking an absent delivery is not an error.
	Ack(ctx context.Context, d Delivery) error
	// Retry records a failed attempt: the delivery stays pending, due again
	// at at, with errText as its subscription's last error. It does nothing
	// when d.Lease no longer holds the delivery.
	Retry(ctx context.Context, d Delivery, at time.Time, errText string) error
	// Release hands a leased delivery back without counting an attempt
	// (the replica could not start it in time): due again at at. It does
	// nothing when d.Lease no longer holds the delivery.
	Release(ctx context.Context, d Delivery, at time.Time) error
	// Fail gives a delivery up (its message or subscription expires before
	// the next attempt): removed and counted failed.
	Fail(ctx context.Context, d Delivery, errText string) error
	// Stats counts the queue's deliveries.
	Stats(ctx context.Context, q QueueRef) (DeliveryStats, error)
	// Pending counts live pending deliveries over the whole backend, for
	// scrape-time metrics.
	Pending(ctx context.Context) (int64, error)
}
