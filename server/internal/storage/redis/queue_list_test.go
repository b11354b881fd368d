package redis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/storagetest"
)

// TestQueueNameFilterPastScanBudget: a name filter finds queues that sort
// after more names than one listing script scans, and pages through them.
func TestQueueNameFilterPastScanBudget(t *testing.T) {
	const many = 10050
	d := open(t, storagetest.NewClock())
	ctx := context.Background()
	project := fmt.Sprintf("many-%p", t)
	names := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range names {
				if _, err := d.Queues().Create(ctx, storage.QueueRef{Project: project, Name: n}, nil); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for i := range many {
		names <- fmt.Sprintf("q%05d", i)
	}
	close(names)
	wg.Wait()
	t.Cleanup(func() {
		for i := range many {
			_ = d.Queues().Delete(ctx, storage.QueueRef{Project: project, Name: fmt.Sprintf("q%05d", i)})
		}
	})
	// "q1004" matches q10040..q10049 only, all past the first 10,000 names.
	var got []string
	marker := ""
	for page := 0; page < 10; page++ {
		qs, err := d.Queues().List(ctx, project, storage.ListQueuesOptions{Marker: marker, Limit: 4, Name: "q1004"})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			got = append(got, q.Name)
		}
		if len(qs) < 4 {
			break
		}
		marker = qs[len(qs)-1].Name
	}
	want := []string{"q10040", "q10041", "q10042", "q10043", "q10044", "q10045", "q10046", "q10047", "q10048", "q10049"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("filtered listing = %v, want %v", got, want)
	}
}
