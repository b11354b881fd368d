package api

import (
	"context"
	"net/http"
	"strings"
	"time"

	"sluice.dev/server/internal/storage/catalog"
)

// Zaqar reports a flavor's capabilities as those of the storage driver of
// its first pool (none without a pool), with its drivers' lists: MongoDB
// claims durability, Redis does not.
var (
	redisCapabilities = []string{"FIFO", "CLAIMS", "AOD", "HIGH_THROUGHPUT"}
	mongoCapabilities = []string{"FIFO", "CLAIMS", "DURABILITY", "AOD", "HIGH_THROUGHPUT"}
)

type flavorJSON struct {
	Name         string    `json:"name"`
	Capabilities *[]string `json:"capabilities,omitempty"`
	PoolList     []string  `json:"pool_list"`
	Href         string    `json:"href"`
}

// showFlavor shows f, with its capabilities when caps is set.
func (a *admin) showFlavor(ctx context.Context, f catalog.Flavor, caps bool) flavorJSON {
	out := flavorJSON{Name: f.Name, PoolList: f.Pools, Href: "/v2/flavors/" + f.Name}
	if out.PoolList == nil {
		out.PoolList = []string{}
	}
	if caps {
		list := []string{}
		if len(f.Pools) > 0 {
			if uri, ok := a.cat.PoolURI(ctx, f.Pools[0]); ok {
				list = redisCapabilities
				if strings.HasPrefix(uri, "mongodb") { // mongodb:// and mongodb+srv://
					list = mongoCapabilities
				}
			}
		}
		out.Capabilities = &list
	}
	return out
}

type flavorBody struct {
	PoolList     *[]string       `json:"pool_list"`
	Capabilities *map[string]any `json:"capabilities"`
}

func (a *admin) listFlavors(w http.ResponseWriter, r *http.Request, c *Call) {
	q := r.URL.Query()
	detailed, _, e := queryBool(q, "detailed")
	if e != nil {
		a.s.fail(w, e)
		return
	}
	flavors, err := a.cat.ListFlavors(c.ctx)
	if err != nil {
		a.fail(w, err, "Flavors could not be listed.", "")
		return
	}
	page, next, e := pageByName(q, len(flavors), func(i int) string { return flavors[i].Name })
	if e != nil {
		a.s.fail(w, e)
		return
	}
	out := make([]flavorJSON, 0, len(page))
	for _, i := range page {
		out = append(out, a.showFlavor(c.ctx, flavors[i], detailed))
	}
	WriteJSON(w, http.StatusOK, map[string]any{"links": nextLinks("/v2/flavors", q, next), "flavors": out})
}

func (a *admin) getFlavor(w http.ResponseWriter, r *http.Request, c *Call) {
	name := r.PathValue("flavor_name")
	f, err := a.cat.GetFlavor(c.ctx, name)
	if err != nil {
		a.fail(w, err, "Flavor could not be read.", "Flavor "+name+" does not exist")
		return
	}
	WriteJSON(w, http.StatusOK, a.showFlavor(c.ctx, f, true))
}

// putFlavor creates or replaces a flavor. Unlike Zaqar an empty pool_list is
// accepted (pools can join later); queues cannot be created in such a
// flavor until one does, and say so.
func (a *admin) putFlavor(w http.ResponseWriter, r *http.Request, c *Call) {
	name := r.PathValue("flavor_name")
	body, e := a.s.readBody(r, c.w)
	var b flavorBody
	if e == nil {
		e = decodeStrict(body, "a flavor", &b)
	}
	if e == nil && b.PoolList == nil {
		e = badBody("'pool_list' is required.")
	}
	if e != nil {
		a.s.fail(w, e)
		return
	}
	f := catalog.Flavor{Name: name, Pools: *b.PoolList}
	if b.Capabilities != nil {
		f.Capabilities = *b.Capabilities
	}
	if _, err := a.cat.PutFlavor(c.ctx, f); err != nil {
		a.fail(w, err, "Flavor could not be created.", "")
		return
	}
	w.Header().Set("Location", "/v2/flavors/"+name)
	writeEmpty(w, http.StatusCreated)
}

func (a *admin) patchFlavor(w http.ResponseWriter, r *http.Request, c *Call) {
	name := r.PathValue("flavor_name")
	body, e := a.s.readBody(r, c.w)
	var b flavorBody
	if e == nil {
		e = decodeStrict(body, "a flavor", &b)
	}
	// Capabilities follow from the pools, so a PATCH without pools would
	// change nothing a client can read: Zaqar refuses it too.
	if e == nil && b.PoolList == nil {
		e = badBody("'pool_list' needs to be specified.")
	}
	if e != nil {
		a.s.fail(w, e)
		return
	}
	f, err := a.cat.GetFlavor(c.ctx, name)
	if err != nil {
		a.fail(w, err, "Flavor could not be read.", "Flavor "+name+" does not exist")
		return
	}
	f.Pools = *b.PoolList
	if b.Capabilities != nil {
		f.Capabilities = *b.Capabilities
	}
	if err := a.cat.ReplaceFlavor(c.ctx, f); err != nil {
		a.fail(w, err, "Flavor could not be updated.", "Flavor "+name+" does not exist")
		return
	}
	WriteJSON(w, http.StatusOK, a.showFlavor(c.ctx, f, true))
}

func (a *admin) deleteFlavor(w http.ResponseWriter, r *http.Request, c *Call) {
	if err := a.cat.DeleteFlavor(c.ctx, r.PathValue("flavor_name")); err != nil && !isNotFound(err) {
		a.fail(w, err, "Flavor could not be deleted.", "")
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// health: GET /v2/health with pools, Zaqar's pooled shape: whether the
// catalog answers, then each pool's reachability (and the default store's).
func (a *admin) health(w http.ResponseWriter, r *http.Request, c *Call) {
	start := time.Now()
	out := map[string]any{"catalog_reachable": a.pd.Ping(c.ctx) == nil}
	ok := out["catalog_reachable"] == true && !a.s.draining.Load()
	for name, err := range a.pd.PoolHealth(c.ctx) {
		st := map[string]any{"storage_reachable": err == nil}
		if err != nil {
			st["error"] = err.Error()
		}
		out[name] = st
	}
	out["seconds"] = time.Since(start).Seconds()
	if a.s.draining.Load() {
		out["draining"] = true
	}
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	WriteJSON(w, status, out)
}
