package redis

import (
	"context"
	_ "embed"
	"encoding/json"

	"sluice.dev/server/internal/storage"
)

type queueStore struct{ d *Driver }

var (
	//go:embed queue_create.lua
	queueCreateSrc string
	queueCreate    = register("queue_create", queueCreateSrc)
)

func encodeMeta(op string, meta storage.Metadata) (string, error) {
	if meta == nil {
		return "{}", nil
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return "", storage.E(op, storage.Invalid, err)
	}
	return string(b), nil
}

func decodeMeta(op, s string) (storage.Metadata, error) {
	meta := storage.Metadata{}
	if s == "" {
		return meta, nil
	}
	if err := storage.DecodeMetadata([]byte(s), &meta); err != nil {
		return nil, storage.E(op, storage.Internal, err)
	}
	return meta, nil
}

// queueKeys are the KEYS of scripts that may create or remove a queue.
func queueKeys(q storage.QueueRef) []string {
	return []string{scope(q), indexKey(q.Project), registryKey}
}

func (s queueStore) Create(ctx context.Context, q storage.QueueRef, meta storage.Metadata) (bool, error) {
	js, err := encodeMeta(storage.OpQueueCreate, meta)
	if err != nil {
		return false, err
	}
	keys := queueKeys(q)
	n, err := queueCreate.Run(ctx, s.d.fc, keys, js, q.Name, keys[0], s.d.nowMS()).Int64()
	err = wrap(storage.OpQueueCreate, err)
	if storage.Is(err, storage.Full) {
		// A full Redis refuses the script before it looks: a queue that
		// exists is left as it is, which stores nothing, so clients that
		// PUT their queue before using it (the operator every pass,
		// python-zaqarclient's auto_create) keep using it.
		if _, ok, merr := s.d.metadata(ctx, storage.OpQueueCreate, keys[0]); merr != nil || ok {
			return false, merr
		}
	}
	return n == 1, err
}

func (s queueStore) Exists(ctx context.Context, q storage.QueueRef) (bool, error) {
	_, ok, err := s.d.metadata(ctx, storage.OpQueueExists, scope(q))
	return ok, err
}

// metadata reads the queue hash's metadata text, or ok == false when the
// queue does not exist (a sealed queue that never existed has a hash with
// only its seal). The same read answers Moved for a moved queue's
// tombstone.
func (d *Driver) metadata(ctx context.Context, op, scope string) (js string, ok bool, err error) {
	f, err := d.c.HMGet(ctx, scope+":q", "m", "g", "z").Result()
	if err != nil {
		return "", false, wrap(op, err)
	}
	if z := toString(f[2]); z != "" && toInt(z) > d.nowMS() {
		return "", false, storage.E(op, storage.Conflict, storage.Moved{Target: toString(f[1])})
	}
	js, ok = f[0].(string)
	return js, ok, nil
}

func (s queueStore) GetMetadata(ctx context.Context, q storage.QueueRef) (storage.Metadata, error) {
	js, ok, err := s.d.metadata(ctx, storage.OpQueueGetMetadata, scope(q))
	if err != nil || !ok {
		return storage.Metadata{}, err
	}
	return decodeMeta(storage.OpQueueGetMetadata, js)
}

var (
	//go:embed queue_set_metadata.lua
	queueSetMetadataSrc string
	queueSetMetadata    = register("queue_set_metadata", queueSetMetadataSrc)
)

func (s queueStore) SetMetadata(ctx context.Context, q storage.QueueRef, meta storage.Metadata) error {
	js, err := encodeMeta(storage.OpQueueSetMetadata, meta)
	if err != nil {
		return err
	}
	keys := queueKeys(q)
	return wrap(storage.OpQueueSetMetadata, queueSetMetadata.Run(ctx, s.d.fc, keys, js, q.Name, keys[0], s.d.nowMS()).Err())
}

var (
	//go:embed queue_swap_metadata.lua
	queueSwapMetadataSrc string
	queueSwapMetadata    = register("queue_swap_metadata", queueSwapMetadataSrc)
)

// UpdateMetadata is an optimistic read-modify-write: the new metadata is
// stored by a script only if the stored text is still what update saw.
func (s queueStore) UpdateMetadata(ctx context.Context, q storage.QueueRef, update storage.MetadataUpdate) (storage.Metadata, error) {
	const op = storage.OpQueueUpdateMetadata
	key := scope(q)
	return storage.SwapMetadata(ctx, op, storage.MetadataCAS{
		Load: func(ctx context.Context) (string, bool, error) {
			return s.d.metadata(ctx, op, key)
		},
		Swap: func(ctx context.Context, prev, next string) (bool, bool, error) {
			n, err := queueSwapMetadata.Run(ctx, s.d.fc, []string{key}, prev, next, s.d.nowMS()).Int64()
			return n == 1, n >= 0, wrap(op, err)
		},
		Decode: func(raw string) (storage.Metadata, error) { return decodeMeta(op, raw) },
		Encode: func(m storage.Metadata) (string, error) { return encodeMeta(op, m) },
	}, update)
}

