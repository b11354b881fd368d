package catalog

import (
	"context"
	"fmt"

	"sluice.dev/server/internal/storage"
)

// PutPool validates and registers (or replaces) a pool. The URI is probed
// first unless force is set: an unreachable pool is Invalid.
func (c *Catalog) PutPool(ctx context.Context, p Pool, force bool) (bool, error) {
	const op = "catalog.pools.put"
	if err := c.checkPool(ctx, op, p, force); err != nil {
		return false, err
	}
	created, err := c.store.PutPool(ctx, p)
	if err != nil {
		return false, err
	}
	return created, c.Refresh(ctx)
}

// PoolPatch is a partial update; nil fields stay as they are.
type PoolPatch struct {
	URI     *string
	Weight  *int
	Flavor  *string
	Options map[string]any
}

// PatchPool applies a partial update and returns the new pool. A changed
// URI is probed like a new one.
func (c *Catalog) PatchPool(ctx context.Context, name string, patch PoolPatch, force bool) (Pool, error) {
	const op = "catalog.pools.patch"
	p, err := c.store.GetPool(ctx, name)
	if err != nil {
		return Pool{}, err
	}
	probeURI := false
	if patch.URI != nil && *patch.URI != p.URI {
		p.URI, probeURI = *patch.URI, true
	}
	if patch.Weight != nil {
		p.Weight = *patch.Weight
	}
	if patch.Flavor != nil {
		p.Flavor = *patch.Flavor
	}
	if patch.Options != nil {
		p.Options = patch.Options
	}
	if err := c.checkPool(ctx, op, p, force || !probeURI); err != nil {
		return Pool{}, err
	}
	if err := c.store.ReplacePool(ctx, p); err != nil {
		return Pool{}, err
	}
	return p, c.Refresh(ctx)
}

func (c *Catalog) checkPool(ctx context.Context, op string, p Pool, force bool) error {
	if !ValidName(p.Name) {
		return storage.E(op, storage.Invalid, fmt.Sprintf("pool name %q: use 1-64 letters, digits, '_' or '-'", p.Name))
	}
	if p.Weight < 0 || p.Weight > 1<<32-1 {
		return storage.E(op, storage.Invalid, fmt.Sprintf("pool weight %d: must be between 0 and 4294967295", p.Weight))
	}
	if err := validURI(p.URI); err != nil {
		return storage.E(op, storage.Invalid, err)
	}
	// Checked here before the probe, so a taken URI is refused without
	// connecting to it; the store checks again as it writes, which is what
	// holds against concurrent registrations. URIs that differ as text but
	// reach one database are caught when a queue would move (Mover.migrate).
	pools, err := c.store.ListPools(ctx)
	if err != nil {
		return err
	}
	for _, other := range pools {
		if other.URI == p.URI && other.Name != p.Name {
			return uriTaken(op, other.Name, p.URI)
		}
	}
	if p.Flavor != "" {
		if _, err := c.store.GetFlavor(ctx, p.Flavor); err != nil {
			if storage.Is(err, storage.NotFound) {
				return noFlavor(op, p.Flavor)
			}
			return err
		}
	}
	if !force {
		if err := c.opts.Probe(ctx, p.URI); err != nil {
			return storage.E(op, storage.Invalid, fmt.Sprintf("cannot connect to %s: %v (register it anyway with ?force=true)", p.URI, err))
		}
	}
	return nil
}

// DeletePool removes a pool that holds no queue (Conflict otherwise).
func (c *Catalog) DeletePool(ctx context.Context, name string) error {
	if err := c.store.DeletePool(ctx, name); err != nil {
		return err
	}
	return c.Refresh(ctx)
}

// PutFlavor creates or replaces a flavor whose pools are exactly f.Pools.
func (c *Catalog) PutFlavor(ctx context.Context, f Flavor) (bool, error) {
	if err := checkFlavor("catalog.flavors.put", &f); err != nil {
		return false, err
	}
	created, err := c.store.PutFlavor(ctx, f)
	if err != nil {
		return false, err
	}
	return created, c.Refresh(ctx)
}

// ReplaceFlavor is a patch's write: f replaces a flavor that must still
// exist (NotFound otherwise), so a patch racing the flavor's delete cannot
// bring it back.
func (c *Catalog) ReplaceFlavor(ctx context.Context, f Flavor) error {
	if err := checkFlavor("catalog.flavors.patch", &f); err != nil {
		return err
	}
	if err := c.store.ReplaceFlavor(ctx, f); err != nil {
		return err
	}
	return c.Refresh(ctx)
}

func checkFlavor(op string, f *Flavor) error {
	if !ValidName(f.Name) {
		return storage.E(op, storage.Invalid, fmt.Sprintf("flavor name %q: use 1-64 letters, digits, '_' or '-'", f.Name))
	}
	seen := map[string]bool{}
	for _, p := range f.Pools {
		if seen[p] {
			return storage.E(op, storage.Invalid, fmt.Sprintf("pool %s is listed twice", p))
		}
		seen[p] = true
	}
	if f.Pools == nil {
		f.Pools = []string{}
	}
	return nil
}

// DeleteFlavor removes a flavor; its pools stay registered.
func (c *Catalog) DeleteFlavor(ctx context.Context, name string) error {
	if err := c.store.DeleteFlavor(ctx, name); err != nil {
		return err
	}
	return c.Refresh(ctx)
}

// GetPool, ListPools, GetFlavor and ListFlavors read the store directly, so
// an admin always sees the current state.

// GetPool returns a pool or NotFound.
func (c *Catalog) GetPool(ctx context.Context, name string) (Pool, error) {
	return c.store.GetPool(ctx, name)
}

// ListPools returns every pool sorted by name.
func (c *Catalog) ListPools(ctx context.Context) ([]Pool, error) { return c.store.ListPools(ctx) }

// GetFlavor returns a flavor or NotFound.
func (c *Catalog) GetFlavor(ctx context.Context, name string) (Flavor, error) {
	return c.store.GetFlavor(ctx, name)
}

// ListFlavors returns every flavor sorted by name.
func (c *Catalog) ListFlavors(ctx context.Context) ([]Flavor, error) {
	return c.store.ListFlavors(ctx)
}
