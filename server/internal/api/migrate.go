package api

import (
	"net/http"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
	"sluice.dev/server/internal/storage/pooling"
)

// enableMigrations starts the pooled driver's mover and mounts the routes
// that move queues between pools (docs/pooling.md, "Moving a queue"). They
// exist only with a catalog, as /v2/pools.
func (a *admin) enableMigrations() {
	a.mover = a.pd.StartMover(pooling.MoverOptions{Batch: a.s.opts.MigrateBatch, Rate: a.s.opts.MigrateRate, Lease: a.s.opts.MigrateLease})
	a.s.Handle("POST", "/v2/queues/{queue_name}/migrate", Admin, a.migrate)
	a.s.Handle("GET", "/v2/queues/{queue_name}/migrate", Admin, a.getMigration)
	a.s.Handle("GET", "/v2/pools/{pool_name}/queues", Admin, a.poolQueues)
}

// migrationJSON is a move as GET .../migrate shows it.
type migrationJSON struct {
	Queue     string  `json:"queue"`
	From      string  `json:"from"`
	To        string  `json:"to"`
	State     string  `json:"state"`
	Moved     int64   `json:"messages_moved"`
	Remaining int64   `json:"messages_remaining"`
	Batches   int64   `json:"batches"`
	Started   string  `json:"started"`
	Finished  *string `json:"finished"`
	Error     *string `json:"error"`
}

func showMigration(m catalog.Migration) migrationJSON {
	out := migrationJSON{Queue: m.Queue.Name, From: m.From, To: m.To, State: m.State, Moved: m.Moved,
		Remaining: m.Remaining, Batches: m.Batches, Started: m.Started.UTC().Format(time.RFC3339)}
	if !m.Finished.IsZero() {
		f := m.Finished.UTC().Format(time.RFC3339)
		out.Finished = &f
	}
	if m.Error != "" {
		out.Error = &m.Error
	}
	return out
}

// migrate: POST /v2/queues/{q}/migrate {"pool": "<target>"} -> 202.
func (a *admin) migrate(w http.ResponseWriter, r *http.Request, c *Call) {
	body, e := a.s.readBody(r, c.w)
	var b struct {
		Pool *string `json:"pool"`
	}
	if e == nil {
		e = decodeStrict(body, "a move", &b)
	}
	if e == nil && (b.Pool == nil || *b.Pool == "") {
		e = badBody("'pool' is required: the name of the pool to move the queue to.")
	}
	if e != nil {
		a.s.fail(w, e)
		return
	}
	q := storage.QueueRef{Project: c.Project, Name: c.queue}
	m, err := a.mover.Migrate(c.ctx, q, *b.Pool)
	if err != nil {
		a.fail(w, err, "Queue could not be moved.", queueMissing(c))
		return
	}
	loc := "/v2/queues/" + c.queue + "/migrate"
	w.Header().Set("Location", loc)
	WriteJSON(w, http.StatusAccepted, showMigration(m))
}

// getMigration: GET /v2/queues/{q}/migrate -> the queue's latest move.
func (a *admin) getMigration(w http.ResponseWriter, r *http.Request, c *Call) {
	m, err := a.cat.Store().GetMigration(c.ctx, storage.QueueRef{Project: c.Project, Name: c.queue})
	if err != nil {
		a.fail(w, err, "Move could not be read.", "Queue "+c.queue+" has never moved in project "+c.Project)
		return
	}
	WriteJSON(w, http.StatusOK, showMigration(m))
}

// poolQueues: GET /v2/pools/{name}/queues[?limit=N&marker=M] -> the queues
// placed on the pool, for draining it.
func (a *admin) poolQueues(w http.ResponseWriter, r *http.Request, c *Call) {
	name := r.PathValue("pool_name")
	q := r.URL.Query()
	limit, given, e := queryInt(q, "limit")
	if e == nil && !given {
		limit = 10
	}
	if e == nil && (limit < 1 || limit > 100) {
		e = limitErr(100)
	}
	if e != nil {
		a.s.fail(w, e)
		return
	}
	if _, err := a.cat.GetPool(c.ctx, name); err != nil {
		a.fail(w, err, "Pool could not be read.", "Pool "+name+" does not exist")
		return
	}
	page, next, err := a.cat.QueuesOn(c.ctx, name, q.Get("marker"), limit)
	if err != nil {
		a.fail(w, err, "Queues could not be listed.", "")
		return
	}
	out := make([]map[string]string, len(page))
	for i, qr := range page {
		out[i] = map[string]string{"project": qr.Project, "name": qr.Name}
	}
	WriteJSON(w, http.StatusOK, map[string]any{"queues": out, "links": nextLinks("/v2/pools/"+name+"/queues", q, next)})
}
