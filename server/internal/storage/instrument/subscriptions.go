package instrument

import (
	"context"
	"time"

	"sluice.dev/server/internal/storage"
)

type subscriptions struct {
	s storage.SubscriptionStore
	r *recorder
}

func (x subscriptions) Create(ctx context.Context, q storage.QueueRef, sub storage.Subscription) (string, bool, error) {
	start := time.Now()
	id, made, err := x.s.Create(ctx, q, sub)
	x.r.done(opSubCreate, start, err)
	return id, made, err
}

func (x subscriptions) Get(ctx context.Context, q storage.QueueRef, id string) (storage.Subscription, error) {
	start := time.Now()
	sub, err := x.s.Get(ctx, q, id)
	x.r.done(opSubGet, start, err)
	return sub, err
}

func (x subscriptions) List(ctx context.Context, q storage.QueueRef, opts storage.ListSubscriptionsOptions) ([]storage.Subscription, string, error) {
	start := time.Now()
	subs, next, err := x.s.List(ctx, q, opts)
	x.r.done(opSubList, start, err)
	return subs, next, err
}

func (x subscriptions) Update(ctx context.Context, q storage.QueueRef, id string, u storage.SubscriptionUpdate) error {
	start := time.Now()
	err := x.s.Update(ctx, q, id, u)
	x.r.done(opSubUpdate, start, err)
	return err
}

func (x subscriptions) Confirm(ctx context.Context, q storage.QueueRef, id string, confirmed bool) error {
	start := time.Now()
	err := x.s.Confirm(ctx, q, id, confirmed)
	x.r.done(opSubConfirm, start, err)
	return err
}

func (x subscriptions) Delete(ctx context.Context, q storage.QueueRef, id string) error {
	start := time.Now()
	err := x.s.Delete(ctx, q, id)
	x.r.done(opSubDelete, start, err)
	return err
}

func (x subscriptions) Purge(ctx context.Context, q storage.QueueRef) error {
	start := time.Now()
	err := x.s.Purge(ctx, q)
	x.r.done(opSubPurge, start, err)
	return err
}

type deliveries struct {
	s storage.DeliveryStore
	r *recorder
}

func (x deliveries) Lease(ctx context.Context, limit int, hold time.Duration) ([]storage.Delivery, time.Time, error) {
	start := time.Now()
	out, next, err := x.s.Lease(ctx, limit, hold)
	x.r.done(opDlvLease, start, err)
	return out, next, err
}

func (x deliveries) Ack(ctx context.Context, d storage.Delivery) error {
	start := time.Now()
	err := x.s.Ack(ctx, d)
	x.r.done(opDlvAck, start, err)
	return err
}

func (x deliveries) Retry(ctx context.Context, d storage.Delivery, at time.Time, errText string) error {
	start := time.Now()
	err := x.s.Retry(ctx, d, at, errText)
	x.r.done(opDlvRetry, start, err)
	return err
}

func (x deliveries) Release(ctx context.Context, d storage.Delivery, at time.Time) error {
	start := time.Now()
	err := x.s.Release(ctx, d, at)
	x.r.done(opDlvRelease, start, err)
	return err
}

func (x deliveries) Fail(ctx context.Context, d storage.Delivery, errText string) error {
	start := time.Now()
	err := x.s.Fail(ctx, d, errText)
	x.r.done(opDlvFail, start, err)
	return err
}

func (x deliveries) Stats(ctx context.Context, q storage.QueueRef) (storage.DeliveryStats, error) {
	start := time.Now()
	st, err := x.s.Stats(ctx, q)
	x.r.done(opDlvStats, start, err)
	return st, err
}

func (x deliveries) Pending(ctx context.Context) (int64, error) {
	start := time.Now()
	n, err := x.s.Pending(ctx)
	x.r.done(opDlvPending, start, err)
	return n, err
}
