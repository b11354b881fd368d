package api

import (
	"context"
	"time"

	"sluice.dev/server/internal/storage"
)

// The subscription and delivery stores of downDriver (ops_test.go): every
// call fails as an unreachable backend.

func (downDriver) Subscriptions() storage.SubscriptionStore { return downSubs{} }
func (downDriver) Deliveries() storage.DeliveryStore        { return downDeliveries{} }

type downSubs struct{}

func (downSubs) Create(context.Context, storage.QueueRef, storage.Subscription) (string, bool, error) {
	return "", false, errDown
}
func (downSubs) Get(context.Context, storage.QueueRef, string) (storage.Subscription, error) {
	return storage.Subscription{}, errDown
}
func (downSubs) List(context.Context, storage.QueueRef, storage.ListSubscriptionsOptions) ([]storage.Subscription, string, error) {
	return nil, "", errDown
}
func (downSubs) Update(context.Context, storage.QueueRef, string, storage.SubscriptionUpdate) error {
	return errDown
}
func (downSubs) Confirm(context.Context, storage.QueueRef, string, bool) error { return errDown }
func (downSubs) Delete(context.Context, storage.QueueRef, string) error        { return errDown }
func (downSubs) Purge(context.Context, storage.QueueRef) error                 { return errDown }

type downDeliveries struct{}

func (downDeliveries) Lease(context.Context, int, time.Duration) ([]storage.Delivery, time.Time, error) {
	return nil, time.Time{}, errDown
}
func (downDeliveries) Ack(context.Context, storage.Delivery) error { return errDown }
func (downDeliveries) Retry(context.Context, storage.Delivery, time.Time, string) error {
	return errDown
}
func (downDeliveries) Release(context.Context, storage.Delivery, time.Time) error {
	return errDown
}
func (downDeliveries) Fail(context.Context, storage.Delivery, string) error { return errDown }
func (downDeliveries) Stats(context.Context, storage.QueueRef) (storage.DeliveryStats, error) {
	return storage.DeliveryStats{}, errDown
}
func (downDeliveries) Pending(context.Context) (int64, error) { return 0, errDown }