var (
	//go:embed queue_delete.lua
	queueDeleteSrc string
	queueDelete    = register("queue_delete", queueDeleteSrc)
)

func (s queueStore) Delete(ctx context.Context, q storage.QueueRef) error {
	keys := queueKeys(q)
	if err := s.wipeMessages(ctx, storage.OpQueueDelete, keys); err != nil {
		return err
	}
	if err := s.d.wipeDeliveries(ctx, storage.OpQueueDelete, keys[0], ""); err != nil {
		return err
	}
	return wrap(storage.OpQueueDelete, queueDelete.Run(ctx, s.d.fc, keys, q.Name, keys[0], "0", s.d.nowMS()).Err())
}

// Purge wipes the messages in steps, then runs the delete script in its
// keep-the-queue mode.
func (s queueStore) Purge(ctx context.Context, q storage.QueueRef) error {
	keys := queueKeys(q)
	if err := s.wipeMessages(ctx, storage.OpQueuePurge, keys); err != nil {
		return err
	}
	return wrap(storage.OpQueuePurge, queueDelete.Run(ctx, s.d.fc, keys, q.Name, keys[0], "1", s.d.nowMS()).Err())
}

var (
	//go:embed queue_wipe.lua
	queueWipeSrc string
	queueWipe    = register("queue_wipe", queueWipeSrc)
)

// wipeStep bounds the messages, or pending deliveries, one script call of
// a wipe drops: Redis serves nobody else while a script runs, and one call
// over a whole queue held the shard 2-3 s per million messages (past
// Redis' 5 s busy threshold every other client is refused). A step of
// 1,000 holds it for 10-20 ms at most (docs/benchmarks.md, "Wiping a
// large queue").
const wipeStep = 1000

// wipeMessages drops the queue's messages in steps, up to the newest one
// when it began, before the delete script removes the rest with the
// claims and indexes at once: posts racing a wipe cannot keep it going,
// and a wipe cut short by its deadline has dropped only what it was asked
// to, so the caller's retry carries on from there.
func (s queueStore) wipeMessages(ctx context.Context, op string, keys []string) error {
	bound := ""
	for {
		res, err := queueWipe.Run(ctx, s.d.fc, keys[:1], s.d.nowMS(), bound, wipeStep).Slice()
		if err != nil {
			return wrap(op, err)
		}
		if len(res) != 2 {
			return storage.E(op, storage.Internal, "malformed script reply")
		}
		bound = toString(res[0])
		if toInt(res[1]) < wipeStep {
			return nil
		}
	}
}

var (
	//go:embed queue_list.lua
	queueListSrc string
	queueList    = register("queue_list", queueListSrc)
)

func (s queueStore) List(ctx context.Context, project string, opts storage.ListQueuesOptions) ([]storage.QueueInfo, error) {
	detailed := "0"
	if opts.Detailed {
		detailed = "1"
	}
	// One script call scans a bounded number of names; a name filter that
	// matches rarely continues from where the last call stopped until the
	// page is full or the index ends, so matches are found at any count.
	out := make([]storage.QueueInfo, 0, min(opts.Limit, 100))
	marker := opts.Marker
	for len(out) < opts.Limit {
		res, err := queueList.Run(ctx, s.d.fc, []string{indexKey(project)},
			marker, opts.Limit-len(out), opts.Name, detailed, projectPrefix(project)).StringSlice()
		if err != nil {
			return nil, wrap(storage.OpQueueList, err)
		}
		if len(res) == 0 {
			return nil, storage.E(storage.OpQueueList, storage.Internal, "malformed script reply")
		}
		for i := 1; i+1 < len(res); i += 2 {
			info := storage.QueueInfo{Name: res[i]}
			if opts.Detailed {
				if info.Metadata, err = decodeMeta(storage.OpQueueList, res[i+1]); err != nil {
					return nil, err
				}
			}
			out = append(out, info)
		}
		if res[0] == "" {
			break
		}
		marker = res[0]
	}
	return out, nil
}

var (
	//go:embed queue_stats.lua
	queueStatsSrc string
	queueStats    = register("queue_stats", queueStatsSrc)
)

func (s queueStore) Stats(ctx context.Context, q storage.QueueRef) (storage.QueueStats, error) {
	res, err := queueStats.Run(ctx, s.d.fc, []string{scope(q)}, s.d.nowMS()).Slice()
	if err != nil {
		return storage.QueueStats{}, wrap(storage.OpQueueStats, err)
	}
	if len(res) != 5 {
		return storage.QueueStats{}, storage.E(storage.OpQueueStats, storage.Internal, "malformed script reply")
	}
	s.d.lapsed(toInt(res[0]))
	st := storage.QueueStats{Total: int(toInt(res[1])), Claimed: int(toInt(res[2]))}
	st.Free = st.Total - st.Claimed
	if m, ok := parseMessage(res[3]); ok {
		st.Oldest = &m
	}
	if m, ok := parseMessage(res[4]); ok {
		st.Newest = &m
	}
	return st, nil
}
