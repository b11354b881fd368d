package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"sluice.dev/server/internal/storage"
)

// ping: GET|HEAD /v2/ping -> 204, or 503 with no body when storage does not
// answer or the server is draining.
func (s *Server) ping(w http.ResponseWriter, r *http.Request, c *Call) {
	if s.draining.Load() || s.drv.Ping(c.ctx) != nil {
		w.Header()["Retry-After"] = []string{strconv.Itoa(s.retryAfter)}
		writeEmpty(w, http.StatusServiceUnavailable)
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// healthz is liveness for orchestrators: the process serves HTTP.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request, c *Call) {
	writeRaw(w, http.StatusOK, []byte(`{"status":"ok"}`))
}

// readyz is readiness without Zaqar's headers: 503 while draining or while
// storage does not answer.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request, c *Call) {
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.StorageTimeout)
	defer cancel()
	switch {
	case s.draining.Load():
		s.fail(w, &apiError{http.StatusServiceUnavailable, titleUnavailable, "The server is shutting down."})
	case s.drv.Ping(ctx) != nil:
		s.fail(w, &apiError{http.StatusServiceUnavailable, titleUnavailable, "Storage is unreachable." + retrySuffix})
	default:
		writeRaw(w, http.StatusOK, []byte(`{"status":"ready"}`))
	}
}

// opStatus is one step of the detailed health check, as Zaqar reports it.
type opStatus struct {
	Succeeded bool    `json:"succeeded"`
	Seconds   float64 `json:"seconds"`
	Ref       *string `json:"ref"`
}

// health: GET /v2/health (admin) runs Zaqar's sequence of operations on a
// scratch queue and reports each one's outcome and time.
func (s *Server) health(w http.ResponseWriter, r *http.Request, c *Call) {
	ctx := c.ctx
	reachable := s.drv.Ping(ctx) == nil
	type step struct {
		name string
		st   opStatus
	}
	var steps []step
	run := func(name string, f func() error) bool {
		start := time.Now()
		err := f()
		st := opStatus{Succeeded: err == nil, Seconds: time.Since(start).Seconds()}
		if err != nil {
			msg := err.Error()
			st.Ref = &msg
		}
		steps = append(steps, step{name, st})
		return err == nil
	}
	if reachable {
		q := storage.QueueRef{Project: c.Project, Name: "sluice-health-" + uuid.NewString()[:8]}
		var ids []string
		var claimID string
		msgs := []storage.NewMessage{
			{TTL: time.Minute, Body: json.RawMessage(`{"health":1}`)},
			{TTL: time.Minute, Body: json.RawMessage(`{"health":2}`)},
			{TTL: time.Minute, Body: json.RawMessage(`{"health":3}`)},
		}
		_ = run("create_queue", func() error { _, err := s.drv.Queues().Create(ctx, q, storage.Metadata{}); return err }) &&
			run("post_messages", func() error {
				var err error
				ids, err = s.drv.Messages().Post(ctx, q, c.ClientID, msgs)
				return err
			}) &&
			run("claim_messages", func() error {
				cl, err := s.drv.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 1})
				claimID = cl.ID
				return err
			}) &&
			run("list_messages", func() error {
				_, _, err := s.drv.Messages().List(ctx, q, storage.ListMessagesOptions{Limit: 10, Echo: true, IncludeClaimed: true})
				return err
			}) &&
			run("delete_messages", func() error {
				return s.drv.Messages().Delete(ctx, q, ids[0], claimID)
			}) &&
			run("delete_claim", func() error { return s.drv.Claims().Delete(ctx, q, claimID) }) &&
			run("bulk_delete_messages", func() error { return s.drv.Messages().DeleteMany(ctx, q, ids[1:], "") })
		run("delete_queue", func() error { return s.drv.Queues().Delete(ctx, q) })
	}
	b := append(c.w.out[:0], `{"storage_reachable":`...)
	b = append(b, boolText(reachable)...)
	b = append(b, `,"operation_status":{`...)
	for i, st := range steps {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, st.name)
		b = append(b, ':')
		b, _ = appendAny(b, st.st)
	}
	b = append(b, '}')
	if s.draining.Load() {
		b = append(b, `,"draining":true`...)
	}
	b = append(b, '}')
	c.w.out = b
	status := http.StatusOK
	if !reachable || s.draining.Load() {
		status = http.StatusServiceUnavailable
		w.Header()["Retry-After"] = []string{strconv.Itoa(s.retryAfter)}
	}
	writeRaw(w, status, b)
}
