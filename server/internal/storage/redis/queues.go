package redis

import (
	"context"
	_ "embed"
	"encoding/json"

	goredis "github.com/redis/go-redis/v9"

	"sluice.dev/server/internal/storage"
)

type queueStore struct{ d *Driver }

var (
	//go:embed queue_create.lua
	queueCreateSrc string
	queueCreate    = register(queueCreateSrc)
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
	js, err := encodeMeta("queues.create", meta)
	if err != nil {
		return false, err
	}
	keys := queueKeys(q)
	n, err := queueCreate.Run(ctx, s.d.c, keys, js, q.Name, keys[0]).Int64()
	return n == 1, wrap("queues.create", err)
}

func (s queueStore) Exists(ctx context.Context, q storage.QueueRef) (bool, error) {
	n, err := s.d.c.Exists(ctx, scope(q)+":q").Result()
	return n == 1, wrap("queues.exists", err)
}

func (s queueStore) GetMetadata(ctx context.Context, q storage.QueueRef) (storage.Metadata, error) {
	js, err := s.d.c.HGet(ctx, scope(q)+":q", "m").Result()
	if err == goredis.Nil {
		return storage.Metadata{}, nil
	}
	if err != nil {
		return nil, wrap("queues.get_metadata", err)
	}
	return decodeMeta("queues.get_metadata", js)
}

var (
	//go:embed queue_set_metadata.lua
	queueSetMetadataSrc string
	queueSetMetadata    = register(queueSetMetadataSrc)
)

func (s queueStore) SetMetadata(ctx context.Context, q storage.QueueRef, meta storage.Metadata) error {
	js, err := encodeMeta("queues.set_metadata", meta)
	if err != nil {
		return err
	}
	keys := queueKeys(q)
	return wrap("queues.set_metadata", queueSetMetadata.Run(ctx, s.d.c, keys, js, q.Name, keys[0]).Err())
}

var (
	//go:embed queue_delete.lua
	queueDeleteSrc string
	queueDelete    = register(queueDeleteSrc)
)

func (s queueStore) Delete(ctx context.Context, q storage.QueueRef) error {
	keys := queueKeys(q)
	return wrap("queues.delete", queueDelete.Run(ctx, s.d.c, keys, q.Name, keys[0], "0").Err())
}

// Purge runs the delete script in its keep-the-queue mode.
func (s queueStore) Purge(ctx context.Context, q storage.QueueRef) error {
	keys := queueKeys(q)
	return wrap("queues.purge", queueDelete.Run(ctx, s.d.c, keys, q.Name, keys[0], "1").Err())
}

var (
	//go:embed queue_list.lua
	queueListSrc string
	queueList    = register(queueListSrc)
)

func (s queueStore) List(ctx context.Context, project string, opts storage.ListQueuesOptions) ([]storage.QueueInfo, error) {
	if opts.Limit <= 0 {
		return nil, storage.E("queues.list", storage.Invalid, "limit must be positive")
	}
	detailed := "0"
	if opts.Detailed {
		detailed = "1"
	}
	res, err := queueList.Run(ctx, s.d.c, []string{indexKey(project)},
		opts.Marker, opts.Limit, opts.Name, detailed, projectPrefix(project)).StringSlice()
	if err != nil {
		return nil, wrap("queues.list", err)
	}
	out := make([]storage.QueueInfo, 0, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		info := storage.QueueInfo{Name: res[i]}
		if opts.Detailed {
			if info.Metadata, err = decodeMeta("queues.list", res[i+1]); err != nil {
				return nil, err
			}
		}
		out = append(out, info)
	}
	return out, nil
}

var (
	//go:embed queue_stats.lua
	queueStatsSrc string
	queueStats    = register(queueStatsSrc)
)

func (s queueStore) Stats(ctx context.Context, q storage.QueueRef) (storage.QueueStats, error) {
	res, err := queueStats.Run(ctx, s.d.c, []string{scope(q)}, s.d.nowMS()).Slice()
	if err != nil {
		return storage.QueueStats{}, wrap("queues.stats", err)
	}
	if len(res) != 5 {
		return storage.QueueStats{}, storage.E("queues.stats", storage.Internal, "malformed script reply")
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
