package storagetest

import (
	"errors"
	"fmt"
	"sync"

	"sluice.dev/server/internal/storage"
)

var metadataCases = []testCase{
	{"Metadata/ConcurrentUpdates", testConcurrentMetadataUpdates},
	{"Metadata/UpdateSemantics", testMetadataUpdateSemantics},
	{"Metadata/ReplaceRacesUpdate", testMetadataReplaceRacesUpdate},
	{"Metadata/RacesQueueDeletes", testMetadataRacesQueueDeletes},
}

// metadataRaceRounds is how many times testMetadataReplaceRacesUpdate
// races a replacement against an update.
const metadataRaceRounds = 20

// testMetadataReplaceRacesUpdate: a replacement of a queue's metadata (a
// PUT) racing an update of it (a PATCH) is never lost: whichever lands
// first, the metadata ends with the replacement's key, and with the
// update's key only if the update came second and so saw it.
func testMetadataReplaceRacesUpdate(e *env) {
	q := e.queue("meta-put")
	qs := e.d.Queues()
	if _, err := qs.Create(e.ctx, q, storage.Metadata{"base": "x"}); err != nil {
		e.t.Fatal(err)
	}
	for round := range metadataRaceRounds {
		put, patch := fmt.Sprintf("put%02d", round), fmt.Sprintf("patch%02d", round)
		var wg sync.WaitGroup
		var setErr, updErr error
		var sawPut bool
		wg.Go(func() { setErr = qs.SetMetadata(e.ctx, q, storage.Metadata{put: true}) })
		wg.Go(func() {
			_, updErr = qs.UpdateMetadata(e.ctx, q, func(m storage.Metadata) (storage.Metadata, error) {
				_, sawPut = m[put]
				m[patch] = true
				return m, nil
			})
		})
		wg.Wait()
		if setErr != nil || updErr != nil {
			e.t.Fatalf("round %d: replace %v, update %v", round, setErr, updErr)
		}
		got, err := qs.GetMetadata(e.ctx, q)
		if err != nil {
			e.t.Fatal(err)
		}
		if _, ok := got[put]; !ok {
			e.t.Fatalf("round %d: the acknowledged replacement was lost: %v", round, got)
		}
		if _, ok := got[patch]; ok != sawPut {
			e.t.Fatalf("round %d: update saw the replacement %v, yet the metadata is %v", round, sawPut, got)
		}
	}
}

// testConcurrentMetadataUpdates: writers that each add their own key at the
// same time all succeed, and every key survives (no lost update).
func testConcurrentMetadataUpdates(e *env) {
	const writers = 20
	q := e.queue("meta-race")
	if _, err := e.d.Queues().Create(e.ctx, q, storage.Metadata{"base": "x"}); err != nil {
		e.t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.d.Queues().UpdateMetadata(e.ctx, q, func(m storage.Metadata) (storage.Metadata, error) {
				m[fmt.Sprintf("k%02d", i)] = fmt.Sprint(i)
				return m, nil
			})
		}()
	}
	wg.Wait()
	got, err := e.d.Queues().GetMetadata(e.ctx, q)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range writers {
		key := fmt.Sprintf("k%02d", i)
		if errs[i] != nil {
			e.t.Errorf("update adding %s: %v", key, errs[i])
		} else if got[key] != fmt.Sprint(i) {
			e.t.Errorf("acknowledged update of %s lost; metadata %v", key, got)
		}
	}
	if got["base"] != "x" {
		e.t.Errorf("base key lost: %v", got)
	}
}

// testMetadataUpdateSemantics: the update sees the stored metadata, its
// result is stored and returned, its error aborts without a write, and a
// missing queue is NotFound (and is not created).
func testMetadataUpdateSemantics(e *env) {
	qs := e.d.Queues()
	q := e.queue("meta-upd")
	if _, err := qs.Create(e.ctx, q, storage.Metadata{"a": "1", "nested": map[string]any{"b": []any{"c"}}}); err != nil {
		e.t.Fatal(err)
	}
	out, err := qs.UpdateMetadata(e.ctx, q, func(m storage.Metadata) (storage.Metadata, error) {
		if m["a"] != "1" {
			e.t.Errorf("update saw %v", m)
		}
		delete(m, "a")
		m["z"] = true
		return m, nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	got, _ := qs.GetMetadata(e.ctx, q)
	if _, has := got["a"]; has || got["z"] != true || out["z"] != true || got["nested"] == nil {
		e.t.Errorf("after update: stored %v, returned %v", got, out)
	}
	stop := errors.New("rejected")
	if _, err := qs.UpdateMetadata(e.ctx, q, func(m storage.Metadata) (storage.Metadata, error) {
		m["z"] = false
		return nil, stop
	}); !errors.Is(err, stop) {
		e.t.Errorf("update error came back as %v, want the update's own error", err)
	}
	if got, _ := qs.GetMetadata(e.ctx, q); got["z"] != true {
		e.t.Errorf("a rejected update was stored: %v", got)
	}
	missing := e.queue("meta-none")
	_, err = qs.UpdateMetadata(e.ctx, missing, func(m storage.Metadata) (storage.Metadata, error) { return m, nil })
	e.wantKind("update of a missing queue", err, kind(storage.NotFound))
	if ok, _ := qs.Exists(e.ctx, missing); ok {
		e.t.Errorf("update of a missing queue created it")
	}
}
