package pooling

import (
	"context"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
)

// Depth totals the depth of the default store and of every reachable pool.
func (d *Driver) Depth(ctx context.Context) (storage.Depth, error) {
	var total storage.Depth
	for _, drv := range d.sources(ctx) {
		if dr, ok := drv.(storage.DepthReporter); ok {
			if dd, err := dr.Depth(ctx); err == nil {
				total.Free += dd.Free
				total.Claimed += dd.Claimed
			}
		}
	}
	return total, nil
}

// Leftovers lists what any pool still stores for the project, and the
// catalog placements it still holds (a deleted queue must be forgotten).
func (d *Driver) Leftovers(ctx context.Context, project string) ([]string, error) {
	var out []string
	for name, drv := range d.sources(ctx) {
		if in, ok := drv.(storage.Inspector); ok {
			left, err := in.Leftovers(ctx, project)
			if err != nil {
				return nil, err
			}
			for _, l := range left {
				out = append(out, name+": "+l)
			}
		}
	}
	placed, err := d.cat.Store().Placements(ctx, project)
	if err != nil {
		return nil, err
	}
	for _, p := range placed {
		out = append(out, "catalog placement: "+p)
	}
	return out, nil
}

// sources returns the default store and every pool that can be opened.
func (d *Driver) sources(ctx context.Context) map[string]storage.Driver {
	out := map[string]storage.Driver{catalog.DefaultPool: d.fallback}
	for _, p := range d.cat.CachedPools() {
		if drv, err := d.pool(ctx, p.Name); err == nil {
			out[p.Name] = drv
		}
	}
	return out
}
