package redis

import (
	"context"
	"strconv"
	"strings"

	"sluice.dev/server/internal/storage"
)

// Capacity reads INFO memory. Used is what Redis compares with maxmemory
// before it refuses a write: used_memory less the replication and AOF
// buffers (mem_not_counted_for_evict).
func (d *Driver) Capacity(ctx context.Context) (storage.Capacity, error) {
	info, err := d.c.Info(ctx, "memory").Result()
	if err != nil {
		return storage.Capacity{}, wrap("redis.capacity", err)
	}
	return parseMemoryInfo(info), nil
}

// parseMemoryInfo reads the fields Capacity needs out of INFO memory's
// "name:value" lines; a field missing reads as zero.
func parseMemoryInfo(info string) storage.Capacity {
	var c storage.Capacity
	var notCounted int64
	for _, line := range strings.Split(info, "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(value, 10, 64)
		switch name {
		case "used_memory":
			c.UsedBytes = n
		case "maxmemory":
			c.MaxBytes = n
		case "mem_not_counted_for_evict":
			notCounted = n
		case "maxmemory_policy":
			c.Policy = value
		}
	}
	c.UsedBytes = max(c.UsedBytes-notCounted, 0)
	return c
}
