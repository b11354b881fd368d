package api

import (
	"fmt"
	"sync"
	"testing"

	"sluice.dev/server/internal/config"
)

// TestConcurrentMetadataPatches: concurrent PATCHes adding different keys
// all answer 200, so every key they added must survive.
func TestConcurrentMetadataPatches(t *testing.T) { forEachStore(t, testConcurrentMetadataPatches) }

func testConcurrentMetadataPatches(t *testing.T, store func(*config.Options)) {
	const writers = 20
	ts := startServer(t, store)
	ts.must(201, "PUT", "/v2/queues/meta", std(), `{"base":0}`)
	patch := std("Content-Type", patchMediaType)
	var wg sync.WaitGroup
	status := make([]int, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`[{"op":"add","path":"/metadata/k%d","value":%d}]`, i, i)
			status[i] = ts.do("PATCH", "/v2/queues/meta", patch, body).status
		}()
	}
	wg.Wait()
	meta := ts.must(200, "GET", "/v2/queues/meta", std(), "").json(t)
	for i := range writers {
		key := fmt.Sprintf("k%d", i)
		if status[i] != 200 {
			t.Errorf("PATCH adding %s answered %d", key, status[i])
		} else if meta[key] != float64(i) {
			t.Errorf("acknowledged key %s lost: metadata %v", key, meta)
		}
	}
}
