package fault

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// FillKeyPrefix names the filler keys. It must not start with "sluice:",
// the prefix of sluice-server's own keys, so that nothing a fill removes
// can be the server's.
const FillKeyPrefix = "sluice-fault:fill:"

const (
	fillValueSize = 64 << 10
	fillBatch     = 16 // commands per pipeline
	unlinkBatch   = 512
	scanCount     = 1000
	// topUpEvery is how often a held fill checks that the shard still
	// refuses writes: the server's deletes free memory, and a shard with
	// room is no longer full. It is shorter than the 2 s after which
	// Redis shrinks an idle client's query buffer, so the fill's own
	// buffer, counted when Redis refused it, stays counted.
	topUpEvery = time.Second
)

// Fill makes the shard full: filler string keys of 64 KiB, without TTL,
// until Redis refuses writes (OOM), topped up while held, then all
// removed. It refuses a shard without maxmemory (Redis would grow until
// the container is OOM-killed) and one whose policy evicts (the filler
// would push the server's data out instead of getting writes refused).
//
// Each key is written with SETRANGE at offset 64 KiB-1, not SET: Redis
// refuses a write when its used memory is over maxmemory, counting the
// query buffer of the command being read, so a 64 KiB SET is refused
// while a small post still fits. A short command that allocates 64 KiB is
// refused only when a post would be.
type Fill struct {
	Redis Redis

	rc        *redis.Client
	maxmemory int64
	keyCap    int   // bound on keys written, whatever used_memory says
	next      int   // keys named so far: FillKeyPrefix + 0 .. next-1
	written   int   // keys Redis accepted
	lastUsed  int64 // used_memory after the last batch
	peakUsed  int64
	full      bool   // Redis refused a write (or used_memory passed maxmemory)
	until     string // what ended the first fill
}

// FillDetails is what the injected line reports.
type FillDetails struct {
	Keys        int     `json:"keys"`
	Bytes       int64   `json:"bytes"`
	UsedMemory  int64   `json:"usedMemory"`
	Maxmemory   int64   `json:"maxmemory"`
	UsedPercent float64 `json:"usedPercent"`
	Full        bool    `json:"full"`
	FilledUntil string  `json:"filledUntil"` // "oom", "used_memory", "key cap" or "duration"
	KeyCap      int     `json:"keyCap"`
	KeyPrefix   string  `json:"keyPrefix"`
}

// FillUndone is what the undone line reports.
type FillUndone struct {
	PeakKeys       int   `json:"peakKeys"`
	PeakUsedMemory int64 `json:"peakUsedMemory"`
	KeysRemoved    int64 `json:"keysRemoved"`
	// StaleKeysRemoved are filler keys of an earlier fill that was killed
	// before it could remove them.
	StaleKeysRemoved int64 `json:"staleKeysRemoved"`
	UsedMemory       int64 `json:"usedMemory"`
	Maxmemory        int64 `json:"maxmemory"`
}

func (f *Fill) Kind() string { return "fill" }

func (f *Fill) Inject(ctx context.Context) (_ any, err error) {
	f.rc = f.Redis.client()
	defer func() {
		if err != nil {
			if f.next > 0 {
				uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), UndoTimeout)
				if _, uerr := f.removeKeys(uctx); uerr != nil {
					err = errors.Join(err, uerr)
				}
				cancel()
			}
			_ = f.rc.Close()
		}
	}()
	maxmemory, policy, err := memoryLimits(ctx, f.rc)
	if err != nil {
		return nil, fmt.Errorf("read the shard's maxmemory: %w", err)
	}
	if maxmemory == 0 {
		return nil, errors.New("the shard has no maxmemory: filling it would get it OOM-killed, not refused")
	}
	if policy != "noeviction" {
		return nil, fmt.Errorf("the shard's maxmemory-policy is %s, not noeviction: filling it would evict its keys, not refuse writes", policy)
	}
	f.maxmemory = maxmemory
	f.keyCap = int(maxmemory/fillValueSize*2 + 16)
	f.until, err = f.fill(ctx)
	if err != nil {
		return nil, err
	}
	return FillDetails{
		Keys: f.written, Bytes: int64(f.written) * fillValueSize,
		UsedMemory: f.lastUsed, Maxmemory: f.maxmemory, UsedPercent: percent(f.lastUsed, f.maxmemory),
		Full: f.full, FilledUntil: f.until, KeyCap: f.keyCap, KeyPrefix: FillKeyPrefix,
	}, nil
}

func fillKey(i int) string { return FillKeyPrefix + strconv.Itoa(i) }

func isOOM(err error) bool { return strings.HasPrefix(err.Error(), "OOM") }

