package storagetest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"sluice.dev/server/internal/storage"
)

// wipeRace is the scaffolding of the cases where workers race a queue's
// wipes (purges, deletes): a logical clock whose ticks stamp each call's
// start and end, and the stop flag the workers poll.
type wipeRace struct {
	clock atomic.Int64
	stop  atomic.Bool
	wg    sync.WaitGroup
}

func (r *wipeRace) tick() int64 { return r.clock.Add(1) }

// running tells a worker's loop to go on.
func (r *wipeRace) running() bool { return !r.stop.Load() }

// wipe calls wipe rounds times, pause apart, while the workers run; then
// lets them run for one more pause, stops them and waits for them. It
// returns the span of each call.
func (r *wipeRace) wipe(e *env, rounds int, pause time.Duration, wipe func(round int) error) [][2]int64 {
	spans := make([][2]int64, 0, rounds)
	for round := range rounds {
		time.Sleep(pause)
		start := r.tick()
		if err := wipe(round); err != nil {
			r.stop.Store(true)
			r.wg.Wait()
			e.t.Fatalf("wipe %d: %v", round, err)
		}
		spans = append(spans, [2]int64{start, r.tick()})
	}
	time.Sleep(pause)
	r.stop.Store(true)
	r.wg.Wait()
	return spans
}

// listEvery pages through every message of q, claimed and delayed ones
// included, and counts how often each id was listed.
func listEvery(ctx context.Context, d storage.Driver, q storage.QueueRef) (map[string]int, error) {
	listed := map[string]int{}
	marker := ""
	for range 10000 {
		msgs, next, err := d.Messages().List(ctx, q, storage.ListMessagesOptions{Marker: marker, Limit: 20, Echo: true, IncludeClaimed: true, IncludeDelayed: true})
		if err != nil && !storage.Is(err, storage.NotFound) {
			return nil, err
		}
		for _, m := range msgs {
			listed[m.ID]++
		}
		if next == "" || len(msgs) == 0 {
			break
		}
		marker = next
	}
	return listed, nil
}
