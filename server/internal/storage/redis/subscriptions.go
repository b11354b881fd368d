package redis

import (
	"context"
	_ "embed"
	"time"

	"sluice.dev/server/internal/storage"
)

// Subscriptions live under their queue's scope (see lib.lua for the keys),
// so the post script finds them without a second round trip; they never
// touch the queue hash or the project index, so subscribing does not
// create the queue.
type subscriptionStore struct{ d *Driver }

var (
	//go:embed sub_create.lua
	subCreateSrc string
	subCreate    = register("sub_create", subCreateSrc)
	//go:embed sub_list.lua
	subListSrc string
	subList    = register("sub_list", subListSrc)
	//go:embed sub_update.lua
	subUpdateSrc string
	subUpdate    = register("sub_update", subUpdateSrc)
	//go:embed sub_confirm.lua
	subConfirmSrc string
	subConfirm    = register("sub_confirm", subConfirmSrc)
	//go:embed sub_delete.lua
	subDeleteSrc string
	subDelete    = register("sub_delete", subDeleteSrc)
)

func (s subscriptionStore) Create(ctx context.Context, q storage.QueueRef, sub storage.Subscription) (string, bool, error) {
	const op = storage.OpSubscriptionCreate
	if sub.TTL <= 0 {
		return "", false, storage.E(op, storage.Invalid, "subscription ttl must be positive")
	}
	id, err := storage.CreatedSubscriptionID(sub)
	if err != nil {
		return "", false, err
	}
	opts, err := encodeMeta(op, sub.Options)
	if err != nil {
		return "", false, err
	}
	now := s.d.clock.Now()
	expires, err := storage.CreatedExpiry(sub, now)
	if err != nil {
		return "", false, err
	}
	res, err := subCreate.Run(ctx, s.d.fc, []string{scope(q)}, now.UnixMilli(), id,
		sub.Subscriber, sub.TTL.Milliseconds(), opts, flag(sub.NeedsConfirmation), expires.UnixMilli()).Slice()
	if err != nil {
		return "", false, wrap(op, err)
	}
	if len(res) != 2 {
		return "", false, storage.E(op, storage.Internal, "malformed script reply")
	}
	return toString(res[0]), toInt(res[1]) == 1, nil
}

// parseSubscription reads {id, subscriber, ttl, options, expiry,
// confirmed, needs confirmation}.
func parseSubscription(op string, v any) (storage.Subscription, error) {
	f, ok := v.([]any)
	if !ok || len(f) != 7 {
		return storage.Subscription{}, storage.E(op, storage.Internal, "malformed script reply")
	}
	opts, err := decodeMeta(op, toString(f[3]))
	if err != nil {
		return storage.Subscription{}, err
	}
	return storage.Subscription{
		ID: toString(f[0]), Subscriber: toString(f[1]),
		TTL: time.Duration(toInt(f[2])) * time.Millisecond, Options: opts,
		Expires: msTime(toInt(f[4])), Confirmed: toString(f[5]) == "1", NeedsConfirmation: toString(f[6]) == "1",
	}, nil
}

func (s subscriptionStore) Get(ctx context.Context, q storage.QueueRef, id string) (storage.Subscription, error) {
	const op = storage.OpSubscriptionGet
	h, err := s.d.c.HMGet(ctx, scope(q)+":s:"+id, "s", "t", "o", "e", "c", "n").Result()
	if err != nil {
		return storage.Subscription{}, wrap(op, err)
	}
	if h[0] == nil || toInt(h[3]) <= s.d.nowMS() {
		return storage.Subscription{}, storage.E(op, storage.NotFound, "no such subscription")
	}
	return parseSubscription(op, append([]any{id}, h...))
}

