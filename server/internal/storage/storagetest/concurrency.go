package storagetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

var concurrencyCases = []testCase{
	{"Concurrency/ProducersAndConsumers", testProducersConsumers},
	{"Concurrency/Pop", testConcurrentPop},
	{"Concurrency/Mix", testConcurrentMix},
	{"Concurrency/WipesRacePosts", testWipesRacePosts},
}

// testProducersConsumers runs producers and claim-and-delete consumers at
// once on one queue: every message must be consumed exactly once and the
// queue end empty.
func testProducersConsumers(e *env) {
	const (
		producers = 2
		consumers = 3
		batches   = 5
		batchSize = 4
		total     = producers * batches * batchSize
	)
	q := e.queue("busy")
	var (
		mu       sync.Mutex
		seen     = map[string]int{}
		errs     []error
		consumed int
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; b < batches; b++ {
				msgs := make([]storage.NewMessage, batchSize)
				for i := range msgs {
					msgs[i] = storage.NewMessage{TTL: time.Hour, Body: json.RawMessage(fmt.Sprintf(`"%d-%d-%d"`, p, b, i))}
				}
				if _, err := e.d.Messages().Post(e.ctx, q, fmt.Sprint("producer-", p), msgs); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	// A safety bound so a broken driver cannot hang the run, generous
	// enough for slow backends (FerretDB on a loaded machine); it is not a
	// performance requirement.
	deadline := time.Now().Add(2 * time.Minute)
	for c := 0; c < consumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				mu.Lock()
				done := consumed >= total || len(errs) > 0
				mu.Unlock()
				if done {
					return
				}
				cl, err := e.d.Claims().Create(e.ctx, q, storage.ClaimOptions{TTL: time.Hour, Grace: time.Minute, Limit: batchSize})
				if err != nil {
					fail(err)
					return
				}
				for _, m := range cl.Messages {
					if err := e.d.Messages().Delete(e.ctx, q, m.ID, cl.ID); err != nil {
						fail(fmt.Errorf("delete %s with its claim: %w", m.ID, err))
						return
					}
					mu.Lock()
					seen[string(m.Body)]++
					consumed++
					mu.Unlock()
				}
				if len(cl.Messages) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		e.t.Error(err)
	}
	if consumed != total || len(seen) != total {
		e.t.Errorf("consumed %d (%d distinct) of %d messages", consumed, len(seen), total)
	}
	for body, n := range seen {
		if n != 1 {
			e.t.Errorf("message %s consumed %d times", body, n)
		}
	}
	if st := e.stats(q); st.Total != 0 {
		e.t.Errorf("queue not empty after consuming everything: %+v", st)
	}
}

func testConcurrentPop(e *env) {
	const n, workers = 200, 6
	q := e.queue("popped-concurrently")
	e.post(q, "c", n, time.Hour)
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ { // bounded; stops at the first empty pop
				got, err := e.d.Messages().Pop(e.ctx, q, 3)
				if err != nil {
					e.t.Error(err)
					return
				}
				mu.Lock()
				for _, m := range got {
					seen[m.ID]++
				}
				mu.Unlock()
				if len(got) == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		e.t.Errorf("popped %d distinct messages, want %d", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			e.t.Errorf("message %s popped %d times", id, k)
		}
	}
}
