package redis

import (
	"context"
	"strconv"

	"sluice.dev/server/internal/storage"
)

// Depth totals live free and claimed messages over every queue the
// registry lists: two ZCOUNTs and the stream area's length per queue
// (whose entries are all free: lib.lua), pipelined in chunks.
func (d *Driver) Depth(ctx context.Context) (storage.Depth, error) {
	var depth storage.Depth
	now := "(" + strconv.FormatInt(d.nowMS(), 10)
	var cursor uint64
	for {
		scopes, next, err := d.c.SScan(ctx, registryKey, cursor, "", 256).Result()
		if err != nil {
			return depth, wrap("redis.depth", err)
		}
		if len(scopes) > 0 {
			pipe := d.c.Pipeline()
			for _, s := range scopes {
				pipe.ZCount(ctx, s+":exp", now, "+inf")
				pipe.ZCount(ctx, s+":held", now, "+inf")
				pipe.XLen(ctx, s+":x")
			}
			cmds, err := pipe.Exec(ctx)
			if err != nil {
				return depth, wrap("redis.depth", err)
			}
			for i := 0; i+2 < len(cmds); i += 3 {
				val := func(j int) int64 { return cmds[i+j].(interface{ Val() int64 }).Val() }
				total, claimed, entries := val(0), val(1), val(2)
				depth.Claimed += claimed
				depth.Free += total - claimed + entries
			}
		}
		if cursor = next; cursor == 0 {
			return depth, nil
		}
	}
}

// Leftovers lists every key and registry entry that still belongs to the
// project.
func (d *Driver) Leftovers(ctx context.Context, project string) ([]string, error) {
	var out []string
	prefix := escapeGlob(projectPrefix(project)) + "*"
	iter := d.c.Scan(ctx, 0, prefix, 1000).Iterator()
	for iter.Next(ctx) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, wrap("redis.leftovers", err)
	}
	if n, err := d.c.Exists(ctx, indexKey(project)).Result(); err != nil {
		return nil, wrap("redis.leftovers", err)
	} else if n > 0 {
		out = append(out, indexKey(project))
	}
	due := d.c.ZScan(ctx, dueKey, 0, prefix, 1000).Iterator()
	for i := 0; due.Next(ctx); i++ {
		if i%2 == 0 { // members and scores alternate
			out = append(out, dueKey+" member "+due.Val())
		}
	}
	if err := due.Err(); err != nil {
		return nil, wrap("redis.leftovers", err)
	}
	members := d.c.SScan(ctx, registryKey, 0, prefix, 1000).Iterator()
	for members.Next(ctx) {
		out = append(out, registryKey+" member "+members.Val())
	}
	return out, wrap("redis.leftovers", members.Err())
}
