package storagetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"sluice.dev/server/internal/storage"
)

// testMetadataRacesQueueDeletes: a queue's metadata is replaced over and
// over (which creates the queue) while the queue is deleted over and over.
// Every call is stamped with a logical start and end. At the end the queue
// exists and holds the metadata of the last replacement, which began after
// the last delete ended: a replacement that raced a delete must not leave
// the queue half there (through the pooled driver: written to a pool
// after the delete dropped the placement, and answered from elsewhere).
func testMetadataRacesQueueDeletes(e *env) {
	q := e.queue("metawiped")
	qs := e.d.Queues()
	var clock atomic.Int64
	tick := func() int64 { return clock.Add(1) }
	type set struct {
		n          int
		start, end int64
	}
	var (
		mu      sync.Mutex
		sets    []set
		deletes [][2]int64
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	wg.Go(func() {
		for n := 1; !stop.Load() && n < 1_000_000; n++ {
			start := tick()
			err := qs.SetMetadata(e.ctx, q, storage.Metadata{"n": json.Number(fmt.Sprint(n))})
			end := tick()
			if err != nil {
				e.t.Errorf("set metadata %d: %v", n, err)
				return
			}
			mu.Lock()
			sets = append(sets, set{n, start, end})
			mu.Unlock()
		}
	})
	for range 6 {
		time.Sleep(10 * time.Millisecond)
		start := tick()
		if err := qs.Delete(e.ctx, q); err != nil {
			e.t.Fatalf("delete queue: %v", err)
		}
		deletes = append(deletes, [2]int64{start, tick()})
	}
	time.Sleep(10 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if e.t.Failed() {
		return
	}
	last := deletes[len(deletes)-1]
	got, err := qs.GetMetadata(e.ctx, q)
	if err != nil {
		e.t.Fatal(err)
	}
	exists, err := qs.Exists(e.ctx, q)
	if err != nil {
		e.t.Fatal(err)
	}
	after := sets[len(sets)-1] // the producer runs on after the last delete
	if after.start < last[1] {
		e.t.Fatalf("no replacement began after the last delete (%d-%d)", last[0], last[1])
	}
	if !exists || fmt.Sprint(got["n"]) != fmt.Sprint(after.n) {
		e.t.Errorf("after the last replacement (n=%d at %d-%d, after the last delete at %d-%d): exists %v, metadata %v", after.n, after.start, after.end, last[0], last[1], exists, got)
	}
}
