package api

import (
	"net/http"
	"strconv"
	"time"

	"sluice.dev/server/internal/storage"
)

func (s *Server) claimLimits() claimLimits {
	o := &s.opts
	return claimLimits{defTTL: o.DefaultClaimTTL, defGrace: o.DefaultClaimGrace, maxTTL: o.MaxClaimTTL, maxGrace: o.MaxClaimGrace}
}

func claimMissing(id string, c *Call) string {
	return "Claim " + id + " does not exist in queue " + c.queue + " for project " + c.Project
}

// defaultClaimLimit is Zaqar's DEFAULT_MESSAGES_PER_CLAIM.
const defaultClaimLimit = 10

// createClaim: POST /v2/queues/{queue_name}/claims[?limit=N] {"ttl","grace"}.
func (s *Server) createClaim(w http.ResponseWriter, r *http.Request, c *Call) {
	limit := defaultClaimLimit
	if r.URL.RawQuery != "" {
		n, given, e := queryInt(r.URL.Query(), "limit")
		if e != nil {
			s.fail(w, e)
			return
		}
		if given {
			limit = n
		}
	}
	lim := s.claimLimits()
	if limit < 1 || limit > s.opts.MaxMessagesPerClaim {
		lim.limitFault = limitErr(s.opts.MaxMessagesPerClaim)
	}
	ttl, grace, e := s.readClaimBody(r, c, lim, false)
	if e != nil {
		s.fail(w, e)
		return
	}
	q := c.ref()
	qs, err := s.queueSettings(c.ctx, q)
	if err != nil {
		s.fail(w, storageErr(err, "Claim could not be created.", ""))
		return
	}
	cl, err := s.drv.Claims().Create(c.ctx, q, storage.ClaimOptions{TTL: ttl, Grace: grace, Limit: limit, DeadLetter: qs.deadLetter})
	if err != nil {
		s.fail(w, storageErr(err, "Claim could not be created.", ""))
		return
	}
	if cl.ID == "" || len(cl.Messages) == 0 {
		writeEmpty(w, http.StatusNoContent)
		return
	}
	base := queuePath(c.queue)
	now := s.clock.Now()
	b := append(c.w.out[:0], `{"messages":[`...)
	for i := range cl.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		m := &cl.Messages[i]
		m.ClaimID = cl.ID
		b = appendMessage(b, base, m, now)
	}
	b = append(b, "]}"...)
	c.w.out = b
	w.Header()["Location"] = []string{base + "/claims/" + cl.ID}
	writeRaw(w, http.StatusCreated, b)
}

// getClaim: GET /v2/queues/{queue_name}/claims/{claim_id}.
func (s *Server) getClaim(w http.ResponseWriter, r *http.Request, c *Call) {
	id := r.PathValue("claim_id")
	cl, err := s.drv.Claims().Get(c.ctx, c.ref(), id)
	if err != nil {
		s.fail(w, storageErr(err, "Claim could not be queried.", claimMissing(id, c)))
		return
	}
	base := queuePath(c.queue)
	now := s.clock.Now()
	b := append(c.w.out[:0], `{"age":`...)
	b = appendInt(b, age(now, cl.Created))
	b = append(b, `,"ttl":`...)
	b = strconv.AppendInt(b, int64(cl.TTL/time.Second), 10)
	b = append(b, `,"messages":[`...)
	for i := range cl.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		m := &cl.Messages[i]
		m.ClaimID = cl.ID
		b = appendMessage(b, base, m, now)
	}
	b = append(b, `],"href":`...)
	b = appendString(b, base+"/claims/"+cl.ID)
	b = append(b, '}')
	c.w.out = b
	writeRaw(w, http.StatusOK, b)
}

// updateClaim: PATCH /v2/queues/{queue_name}/claims/{claim_id} {"ttl","grace"}.
func (s *Server) updateClaim(w http.ResponseWriter, r *http.Request, c *Call) {
	id := r.PathValue("claim_id")
	ttl, grace, e := s.readClaimBody(r, c, s.claimLimits(), true)
	if e != nil {
		s.fail(w, e)
		return
	}
	if err := s.drv.Claims().Update(c.ctx, c.ref(), id, ttl, grace); err != nil {
		s.fail(w, storageErr(err, "Claim could not be updated.", claimMissing(id, c)))
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// deleteClaim: DELETE /v2/queues/{queue_name}/claims/{claim_id} (idempotent).
func (s *Server) deleteClaim(w http.ResponseWriter, r *http.Request, c *Call) {
	id := r.PathValue("claim_id")
	err := s.drv.Claims().Delete(c.ctx, c.ref(), id)
	if err != nil && !storage.Is(err, storage.NotFound) {
		s.fail(w, storageErr(err, "Claim could not be deleted.", ""))
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// readClaimBody reads and validates the {"ttl","grace"} body that creating
// and renewing a claim share; partial allows either field alone (PATCH).
func (s *Server) readClaimBody(r *http.Request, c *Call, lim claimLimits, partial bool) (ttl, grace time.Duration, e *apiError) {
	body, e := s.readBody(r, c.w)
	if e != nil {
		return 0, 0, e
	}
	return parseClaimBody(body, lim, partial)
}
