package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"sluice.dev/server/internal/storage"
)

func queueMissing(c *Call) string {
	return c.noun() + " " + c.queue + " does not exist for project " + c.Project
}

// defaultQueueLimit is Zaqar's default queue listing page.
const defaultQueueLimit = 10

// listQueues: GET /v2/queues[?marker,limit,detailed,name,with_count].
func (s *Server) listQueues(w http.ResponseWriter, r *http.Request, c *Call) {
	query := r.URL.Query()
	var link linkQuery
	opts := storage.ListQueuesOptions{Limit: defaultQueueLimit}
	if m := query.Get("marker"); m != "" {
		opts.Marker = m
		link.add("marker", m)
	}
	// Zaqar reads every parameter before it checks the limit's range, so
	// a bad boolean beside a limit out of range is what gets reported.
	n, limitGiven, e := queryInt(query, "limit")
	if e != nil {
		s.fail(w, e)
		return
	}
	if limitGiven {
		opts.Limit = n
		link.add("limit", strconv.Itoa(n))
	}
	detailed, given, e := queryBool(query, "detailed")
	if e != nil {
		s.fail(w, e)
		return
	}
	if given {
		opts.Detailed = detailed
		link.add("detailed", boolText(detailed))
	}
	if name := query.Get("name"); name != "" {
		opts.Name = name
		link.add("name", name)
	}
	withCount, given, e := queryBool(query, "with_count")
	if e != nil {
		s.fail(w, e)
		return
	}
	if given {
		link.add("with_count", boolText(withCount))
	}
	if limitGiven && (n < 1 || n > s.opts.MaxQueuesPerPage) {
		s.fail(w, catalogLimitErr(s.opts.MaxQueuesPerPage))
		return
	}
	queues, err := s.drv.Queues().List(c.ctx, c.space(), opts)
	if err != nil {
		s.fail(w, storageErr(err, "Queues could not be listed.", ""))
		return
	}
	count := 0
	if withCount {
		if count, err = s.countQueues(c, opts.Name); err != nil {
			s.fail(w, storageErr(err, "Queues could not be listed.", ""))
			return
		}
	}
	b := append(c.w.out[:0], '{')
	b = appendString(b, c.collection())
	b = append(b, ":["...)
	for i := range queues {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendString(b, queues[i].Name)
		b = append(b, `,"href":`...)
		b = appendString(b, c.pathOf(queues[i].Name))
		if opts.Detailed {
			b = append(b, `,"metadata":`...)
			if b, err = s.appendMetadataOf(b, queues[i].Metadata, c.reserved()); err != nil {
				s.fail(w, storageErr(err, "Queues could not be listed.", ""))
				return
			}
		}
		b = append(b, '}')
	}
	b = append(b, `],"links":[`...)
	if len(queues) > 0 {
		link.setMarker(queues[len(queues)-1].Name)
		b = append(b, `{"rel":"next","href":`...)
		b = appendString(b, r.URL.Path+link.String())
		b = append(b, '}')
	}
	b = append(b, ']')
	if withCount {
		b = append(b, `,"count":`...)
		b = appendInt(b, int64(count))
	}
	b = append(b, '}')
	c.w.out = b
	writeRaw(w, http.StatusOK, b)
}

// countQueues pages through the project's queues (with_count=true); Zaqar
// answers `true` here instead of a number.
func (s *Server) countQueues(c *Call, name string) (int, error) {
	const page = 1000
	total, marker := 0, ""
	for {
		qs, err := s.drv.Queues().List(c.ctx, c.space(), storage.ListQueuesOptions{Marker: marker, Limit: page, Name: name})
		if err != nil {
			return 0, err
		}
		total += len(qs)
		if len(qs) < page {
			return total, nil
		}
		marker = qs[len(qs)-1].Name
	}
}

