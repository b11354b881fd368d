package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
	"sluice.dev/server/internal/storage/encrypt"
	"sluice.dev/server/internal/storage/pooling"
)

// EnablePooling puts the pooled driver over cat in front of the server's
// store and mounts the pools and flavors routes (the admin API). Pools are
// opened with the server's clock, each wrapped by wrap (may be nil).
func (s *Server) EnablePooling(cat *catalog.Catalog, wrap pooling.PoolWrapper) *pooling.Driver {
	pd := pooling.New(cat, s.store, storage.Options{Events: s.m, Clock: s.clock}, s.log, wrap)
	// Bodies are sealed before pooling routes them, so moves between pools
	// carry envelopes as they are.
	s.store, s.drv = pd, encrypt.Wrap(pd, s.keys)
	a := &admin{s: s, cat: cat, pd: pd}
	s.locate = cat.Locate
	s.Handle("GET", "/v2/pools", Admin, a.listPools)
	s.Handle("GET", "/v2/pools/{pool_name}", Admin, a.getPool)
	s.Handle("PUT", "/v2/pools/{pool_name}", Admin, a.putPool)
	s.Handle("PATCH", "/v2/pools/{pool_name}", Admin, a.patchPool)
	s.Handle("DELETE", "/v2/pools/{pool_name}", Admin, a.deletePool)
	s.Handle("GET", "/v2/pools/{pool_name}/storage", Admin, a.poolStorage)
	s.Handle("GET", "/v2/flavors", Admin, a.listFlavors)
	s.Handle("GET", "/v2/flavors/{flavor_name}", Admin, a.getFlavor)
	s.Handle("PUT", "/v2/flavors/{flavor_name}", Admin, a.putFlavor)
	s.Handle("PATCH", "/v2/flavors/{flavor_name}", Admin, a.patchFlavor)
	s.Handle("DELETE", "/v2/flavors/{flavor_name}", Admin, a.deleteFlavor)
	s.Handle("GET", "/v2/health", Admin, a.health)
	a.enableMigrations()
	return pd
}

type admin struct {
	s     *Server
	cat   *catalog.Catalog
	pd    *pooling.Driver
	mover *pooling.Mover
}

// poolJSON is a pool as Zaqar shows it: flavor null when unset, options
// only when detailed.
type poolJSON struct {
	Name    string          `json:"name"`
	URI     string          `json:"uri"`
	Weight  int             `json:"weight"`
	Flavor  *string         `json:"flavor"`
	Options *map[string]any `json:"options,omitempty"`
	Href    string          `json:"href"`
	// Queues counts the queues placed on the pool (detailed GET only).
	Queues *int `json:"queues,omitempty"`
}

func showPool(p catalog.Pool, detailed bool) poolJSON {
	out := poolJSON{Name: p.Name, URI: p.URI, Weight: p.Weight, Href: "/v2/pools/" + p.Name}
	if p.Flavor != "" {
		out.Flavor = &p.Flavor
	}
	if detailed {
		opts := p.Options
		if opts == nil {
			opts = map[string]any{}
		}
		out.Options = &opts
	}
	return out
}

// poolBody is a PUT or PATCH body; pointers tell absent from zero.
type poolBody struct {
	Weight  *json.RawMessage `json:"weight"`
	URI     *string          `json:"uri"`
	Flavor  *string          `json:"flavor"`
	Options *map[string]any  `json:"options"`
}

// decodeStrict decodes a JSON object, refusing unknown fields and trailing
// data with a description that names the problem; what names the body ("a
// pool") in those descriptions.
func decodeStrict(body []byte, what string, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return badBody("Missing request body.")
	}
	// Syntax errors are left to the decoder, which names them.
	valid := json.Valid(body)
	if e := checkJSON(body); e != nil && (e == errNumberRange || valid) {
		return e
	}
	if valid && body[skipWS(body, 0)] != '{' {
		return errDocType
	}
	if e := checkKeys(body, what, v); e != nil {
		return e
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badBody(fmt.Sprintf("'%s' must be of type %s.", te.Field, fieldKind(v, te.Field)))
		}
		return badBody("Malformed JSON body: " + err.Error())
	}
	if dec.More() {
		return badBody("Malformed JSON body: data after the object.")
	}
	return nil
}

