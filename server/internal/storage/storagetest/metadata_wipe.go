package storagetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

// testMetadataRacesQueueDeletes: a queue's metadata is replaced over and
// over (which creates the queue) while the queue is deleted over and over.
// Every call is stamped with a logical start and end. At the end the queue
// exists and holds the metadata of one more replacement made after the
// last delete ended: a replacement that raced a delete must not leave the
// queue half there (through the pooled driver: written to a pool
// after the delete dropped the placement, and answered from elsewhere).
func testMetadataRacesQueueDeletes(e *env) {
	q := e.queue("metawiped")
	qs := e.d.Queues()
	var r wipeRace
	type set struct {
		n          int
		start, end int64
	}
	var (
		mu   sync.Mutex
		sets []set
	)
	r.wg.Go(func() {
		for n := 1; r.running() && n < 1_000_000; n++ {
			start := r.tick()
			err := qs.SetMetadata(e.ctx, q, storage.Metadata{"n": json.Number(fmt.Sprint(n))})
			end := r.tick()
			if err != nil {
				e.t.Errorf("set metadata %d: %v", n, err)
				return
			}
			mu.Lock()
			sets = append(sets, set{n, start, end})
			mu.Unlock()
		}
	})
	deletes := r.wipe(e, 6, 10*time.Millisecond, func(int) error { return qs.Delete(e.ctx, q) })
	if e.t.Failed() {
		return
	}
	last := deletes[len(deletes)-1]
	// One more, certainly after the last delete (under load the setter may
	// not have made one in the pause after it).
	start := r.tick()
	final := sets[len(sets)-1].n + 1
	if err := qs.SetMetadata(e.ctx, q, storage.Metadata{"n": json.Number(fmt.Sprint(final))}); err != nil {
		e.t.Fatal(err)
	}
	sets = append(sets, set{final, start, r.tick()})
	got, err := qs.GetMetadata(e.ctx, q)
	if err != nil {
		e.t.Fatal(err)
	}
	exists, err := qs.Exists(e.ctx, q)
	if err != nil {
		e.t.Fatal(err)
	}
	after := sets[len(sets)-1]
	if !exists || fmt.Sprint(got["n"]) != fmt.Sprint(after.n) {
		e.t.Errorf("after the last replacement (n=%d at %d-%d, after the last delete at %d-%d): exists %v, metadata %v", after.n, after.start, after.end, last[0], last[1], exists, got)
	}
}
