package pooling

import (
	"context"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

// capacityEvery is how often the driver reads every pool's capacity: one
// INFO per pool, so placement and the gauges follow a filling shard
// within seconds at no cost to requests.
const capacityEvery = 5 * time.Second

// PoolCapacity reads pool name's capacity now. A pool whose driver cannot
// tell (no CapacityReporter) reads as the zero Capacity: no limit known.
func (d *Driver) PoolCapacity(ctx context.Context, name string) (storage.Capacity, error) {
	drv, err := d.pool(ctx, name)
	if err != nil {
		return storage.Capacity{}, err
	}
	rep := storage.CapacityOf(drv)
	if rep == nil {
		return storage.Capacity{}, nil
	}
	return rep.Capacity(ctx)
}

// Capacities are the last readings of the registered pools that answered.
func (d *Driver) Capacities() map[string]storage.Capacity {
	d.capMu.Lock()
	defer d.capMu.Unlock()
	out := make(map[string]storage.Capacity, len(d.readings))
	for k, v := range d.readings {
		out[k] = v
	}
	return out
}

// readCapacities reads every registered pool's capacity, keeps the
// readings and tells the catalog which pools are crowded.
func (d *Driver) readCapacities(ctx context.Context) {
	pools := d.cat.CachedPools()
	got := make(map[string]storage.Capacity, len(pools))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range pools {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, capacityEvery)
			defer cancel()
			c, err := d.PoolCapacity(ctx, name)
			if err != nil {
				return // not crowded, and no gauge: sluice_storage_up says why
			}
			mu.Lock()
			got[name] = c
			mu.Unlock()
		}(p.Name)
	}
	wg.Wait()
	crowded := map[string]bool{}
	for name, c := range got {
		if c.Crowded() {
			crowded[name] = true
		}
	}
	d.cat.SetCrowded(crowded)
	d.capMu.Lock()
	d.readings = got
	d.capMu.Unlock()
}

// watchCapacity reads capacities every capacityEvery until Close.
func (d *Driver) watchCapacity() {
	defer close(d.watchDone)
	t := time.NewTicker(capacityEvery)
	defer t.Stop()
	// Close cancels a reading under way: a pool that does not answer
	// never holds it up.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-d.stopWatch; cancel() }()
	for {
		d.readCapacities(ctx)
		select {
		case <-d.stopWatch:
			return
		case <-t.C:
		}
	}
}