func jsonKind(goType string) string {
	switch goType {
	case "string":
		return "string"
	case "[]string":
		return "array of strings"
	}
	return "object"
}

func (b *poolBody) weight() (int, *apiError) {
	n, ok := jsonInt(*b.Weight)
	if !ok || n < 0 || n > 1<<32-1 {
		return 0, badBody("'weight' must be an integer between 0 and 4294967295.")
	}
	return int(n), nil
}

// adminErr maps catalog errors: Invalid is a bad body, as Zaqar answers.
// The catalog words its refusals for operators (a pool it cannot reach, a
// pool still holding queues), and the admin API shows them.
func (a *admin) fail(w http.ResponseWriter, err error, what, missing string) {
	switch storage.KindOf(err) {
	case storage.Invalid:
		a.s.fail(w, badBody(causeText(err)))
	case storage.Conflict:
		a.s.fail(w, &apiError{http.StatusConflict, kindTitle[storage.Conflict], causeText(err)})
	default:
		a.s.fail(w, storageErr(err, what, missing))
	}
}

func (a *admin) listPools(w http.ResponseWriter, r *http.Request, c *Call) {
	q := r.URL.Query()
	detailed, _, e := queryBool(q, "detailed")
	if e != nil {
		a.s.fail(w, e)
		return
	}
	pools, err := a.cat.ListPools(c.ctx)
	if err != nil {
		a.fail(w, err, "Pools could not be listed.", "")
		return
	}
	page, next, e := pageByName(q, len(pools), func(i int) string { return pools[i].Name })
	if e != nil {
		a.s.fail(w, e)
		return
	}
	out := make([]poolJSON, 0, len(page))
	for _, i := range page {
		out = append(out, showPool(pools[i], detailed))
	}
	w.Header().Set("Content-Location", r.URL.RequestURI())
	WriteJSON(w, http.StatusOK, map[string]any{"links": nextLinks("/v2/pools", q, next), "pools": out})
}

func (a *admin) getPool(w http.ResponseWriter, r *http.Request, c *Call) {
	name := r.PathValue("pool_name")
	detailed, _, e := queryBool(r.URL.Query(), "detailed")
	if e != nil {
		a.s.fail(w, e)
		return
	}
	p, err := a.cat.GetPool(c.ctx, name)
	if err != nil {
		a.fail(w, err, "Pool could not be read.", "Pool "+name+" does not exist")
		return
	}
	out := showPool(p, detailed)
	if detailed {
		// How many queues the pool holds: what decides whether it may be
		// removed (DELETE answers 409 while any is left).
		n, err := a.cat.Store().QueueCount(c.ctx, name)
		if err != nil {
			a.fail(w, err, "Pool could not be read.", "")
			return
		}
		out.Queues = &n
	}
	WriteJSON(w, http.StatusOK, out)
}

// poolStorage answers how full a pool's backend is, read now: what the
// operator shows in a Pool's status (sluice's own, not Zaqar's). max_bytes
// 0: no limit is set or the backend cannot tell.
func (a *admin) poolStorage(w http.ResponseWriter, r *http.Request, c *Call) {
	name := r.PathValue("pool_name")
	if _, err := a.cat.GetPool(c.ctx, name); err != nil {
		a.fail(w, err, "Pool could not be read.", "Pool "+name+" does not exist")
		return
	}
	cp, err := a.pd.PoolCapacity(c.ctx, name)
	if err != nil {
		a.fail(w, err, "Pool storage could not be read.", "")
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{
		"used_bytes": cp.UsedBytes, "max_bytes": cp.MaxBytes, "eviction_policy": cp.Policy, "full": cp.Full()})
}

// readPoolBody reads what PUT and PATCH of a pool share: the ?force flag
// (register even when the URI does not answer) and the strict JSON body.
func (a *admin) readPoolBody(r *http.Request, c *Call) (force bool, b poolBody, e *apiError) {
	if force, _, e = queryBool(r.URL.Query(), "force"); e != nil {
		return false, b, e
	}
	body, e := a.s.readBody(r, c.w)
	if e == nil {
		e = decodeStrict(body, "a pool", &b)
	}
	return force, b, e
}

