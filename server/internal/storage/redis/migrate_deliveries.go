package redis

import (
	"context"
	_ "embed"
	"encoding/json"
	"strconv"
	"time"

	"sluice.dev/server/internal/storage"
)

var (
	//go:embed mig_dlv_read.lua
	migDlvReadSrc string
	migDlvRead    = register("mig_dlv_read", migDlvReadSrc)
	//go:embed mig_dlv_import.lua
	migDlvImportSrc string
	migDlvImport    = register("mig_dlv_import", migDlvImportSrc)
	//go:embed mig_dlv_counts.lua
	migDlvCountsSrc string
	migDlvCounts    = register("mig_dlv_counts", migDlvCountsSrc)
)

// Deliveries lists the pairs (subscription, message) of the queue's
// pending deliveries first, ids only, then reads a page of them at a time.
// Since the seal no post adds a delivery here, the pairs can only go: a
// page reads those still pending, and none pending throughout is missed.
func (s migrationStore) Deliveries(ctx context.Context, q storage.QueueRef, limit int, f func([]storage.MovedDelivery) error) error {
	const op = storage.OpMigrateDeliveries
	if limit < 1 {
		return storage.E(op, storage.Invalid, storage.ErrArgument)
	}
	p := scope(q)
	sids, err := s.d.c.ZRange(ctx, p+":si", 0, -1).Result()
	if err != nil {
		return wrap(op, err)
	}
	var pairs []any // subscription id, message id, ...
	for _, sid := range sids {
		mids, err := s.d.c.ZRange(ctx, p+":dp:"+sid, 0, -1).Result()
		if err != nil {
			return wrap(op, err)
		}
		for _, mid := range mids {
			pairs = append(pairs, sid, mid)
		}
	}
	for len(pairs) > 0 {
		k := min(2*limit, len(pairs))
		res, err := migDlvRead.Run(ctx, s.d.fc, []string{p}, pairs[:k]...).Slice()
		if err != nil {
			return wrap(op, err)
		}
		page := make([]storage.MovedDelivery, 0, len(res))
		for _, v := range res {
			r, ok := v.([]any)
			if !ok || len(r) != 8 {
				return storage.E(op, storage.Internal, "malformed script reply")
			}
			due, err := strconv.ParseFloat(toString(r[7]), 64)
			if err != nil {
				return storage.E(op, storage.Internal, "malformed script reply")
			}
			page = append(page, storage.MovedDelivery{Delivery: storage.Delivery{
				Queue: q, MessageID: toString(r[0]), SubscriptionID: toString(r[1]),
				Body: json.RawMessage(toString(r[2])), TTL: time.Duration(toInt(r[3])) * time.Millisecond,
				Posted: msTime(toInt(r[4])), Expires: msTime(toInt(r[5])), Attempts: int(toInt(r[6])),
			}, Due: msTime(int64(due))})
		}
		if len(page) > 0 {
			if err := f(page); err != nil {
				return err
			}
		}
		pairs = pairs[k:]
	}
	return nil
}

// ImportDeliveries records ds in one script call.
func (s migrationStore) ImportDeliveries(ctx context.Context, q storage.QueueRef, ds []storage.MovedDelivery) error {
	now := s.d.clock.Now()
	ds = storage.ImportableDeliveries(ds, now)
	if len(ds) == 0 {
		return nil
	}
	args := make([]any, 1, 1+8*len(ds))
	args[0] = now.UnixMilli()
	for _, d := range ds {
		args = append(args, d.MessageID, d.SubscriptionID, []byte(d.Body), d.TTL.Milliseconds(),
			d.Posted.UnixMilli(), d.Expires.UnixMilli(), d.Attempts, d.Due.UnixMilli())
	}
	return wrap(storage.OpMigrateImportDeliveries, migDlvImport.Run(ctx, s.d.fc, []string{scope(q)}, args...).Err())
}

// ImportDeliveryCounts adds st in one script call, once per token.
func (s migrationStore) ImportDeliveryCounts(ctx context.Context, q storage.QueueRef, st storage.DeliveryStats, token string) error {
	args := make([]any, 0, 6+5*len(st.Subscriptions))
	args = append(args, s.d.nowMS(), token, st.Delivered, st.Failed, st.LastError, timeMS(st.LastErrorAt))
	for _, row := range st.Subscriptions {
		args = append(args, row.ID, row.Delivered, row.Failed, row.LastError, timeMS(row.LastErrorAt))
	}
	return wrap(storage.OpMigrateImportCounts, migDlvCounts.Run(ctx, s.d.fc, []string{scope(q)}, args...).Err())
}