// fill writes filler keys until Redis answers OOM (or used_memory passes
// maxmemory), the key cap is reached or ctx ends, and returns which
// ("oom", "used_memory", "key cap", "duration").
func (f *Fill) fill(ctx context.Context) (string, error) {
	for {
		if f.written >= f.keyCap {
			return "key cap", nil
		}
		if ctx.Err() != nil {
			return "duration", nil
		}
		n := min(fillBatch, f.keyCap-f.written)
		first := f.next
		f.next += n // named before sending: a command cut short may still have landed
		pipe := f.rc.Pipeline()
		cmds := make([]*redis.IntCmd, n)
		for i := range cmds {
			cmds[i] = pipe.SetRange(ctx, fillKey(first+i), fillValueSize-1, "f")
		}
		_, _ = pipe.Exec(ctx)
		oom := 0
		for _, c := range cmds {
			switch err := c.Err(); {
			case err == nil:
				f.written++
			case isOOM(err):
				oom++
			case ctx.Err() != nil:
				return "duration", nil
			default:
				return "", fmt.Errorf("redis SETRANGE %v: %w", c.Args()[1], err)
			}
		}
		if oom == n {
			f.next = first // none of these keys exists: use the names again
		}
		m, err := readMemoryInfo(ctx, f.rc)
		if err != nil {
			if ctx.Err() != nil {
				return "duration", nil
			}
			return "", err
		}
		f.lastUsed = m.used
		f.peakUsed = max(f.peakUsed, m.used)
		switch {
		case oom > 0:
			f.full = true
			return "oom", nil
		case m.used > f.maxmemory:
			f.full = true
			return "used_memory", nil
		}
	}
}

// Hold writes again every topUpEvery: refused at once while the shard is
// full, filling what the server freed otherwise.
func (f *Fill) Hold(ctx context.Context) error {
	t := time.NewTicker(topUpEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := f.fill(ctx); err != nil {
			return fmt.Errorf("keep the shard full: %w", err)
		}
	}
}

func (f *Fill) Undo(ctx context.Context) (any, error) {
	defer f.rc.Close()
	out := FillUndone{PeakKeys: f.written, PeakUsedMemory: f.peakUsed, Maxmemory: f.maxmemory}
	removed, err := f.removeKeys(ctx)
	out.KeysRemoved = removed
	if err != nil {
		return out, err
	}
	out.StaleKeysRemoved, err = f.removeStale(ctx)
	if err != nil {
		return out, err
	}
	if m, err := readMemoryInfo(ctx, f.rc); err == nil {
		out.UsedMemory = m.used
	}
	return out, nil
}

// removeKeys unlinks every key the fill named (UNLINK: the memory is freed
// off Redis' main thread, which a shard under load notices less).
func (f *Fill) removeKeys(ctx context.Context) (int64, error) {
	var removed int64
	for lo := 0; lo < f.next; lo += unlinkBatch {
		hi := min(lo+unlinkBatch, f.next)
		keys := make([]string, 0, hi-lo)
		for i := lo; i < hi; i++ {
			keys = append(keys, fillKey(i))
		}
		n, err := f.rc.Unlink(ctx, keys...).Result()
		if err != nil {
			return removed, fmt.Errorf("redis UNLINK %s..%d: %w (the keys from there on remain)", fillKey(lo), f.next-1, err)
		}
		removed += n
	}
	return removed, nil
}

// removeStale unlinks filler keys this fill did not name: left by an
// earlier fill that was killed before its undo.
func (f *Fill) removeStale(ctx context.Context) (int64, error) {
	var removed int64
	var cursor uint64
	for {
		keys, next, err := f.rc.Scan(ctx, cursor, FillKeyPrefix+"*", scanCount).Result()
		if err != nil {
			return removed, fmt.Errorf("redis SCAN %s*: %w", FillKeyPrefix, err)
		}
		if len(keys) > 0 {
			n, err := f.rc.Unlink(ctx, keys...).Result()
			if err != nil {
				return removed, fmt.Errorf("redis UNLINK stale filler keys: %w", err)
			}
			removed += n
		}
		if next == 0 {
			return removed, nil
		}
		cursor = next
	}
}

func (f *Fill) Summary(held time.Duration, stoppedBy string) string {
	s := fmt.Sprintf("filled %d keys (%s) to used_memory %.0f%% of maxmemory %s", f.written,
		mib(int64(f.written)*fillValueSize), percent(f.peakUsed, f.maxmemory), mib(f.maxmemory))
	if !f.full {
		first := map[string]string{"key cap": "the key cap was reached first", "duration": "the duration ended first"}[f.until]
		s += " without an OOM answer (" + first + ")"
	}
	return s + fmt.Sprintf(" for %s%s, then removed them", roundHeld(held), stoppedSuffix(stoppedBy))
}

func percent(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return math.Round(float64(part)/float64(whole)*1000) / 10
}

// mib prints a size as "40 MiB" or "39.2 MiB".
func mib(b int64) string {
	v := float64(b) / (1 << 20)
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f MiB", v)
	}
	return fmt.Sprintf("%.1f MiB", v)
}
