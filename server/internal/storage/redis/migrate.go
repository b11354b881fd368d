package redis

import (
	"context"
	_ "embed"
	"encoding/json"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"sluice.dev/server/internal/storage"
)

// Moving a queue (docs/pooling.md, "Moving a queue"). The seal is a field
// of the queue hash, which the post script reads anyway; transit, settled
// and imported ids live under the queue's scope (lib.lua), so every step
// is one script on one hash slot.

// Migrations returns the driver's part in moving a queue.
func (d *Driver) Migrations() storage.MigrationStore { return migrationStore{d} }

type migrationStore struct{ d *Driver }

var (
	//go:embed mig_seal.lua
	migSealSrc string
	migSeal    = register("mig_seal", migSealSrc)
	//go:embed mig_unseal.lua
	migUnsealSrc string
	migUnseal    = register("mig_unseal", migUnsealSrc)
	//go:embed mig_take.lua
	migTakeSrc string
	migTake    = register("mig_take", migTakeSrc)
	//go:embed mig_settle.lua
	migSettleSrc string
	migSettle    = register("mig_settle", migSettleSrc)
	//go:embed mig_finish.lua
	migFinishSrc string
	migFinish    = register("mig_finish", migFinishSrc)
	//go:embed mig_prepare.lua
	migPrepareSrc string
	migPrepare    = register("mig_prepare", migPrepareSrc)
	//go:embed mig_import.lua
	migImportSrc string
	migImport    = register("mig_import", migImportSrc)
)

func (s migrationStore) Seal(ctx context.Context, q storage.QueueRef, target string) (storage.Sealed, error) {
	const op = storage.OpMigrateSeal
	if target == "" {
		return storage.Sealed{}, storage.E(op, storage.Invalid, "no target")
	}
	res, err := migSeal.Run(ctx, s.d.fc, []string{scope(q)}, target, s.d.nowMS()).Slice()
	if err != nil {
		return storage.Sealed{}, wrap(op, err)
	}
	if len(res) != 3 {
		return storage.Sealed{}, storage.E(op, storage.Internal, "malformed script reply")
	}
	meta, err := decodeMeta(op, toString(res[1]))
	if err != nil {
		return storage.Sealed{}, err
	}
	return storage.Sealed{Seq: toInt(res[0]), Metadata: meta, Exists: toString(res[2]) == "1"}, nil
}

func (s migrationStore) Unseal(ctx context.Context, q storage.QueueRef) error {
	return wrap(storage.OpMigrateUnseal, migUnseal.Run(ctx, s.d.fc, []string{scope(q)}).Err())
}

func (s migrationStore) Take(ctx context.Context, q storage.QueueRef, limit int) (storage.Batch, error) {
	const op = storage.OpMigrateTake
	if limit < 1 {
		return storage.Batch{}, storage.E(op, storage.Invalid, storage.ErrArgument)
	}
	js, err := migTake.Run(ctx, s.d.fc, []string{scope(q)}, s.d.nowMS(), limit).Text()
	if err != nil {
		return storage.Batch{}, wrap(op, err)
	}
	return decodeBatch(op, js)
}

func (s migrationStore) InTransit(ctx context.Context, q storage.QueueRef) (storage.Batch, error) {
	const op = storage.OpMigrateInTransit
	js, err := s.d.c.Get(ctx, scope(q)+":tr").Result()
	if err == goredis.Nil {
		return storage.Batch{}, nil
	}
	if err != nil {
		return storage.Batch{}, wrap(op, err)
	}
	return decodeBatch(op, js)
}

func (s migrationStore) Settle(ctx context.Context, q storage.QueueRef, b storage.Batch) error {
	args := make([]any, len(b.Messages))
	for i, m := range b.Messages {
		args[i] = m.ID
	}
	return wrap(storage.OpMigrateSettle, migSettle.Run(ctx, s.d.fc, []string{scope(q)}, args...).Err())
}

func (s migrationStore) Finish(ctx context.Context, q storage.QueueRef, ttl time.Duration) error {
	keys := queueKeys(q)
	return wrap(storage.OpMigrateFinish,
		migFinish.Run(ctx, s.d.fc, keys, q.Name, keys[0], s.d.nowMS(), max(ttl.Milliseconds(), 1)).Err())
}

