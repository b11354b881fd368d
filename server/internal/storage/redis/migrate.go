package redis

import (
	"context"
	_ "embed"
	"errors"
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

// StorageID sets the database's id if it has none (SET NX GET: one round
// trip) and returns the id it holds.
func (m migrationStore) StorageID(ctx context.Context) (string, error) {
	id := storage.NewID()
	old, err := m.d.c.SetArgs(ctx, storageIDKey, id, goredis.SetArgs{Mode: "NX", Get: true}).Result()
	if errors.Is(err, goredis.Nil) {
		return id, nil
	}
	if err != nil {
		return "", wrap(storage.OpMigrateStorageID, err)
	}
	return old, nil
}

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
	//go:embed mig_transit.lua
	migTransitSrc string
	migTransit    = register("mig_transit", migTransitSrc)
	//go:embed mig_settle.lua
	migSettleSrc string
	migSettle    = register("mig_settle", migSettleSrc)
	// mig_settle_take is mig_settle then mig_take in one script: each
	// runs as a local function, over its own ARGV (copied by a loop: an
	// unpack of a batch of thousands of ids overflows Lua's C stack).
	migSettleTake = register("mig_settle_take", "local function settle(ARGV)\n"+migSettleSrc+
		"\nend\nlocal function take(ARGV)\n"+migTakeSrc+"\nend\n"+
		"local ids = {}\nfor i = 3, #ARGV do ids[i - 2] = ARGV[i] end\n"+
		"local r = settle(ids)\nif r ~= 1 then return r end\nreturn take({ARGV[1], ARGV[2]})")
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
	res, err := migTake.Run(ctx, s.d.fc, []string{scope(q)}, s.d.nowMS(), limit).Slice()
	if err != nil {
		return storage.Batch{}, wrap(op, err)
	}
	return parseBatch(op, res)
}

func (s migrationStore) InTransit(ctx context.Context, q storage.QueueRef) (storage.Batch, error) {
	const op = storage.OpMigrateInTransit
	res, err := migTransit.Run(ctx, s.d.fc, []string{scope(q)}).Slice()
	if err != nil {
		return storage.Batch{}, wrap(op, err)
	}
	return parseBatch(op, res)
}

func (s migrationStore) Settle(ctx context.Context, q storage.QueueRef, b storage.Batch) error {
	args := make([]any, len(b.Messages))
	for i, m := range b.Messages {
		args[i] = m.ID
	}
	return wrap(storage.OpMigrateSettle, migSettle.Run(ctx, s.d.fc, []string{scope(q)}, args...).Err())
}

// SettleAndTake settles b and takes the next batch in one script
// (storage.SettleTaker).
func (s migrationStore) SettleAndTake(ctx context.Context, q storage.QueueRef, b storage.Batch, limit int) (storage.Batch, error) {
	const op = storage.OpMigrateTake
	if limit < 1 {
		return storage.Batch{}, storage.E(op, storage.Invalid, storage.ErrArgument)
	}
	args := make([]any, 2, 2+len(b.Messages))
	args[0], args[1] = s.d.nowMS(), limit
	for _, m := range b.Messages {
		args = append(args, m.ID)
	}
	res, err := migSettleTake.Run(ctx, s.d.fc, []string{scope(q)}, args...).Slice()
	if err != nil {
		return storage.Batch{}, wrap(op, err)
	}
	return parseBatch(op, res)
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
	keys := queueKeys(q)
	args := batchArgs(make([]any, 0, 5+10*len(b.Messages)+5*len(b.Claims)), b)
	args = append([]any{s.d.nowMS(), q.Name, keys[0]}, args...)
	return wrap(op, migImport.Run(ctx, s.d.fc, keys, args...).Err())
}

func (s migrationStore) Done(ctx context.Context, q storage.QueueRef) error {
	return wrap(storage.OpMigrateDone, s.d.c.Del(ctx, scope(q)+":im").Err())
}

// parseBatch reads a batch as the scripts reply it (lib.lua's
// transit_reply): {message count, claim count, then 10 fields per message
// and 5 per claim}.
func parseBatch(op string, res []any) (storage.Batch, error) {
	var b storage.Batch
	if len(res) < 2 {
		return b, storage.E(op, storage.Internal, "malformed script reply")
	}
	nm, nc := int(toInt(res[0])), int(toInt(res[1]))
	if nm < 0 || nc < 0 || len(res) != 2+10*nm+5*nc {
		return b, storage.E(op, storage.Internal, "malformed script reply")
	}
	for i := 0; i < nm; i++ {
		f := res[2+10*i : 2+10*(i+1)]
		m, _ := parseMessage(f[:9])
		b.Messages = append(b.Messages, storage.MovedMessage{Message: m, Seq: toInt(f[9])})
	}
	for j := 0; j < nc; j++ {
		f := res[2+10*nm+5*j : 2+10*nm+5*(j+1)]
		b.Claims = append(b.Claims, storage.MovedClaim{
			ID:      toString(f[0]),
			TTL:     time.Duration(toInt(f[1])) * time.Millisecond,
			Grace:   time.Duration(toInt(f[2])) * time.Millisecond,
			Created: msTime(toInt(f[3])),
			Expires: msTime(toInt(f[4])),
		})
	}
	return b, nil
}

// batchArgs writes b as the scripts reply a batch, for mig_import.lua,
// whatever driver took it.
func batchArgs(args []any, b storage.Batch) []any {
	args = append(args, len(b.Messages), len(b.Claims))
	for _, m := range b.Messages {
		// The body goes out as []byte: go-redis writes it without a copy.
		args = append(args, m.ID, []byte(m.Body), timeMS(m.Created), timeMS(m.Created.Add(m.TTL)),
			timeMS(m.DelayUntil), m.ClientID, m.ClaimID, timeMS(m.ClaimExpires), m.ClaimCount, m.Seq)
	}
	for _, c := range b.Claims {
		args = append(args, c.ID, c.TTL.Milliseconds(), c.Grace.Milliseconds(), timeMS(c.Created), timeMS(c.Expires))
	}
	return args
}