func (s subscriptionStore) List(ctx context.Context, q storage.QueueRef, opts storage.ListSubscriptionsOptions) ([]storage.Subscription, string, error) {
	const op = storage.OpSubscriptionList
	if opts.Limit <= 0 {
		return nil, "", storage.E(op, storage.Invalid, "limit must be positive")
	}
	res, err := subList.Run(ctx, s.d.fc, []string{scope(q)}, s.d.nowMS(), opts.Marker, opts.Limit+1).Slice()
	if err != nil {
		return nil, "", wrap(op, err)
	}
	out := make([]storage.Subscription, 0, len(res))
	for _, v := range res {
		sub, err := parseSubscription(op, v)
		if err != nil {
			return nil, "", err
		}
		out = append(out, sub)
	}
	next := ""
	if len(out) > opts.Limit {
		out = out[:opts.Limit]
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

func (s subscriptionStore) Update(ctx context.Context, q storage.QueueRef, id string, u storage.SubscriptionUpdate) error {
	const op = storage.OpSubscriptionUpdate
	var sub, ttl, opts string
	if u.Subscriber != nil {
		sub = *u.Subscriber
	}
	if u.TTL != nil {
		if *u.TTL <= 0 {
			return storage.E(op, storage.Invalid, "subscription ttl must be positive")
		}
		ttl = itoa(u.TTL.Milliseconds())
	}
	if u.Options != nil {
		var err error
		if opts, err = encodeMeta(op, u.Options); err != nil {
			return err
		}
	}
	n, err := subUpdate.Run(ctx, s.d.fc, []string{scope(q)}, s.d.nowMS(), id,
		flag(u.Subscriber != nil), sub, flag(u.TTL != nil), ttl, flag(u.Options != nil), opts).Int64()
	if err != nil {
		return wrap(op, err)
	}
	switch n {
	case 1:
		return storage.E(op, storage.NotFound, "no such subscription")
	case 2:
		return storage.E(op, storage.Conflict, "the queue already has this subscriber")
	}
	return nil
}

func (s subscriptionStore) Confirm(ctx context.Context, q storage.QueueRef, id string, confirmed bool) error {
	const op = storage.OpSubscriptionConfirm
	n, err := subConfirm.Run(ctx, s.d.fc, []string{scope(q)}, s.d.nowMS(), id, flag(confirmed)).Int64()
	if err != nil {
		return wrap(op, err)
	}
	if n == 1 {
		return storage.E(op, storage.NotFound, "no such subscription")
	}
	return nil
}

func (s subscriptionStore) Delete(ctx context.Context, q storage.QueueRef, id string) error {
	if id == "" {
		return nil
	}
	if err := s.d.wipeDeliveries(ctx, storage.OpSubscriptionDelete, scope(q), id); err != nil {
		return err
	}
	return wrap(storage.OpSubscriptionDelete, subDelete.Run(ctx, s.d.fc, []string{scope(q)}, id).Err())
}

func (s subscriptionStore) Purge(ctx context.Context, q storage.QueueRef) error {
	if err := s.d.wipeDeliveries(ctx, storage.OpSubscriptionPurge, scope(q), ""); err != nil {
		return err
	}
	return wrap(storage.OpSubscriptionPurge, subDelete.Run(ctx, s.d.fc, []string{scope(q)}, "").Err())
}

var (
	//go:embed sub_wipe.lua
	subWipeSrc string
	subWipe    = register("sub_wipe", subWipeSrc)
)

// wipeDeliveries drops the pending deliveries of subscription id (""
// every subscription of the queue) wipeStep at a time before the caller
// deletes the subscriptions at once: a subscriber down for hours leaves a
// backlog that one script took seconds to drop, holding the shard. It
// takes as many steps as the backlog it first found needs, so posts
// racing it cannot keep it going; what they add goes with the delete.
func (d *Driver) wipeDeliveries(ctx context.Context, op, scope, id string) error {
	for steps, most := 0, 1; steps < most; steps++ {
		res, err := subWipe.Run(ctx, d.fc, []string{scope}, id, wipeStep).Slice()
		if err != nil {
			return wrap(op, err)
		}
		if len(res) != 2 {
			return storage.E(op, storage.Internal, "malformed script reply")
		}
		if toInt(res[0]) < wipeStep {
			return nil
		}
		if steps == 0 {
			most = 1 + int((toInt(res[1])+wipeStep-1)/wipeStep)
		}
	}
	return nil
}
