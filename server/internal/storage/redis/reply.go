package redis

import (
	"encoding/json"
	"strconv"
	"time"

	"sluice.dev/server/internal/storage"
)

// toInt reads an integer reply element (Lua numbers arrive as int64,
// stored fields as strings).
func toInt(v any) int64 {
	switch t := v.(type) {
	case int64:
		return t
	case string:
		n, _ := strconv.ParseInt(t, 10, 64)
		return n
	}
	return 0
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// timeMS is msTime's inverse: t in Unix milliseconds, 0 for the zero time,
// as the scripts take times.
func timeMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// parseMessage reads the array lib.lua's load builds: {id, body, created,
// expires, delay, client, claim id, claim expiry, claim count}.
func parseMessage(v any) (storage.Message, bool) {
	f, ok := v.([]any)
	if !ok || len(f) != 9 {
		return storage.Message{}, false
	}
	created, expires := toInt(f[2]), toInt(f[3])
	return storage.Message{
		ID:           toString(f[0]),
		Body:         json.RawMessage(toString(f[1])),
		Created:      msTime(created),
		TTL:          time.Duration(expires-created) * time.Millisecond,
		DelayUntil:   msTime(toInt(f[4])),
		ClientID:     toString(f[5]),
		ClaimID:      toString(f[6]),
		ClaimExpires: msTime(toInt(f[7])),
		ClaimCount:   int(toInt(f[8])),
	}, true
}

// parseMessages reads a list of load arrays.
func parseMessages(v any) []storage.Message {
	list, _ := v.([]any)
	out := make([]storage.Message, 0, len(list))
	for _, e := range list {
		if m, ok := parseMessage(e); ok {
			out = append(out, m)
		}
	}
	return out
}