func (a *admin) putPool(w http.ResponseWriter, r *http.Request, c *Call) {
	name := r.PathValue("pool_name")
	force, b, e := a.readPoolBody(r, c)
	if e == nil && (b.Weight == nil || b.URI == nil) {
		e = badBody("'uri' and 'weight' are required.")
	}
	p := catalog.Pool{Name: name}
	if e == nil {
		p.Weight, e = b.weight()
	}
	if e != nil {
		a.s.fail(w, e)
		return
	}
	p.URI = *b.URI
	if b.Flavor != nil {
		p.Flavor = *b.Flavor
	}
	if b.Options != nil {
		p.Options = *b.Options
	}
	if _, err := a.cat.PutPool(c.ctx, p, force); err != nil {
		a.fail(w, err, "Pool could not be created.", "")
		return
	}
	w.Header().Set("Location", "/v2/pools/"+name)
	writeEmpty(w, http.StatusCreated)
}

func (a *admin) patchPool(w http.ResponseWriter, r *http.Request, c *Call) {
	name := r.PathValue("pool_name")
	force, b, e := a.readPoolBody(r, c)
	if e == nil && b.Weight == nil && b.URI == nil && b.Flavor == nil && b.Options == nil {
		e = badBody("One of 'uri', 'weight', 'flavor' or 'options' needs to be specified.")
	}
	var patch catalog.PoolPatch
	if e == nil && b.Weight != nil {
		var wgt int
		wgt, e = b.weight()
		patch.Weight = &wgt
	}
	if e != nil {
		a.s.fail(w, e)
		return
	}
	patch.URI, patch.Flavor = b.URI, b.Flavor
	if b.Options != nil {
		patch.Options = *b.Options
	}
	p, err := a.cat.PatchPool(c.ctx, name, patch, force)
	if err != nil {
		a.fail(w, err, "Pool could not be updated.", "Pool "+name+" does not exist")
		return
	}
	WriteJSON(w, http.StatusOK, showPool(p, false))
}

// deletePool: 204, also for a pool that does not exist (as Zaqar); 409 when
// queues still live on it.
func (a *admin) deletePool(w http.ResponseWriter, r *http.Request, c *Call) {
	err := a.cat.DeletePool(c.ctx, r.PathValue("pool_name"))
	if err != nil && !storage.Is(err, storage.NotFound) {
		a.fail(w, err, "Pool could not be deleted.", "")
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// pageByName pages a name-sorted list by ?marker= and ?limit= (default 10,
// at most 20, as Zaqar's pools and flavors listings). It returns the indexes
// of the page and the next marker ("" when nothing follows).
func pageByName(q url.Values, n int, name func(int) string) ([]int, string, *apiError) {
	limit, given, e := queryInt(q, "limit")
	if e != nil {
		return nil, "", e
	}
	if !given {
		limit = 10
	}
	if limit < 1 || limit > 20 {
		return nil, "", catalogLimitErr(20)
	}
	marker := q.Get("marker")
	start := sort.Search(n, func(i int) bool { return name(i) > marker })
	var page []int
	for i := start; i < n && len(page) < limit; i++ {
		page = append(page, i)
	}
	if len(page) == 0 {
		return page, "", nil
	}
	return page, name(page[len(page)-1]), nil
}

// nextLinks is Zaqar's links list: a next link whenever the page was not
// empty, carrying the request's parameters with the marker replaced.
func nextLinks(base string, q url.Values, next string) []map[string]string {
	if next == "" {
		return []map[string]string{}
	}
	var l linkQuery
	for _, k := range []string{"detailed", "limit", "marker"} {
		if v := q.Get(k); v != "" {
			l.add(k, v)
		}
	}
	l.setMarker(next)
	return []map[string]string{{"rel": "next", "href": base + l.String()}}
}

func isNotFound(err error) bool { return storage.Is(err, storage.NotFound) }