func (s migrationStore) Prepare(ctx context.Context, q storage.QueueRef, meta storage.Metadata, floor int64) error {
	const op = storage.OpMigratePrepare
	js, err := encodeMeta(op, meta)
	if err != nil {
		return err
	}
	keys := queueKeys(q)
	return wrap(op, migPrepare.Run(ctx, s.d.fc, keys, js, q.Name, keys[0], floor).Err())
}

func (s migrationStore) Import(ctx context.Context, q storage.QueueRef, b storage.Batch) error {
	const op = storage.OpMigrateImport
	if b.Empty() {
		return nil
	}
	js, err := encodeBatch(b)
	if err != nil {
		return storage.E(op, storage.Invalid, err)
	}
	keys := queueKeys(q)
	return wrap(op, migImport.Run(ctx, s.d.fc, keys, s.d.nowMS(), q.Name, keys[0], js).Err())
}

func (s migrationStore) Done(ctx context.Context, q storage.QueueRef) error {
	return wrap(storage.OpMigrateDone, s.d.c.Del(ctx, scope(q)+":im").Err())
}

// wireBatch is a batch as the scripts read and write it: arrays of
// strings (see mig_take.lua). An empty Lua table encodes as {}, so the
// arrays are decoded only when they are arrays.
type wireBatch struct {
	M json.RawMessage `json:"m"`
	C json.RawMessage `json:"c"`
}

func decodeBatch(op, js string) (storage.Batch, error) {
	var b storage.Batch
	if js == "" {
		return b, nil
	}
	var w wireBatch
	var msgs, claims [][]string
	if err := json.Unmarshal([]byte(js), &w); err != nil {
		return b, storage.E(op, storage.Internal, err)
	}
	for _, part := range []struct {
		raw json.RawMessage
		to  *[][]string
	}{{w.M, &msgs}, {w.C, &claims}} {
		if len(part.raw) > 0 && part.raw[0] == '[' {
			if err := json.Unmarshal(part.raw, part.to); err != nil {
				return b, storage.E(op, storage.Internal, err)
			}
		}
	}
	for _, f := range msgs {
		if len(f) != 10 {
			return storage.Batch{}, storage.E(op, storage.Internal, "malformed batch")
		}
		vals := make([]any, 9)
		for i := range vals {
			vals[i] = f[i]
		}
		m, _ := parseMessage(vals)
		b.Messages = append(b.Messages, storage.MovedMessage{Message: m, Seq: toInt(f[9])})
	}
	for _, f := range claims {
		if len(f) != 5 {
			return storage.Batch{}, storage.E(op, storage.Internal, "malformed batch")
		}
		b.Claims = append(b.Claims, storage.MovedClaim{
			ID:      f[0],
			TTL:     time.Duration(toInt(f[1])) * time.Millisecond,
			Grace:   time.Duration(toInt(f[2])) * time.Millisecond,
			Created: msTime(toInt(f[3])),
			Expires: msTime(toInt(f[4])),
		})
	}
	return b, nil
}

// encodeBatch writes b as mig_take.lua does, for mig_import.lua, whatever
// driver took it.
func encodeBatch(b storage.Batch) (string, error) {
	ms := func(t time.Time) string {
		if t.IsZero() {
			return "0"
		}
		return strconv.FormatInt(t.UnixMilli(), 10)
	}
	msgs := make([][]string, 0, len(b.Messages))
	for _, m := range b.Messages {
		msgs = append(msgs, []string{m.ID, string(m.Body), ms(m.Created), ms(m.Created.Add(m.TTL)),
			ms(m.DelayUntil), m.ClientID, m.ClaimID, ms(m.ClaimExpires), strconv.Itoa(m.ClaimCount),
			strconv.FormatInt(m.Seq, 10)})
	}
	claims := make([][]string, 0, len(b.Claims))
	for _, c := range b.Claims {
		claims = append(claims, []string{c.ID, strconv.FormatInt(c.TTL.Milliseconds(), 10),
			strconv.FormatInt(c.Grace.Milliseconds(), 10), ms(c.Created), ms(c.Expires)})
	}
	js, err := json.Marshal(map[string]any{"m": msgs, "c": claims})
	return string(js), err
}
