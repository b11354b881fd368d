package redis

import (
	"context"
	_ "embed"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"sluice.dev/server/internal/storage"
)

// dueKey is the one index of due deliveries of the whole Redis, so that a
// lease is one script call whatever the number of queues.
const dueKey = "s:due"

type deliveryStore struct{ d *Driver }

var (
	//go:embed dlv_lease.lua
	dlvLeaseSrc string
	dlvLease    = register("dlv_lease", dlvLeaseSrc)
	//go:embed dlv_settle.lua
	dlvSettleSrc string
	dlvSettle    = register("dlv_settle", dlvSettleSrc)
	//go:embed dlv_stats.lua
	dlvStatsSrc string
	dlvStats    = register("dlv_stats", dlvStatsSrc)
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// parseScope inverts scope(): "s:{<n>:<project><m>:<queue>}".
func parseScope(s string) (storage.QueueRef, bool) {
	if !strings.HasPrefix(s, "s:{") || !strings.HasSuffix(s, "}") {
		return storage.QueueRef{}, false
	}
	rest := s[3 : len(s)-1]
	var parts [2]string
	for i := range parts {
		n, after, ok := strings.Cut(rest, ":")
		l, err := strconv.Atoi(n)
		if !ok || err != nil || l < 0 || l > len(after) {
			return storage.QueueRef{}, false
		}
		parts[i], rest = after[:l], after[l:]
	}
	return storage.QueueRef{Project: parts[0], Name: parts[1]}, rest == ""
}

func (s deliveryStore) Lease(ctx context.Context, limit int, hold time.Duration) ([]storage.Delivery, time.Time, error) {
	const op = storage.OpDeliveryLease
	if limit <= 0 || hold <= 0 {
		return nil, time.Time{}, storage.E(op, storage.Invalid, "limit and hold must be positive")
	}
	token := storage.NewID()
	res, err := dlvLease.Run(ctx, s.d.fc, []string{dueKey}, s.d.nowMS(), limit, hold.Milliseconds(), token).Slice()
	if err != nil {
		return nil, time.Time{}, wrap(op, err)
	}
	malformed := storage.E(op, storage.Internal, "malformed script reply")
	if len(res) != 2 {
		return nil, time.Time{}, malformed
	}
	var next time.Time
	if score := toString(res[0]); score != "" {
		ms, err := strconv.ParseFloat(score, 64)
		if err != nil {
			return nil, time.Time{}, malformed
		}
		next = msTime(int64(ms))
	}
	leased, _ := res[1].([]any)
	out := make([]storage.Delivery, 0, len(leased))
	for _, v := range leased {
		f, ok := v.([]any)
		if !ok || len(f) != 8 {
			return nil, time.Time{}, malformed
		}
		q, ok := parseScope(toString(f[0]))
		if !ok {
			continue
		}
		out = append(out, storage.Delivery{
			Queue: q, MessageID: toString(f[1]), SubscriptionID: toString(f[2]),
			Body: json.RawMessage(toString(f[3])), TTL: time.Duration(toInt(f[4])) * time.Millisecond,
			Posted: msTime(toInt(f[5])), Expires: msTime(toInt(f[6])), Attempts: int(toInt(f[7])), Lease: token,
		})
	}
	return out, next, nil
}

func (s deliveryStore) settle(ctx context.Context, op, mode string, d storage.Delivery, at time.Time, errText string) error {
	return wrap(op, dlvSettle.Run(ctx, s.d.fc, []string{scope(d.Queue)}, mode, s.d.nowMS(),
		d.MessageID, d.SubscriptionID, d.Lease, at.UnixMilli(), errText).Err())
}

func (s deliveryStore) Ack(ctx context.Context, d storage.Delivery) error {
	return s.settle(ctx, storage.OpDeliveryAck, "ack", d, time.Time{}, "")
}

func (s deliveryStore) Retry(ctx context.Context, d storage.Delivery, at time.Time, errText string) error {
	return s.settle(ctx, storage.OpDeliveryRetry, "retry", d, at, errText)
}

func (s deliveryStore) Release(ctx context.Context, d storage.Delivery, at time.Time) error {
	return s.settle(ctx, storage.OpDeliveryRelease, "release", d, at, "")
}

func (s deliveryStore) Fail(ctx context.Context, d storage.Delivery, errText string) error {
	return s.settle(ctx, storage.OpDeliveryFail, "fail", d, time.Time{}, errText)
}

func (s deliveryStore) Stats(ctx context.Context, q storage.QueueRef) (storage.DeliveryStats, error) {
	const op = storage.OpDeliveryStats
	res, err := dlvStats.Run(ctx, s.d.fc, []string{scope(q)}, s.d.nowMS()).Slice()
	if err != nil {
		return storage.DeliveryStats{}, wrap(op, err)
	}
	if len(res) < 4 {
		return storage.DeliveryStats{}, storage.E(op, storage.Internal, "malformed script reply")
	}
	st := storage.DeliveryStats{
		Delivered: toInt(res[0]), Failed: toInt(res[1]),
		LastError: toString(res[2]), LastErrorAt: msTime(toInt(res[3])),
	}
	for _, v := range res[4:] {
		f, ok := v.([]any)
		if !ok || len(f) != 7 {
			return storage.DeliveryStats{}, storage.E(op, storage.Internal, "malformed script reply")
		}
		row := storage.SubscriptionDeliveries{
			ID: toString(f[0]), Subscriber: toString(f[1]), Pending: toInt(f[2]),
			Delivered: toInt(f[3]), Failed: toInt(f[4]), LastError: toString(f[5]), LastErrorAt: msTime(toInt(f[6])),
		}
		st.Pending += row.Pending
		st.Subscriptions = append(st.Subscriptions, row)
	}
	return st, nil
}

// Pending counts the due index: every delivery not yet sent, including
// ones whose message expired that the next lease will give up.
func (s deliveryStore) Pending(ctx context.Context) (int64, error) {
	n, err := s.d.c.ZCard(ctx, dueKey).Result()
	return n, wrap(storage.OpDeliveryPending, err)
}