// putQueue: PUT /v2/queues/{queue_name} [metadata] -> 201 new, 204 existing.
func (s *Server) putQueue(w http.ResponseWriter, r *http.Request, c *Call) {
	body, e := s.readMetadataBody(r, c.w, false)
	if e != nil {
		s.fail(w, e)
		return
	}
	meta, e := s.parseQueueMetadata(body)
	if e != nil {
		s.fail(w, e)
		return
	}
	if meta == nil {
		meta = storage.Metadata{}
	}
	q := c.ref()
	created, err := s.drv.Queues().Create(c.ctx, q, meta)
	if err != nil {
		s.fail(w, storageErr(err, "Queue could not be created.", ""))
		return
	}
	s.cache.forget(q)
	w.Header()["Location"] = []string{r.URL.Path}
	if created {
		w.Header()["Content-Type"] = ctJSON
		writeEmpty(w, http.StatusCreated)
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// getQueue: GET /v2/queues/{queue_name} -> metadata with reserved defaults.
func (s *Server) getQueue(w http.ResponseWriter, r *http.Request, c *Call) {
	meta, err := s.drv.Queues().GetMetadata(c.ctx, c.ref())
	if err != nil {
		s.fail(w, storageErr(err, "Queue metadata could not be retrieved.", queueMissing(c)))
		return
	}
	b, err := s.appendMetadataOf(c.w.out[:0], meta, c.reserved())
	if err != nil {
		s.fail(w, storageErr(err, "Queue metadata could not be retrieved.", ""))
		return
	}
	c.w.out = b
	if s.locate != nil {
		// Which shard holds the queue: what an operator needs to drain a
		// shard safely. Not part of the Zaqar body, so clients are unaffected.
		if pool, err := s.locate(c.ctx, c.ref()); err == nil && pool != "" {
			w.Header()["X-Sluice-Pool"] = []string{pool}
		}
	}
	writeRaw(w, http.StatusOK, b)
}

// patchQueue: PATCH /v2/queues/{queue_name} with a JSON patch of /metadata/<key>.
func (s *Server) patchQueue(w http.ResponseWriter, r *http.Request, c *Call) {
	// Zaqar checks the size before the media type.
	body, e := s.readMetadataBody(r, c.w, true)
	if e != nil {
		s.fail(w, e)
		return
	}
	if mediaType(r.Header.Get("Content-Type")) != patchMediaType {
		w.Header()["Accept-Patch"] = []string{patchMediaType}
		s.fail(w, errPatchMedia)
		return
	}
	ops, e := parsePatch(body)
	if e != nil {
		s.fail(w, e)
		return
	}
	q := c.ref()
	// The patch is applied inside the driver's atomic update, so concurrent
	// PATCHes of different keys never lose each other's changes; the
	// update only validates and never touches storage itself.
	var out []byte
	_, err := s.drv.Queues().UpdateMetadata(c.ctx, q, func(meta storage.Metadata) (storage.Metadata, error) {
		if e := applyPatchOf(meta, ops, c.reserved()); e != nil {
			return nil, e
		}
		if msg := s.validateMetadata(meta); msg != "" {
			return nil, badBody(msg)
		}
		b, err := s.appendMetadataOf(c.w.out[:0], meta, c.reserved())
		if err != nil || len(b) > s.opts.MaxQueueMetadata+512 {
			return nil, badBody("Queue metadata is too large. Max size: " + strconv.Itoa(s.opts.MaxQueueMetadata))
		}
		out = b
		return meta, nil
	})
	var e2 *apiError
	switch {
	case errors.As(err, &e2):
		s.fail(w, e2)
		return
	case err != nil:
		s.fail(w, storageErr(err, "Queue could not be updated.", queueMissing(c)))
		return
	}
	s.cache.forget(q)
	c.w.out = out
	writeRaw(w, http.StatusOK, out)
}

// deleteQueue: DELETE /v2/queues/{queue_name} (idempotent).
func (s *Server) deleteQueue(w http.ResponseWriter, r *http.Request, c *Call) {
	q := c.ref()
	trusts := s.trustsOf(c, q)
	if err := s.drv.Queues().Delete(c.ctx, q); err != nil && !storage.Is(err, storage.NotFound) {
		s.fail(w, storageErr(err, "Queue could not be deleted.", ""))
		return
	}
	for _, id := range trusts {
		s.revokeTrust(r, c, id)
	}
	s.cache.forget(q)
	writeEmpty(w, http.StatusNoContent)
}

// queueStats: GET /v2/queues/{queue_name}/stats.
func (s *Server) queueStats(w http.ResponseWriter, r *http.Request, c *Call) {
	st, err := s.drv.Queues().Stats(c.ctx, c.ref())
	if err != nil && !storage.Is(err, storage.NotFound) {
		s.fail(w, storageErr(err, "Queue stats could not be read.", ""))
		return
	}
	b := append(c.w.out[:0], `{"messages":{"claimed":`...)
	b = appendInt(b, int64(st.Claimed))
	b = append(b, `,"free":`...)
	b = appendInt(b, int64(st.Free))
	b = append(b, `,"total":`...)
	b = appendInt(b, int64(st.Total))
	if st.Total > 0 && st.Newest != nil && st.Oldest != nil {
		now := s.clock.Now()
		base := c.base()
		b = append(b, `,"newest":`...)
		b = appendStatMessage(b, base, st.Newest, now)
		b = append(b, `,"oldest":`...)
		b = appendStatMessage(b, base, st.Oldest, now)
	}
	b = append(b, "}}"...)
	c.w.out = b
	writeRaw(w, http.StatusOK, b)
}

func appendStatMessage(b []byte, base string, m *storage.Message, now time.Time) []byte {
	b = append(b, '{')
	b = appendMessageState(b, m, now)
	b = append(b, `,"created":"`...)
	b = m.Created.UTC().AppendFormat(b, "2006-01-02T15:04:05Z")
	b = append(b, `","href":"`...)
	b = appendHref(b, base, m.ID, "")
	return append(b, `"}`...)
}

// purgeQueue: POST /v2/queues/{queue_name}/purge {"resource_types": [...]}.
func (s *Server) purgeQueue(w http.ResponseWriter, r *http.Request, c *Call) {
	body, e := s.readBody(r, c.w)
	if e != nil {
		s.fail(w, e)
		return
	}
	purgeMessages, purgeSubs := true, true
	if len(body) > 0 {
		v, e := parseJSONDocument(body)
		if e != nil {
			s.fail(w, e)
			return
		}
		// Zaqar: a body, if any, must name the resource types; no body
		// purges everything.
		doc, _ := v.(map[string]any)
		rt, has := doc["resource_types"]
		if !has {
			s.fail(w, errPurgeNoTypes)
			return
		}
		list, ok := rt.([]any)
		if !ok {
			s.fail(w, errPurgeTypes)
			return
		}
		purgeMessages, purgeSubs = false, false
		for _, t := range list {
			switch t {
			case "messages":
				purgeMessages = true
			case "subscriptions":
				purgeSubs = true
			default:
				s.fail(w, errPurgeTypes)
				return
			}
		}
	}
	if purgeMessages {
		if err := s.drv.Queues().Purge(c.ctx, c.ref()); err != nil && !storage.Is(err, storage.NotFound) {
			s.fail(w, storageErr(err, "Queue could not be purged.", ""))
			return
		}
	}
	if purgeSubs {
		trusts := s.trustsOf(c, c.ref())
		if err := s.drv.Subscriptions().Purge(c.ctx, c.ref()); err != nil {
			s.fail(w, storageErr(err, "Queue could not be purged.", ""))
			return
		}
		for _, id := range trusts {
			s.revokeTrust(r, c, id)
		}
	}
	writeEmpty(w, http.StatusNoContent)
}

var errPurgeNoTypes = badRequest(`Post body must contain key "resource_types".`)

var errPurgeTypes = badRequest("Resource types must be a sub set of {'subscriptions', 'messages'}.")
