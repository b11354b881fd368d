package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"sluice.dev/server/internal/storage"
)

func (c *Call) ref() storage.QueueRef { return storage.QueueRef{Project: c.space(), Name: c.queue} }

// queuePath is "/v2/queues/<name>", the base of every href.
func queuePath(name string) string { return "/v2/queues/" + name }

// appendMessage encodes {"id","href","ttl","age","body"}; the href carries
// the claim id while a live claim holds the message, as Zaqar's does.
func appendMessage(b []byte, base string, m *storage.Message, now time.Time) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, m.ID)
	b = append(b, `,"href":"`...)
	b = appendHref(b, base, m.ID, m.ClaimID)
	b = append(b, `","ttl":`...)
	b = appendInt(b, int64(m.TTL/time.Second))
	b = append(b, `,"age":`...)
	b = appendInt(b, age(now, m.Created))
	b = appendMessageBody(b, m)
	return append(b, '}')
}

// appendMessageBody appends the "body" member, and after it for a message
// no configured key decrypts the "body_error" that says so: one such
// message never costs the others of a page.
func appendMessageBody(b []byte, m *storage.Message) []byte {
	b = append(b, `,"body":`...)
	b = appendBody(b, m.Body)
	if m.Unreadable {
		b = append(b, `,"body_error":`...)
		b = appendString(b, descBodyUnreadable)
	}
	return b
}

func appendHref(b []byte, base, id, claimID string) []byte {
	b = appendEscaped(b, base)
	b = append(b, "/messages/"...)
	b = appendEscaped(b, id)
	if claimID != "" {
		b = append(b, "?claim_id="...)
		b = appendEscaped(b, claimID)
	}
	return b
}

func appendBody(b []byte, body []byte) []byte {
	if len(body) == 0 {
		return append(b, "null"...)
	}
	return append(b, body...)
}

func age(now, created time.Time) int64 {
	if a := int64(now.Sub(created) / time.Second); a > 0 {
		return a
	}
	return 0
}

func (s *Server) messageLimits() messageLimits {
	return messageLimits{maxTTL: s.opts.MaxMessageTTL}
}

// postMessages: POST /v2/queues/{queue_name}/messages.
func (s *Server) postMessages(w http.ResponseWriter, r *http.Request, c *Call) {
	body, e := s.readBody(r, c.w)
	if e != nil {
		s.fail(w, e)
		return
	}
	q := c.ref()
	qs, err := s.queueSettings(c.ctx, q)
	if err != nil {
		s.fail(w, storageErr(err, "Messages could not be enqueued.", ""))
		return
	}
	msgs, e := parsePostMessages(body, qs, s.messageLimits())
	if e != nil {
		s.fail(w, e)
		return
	}
	ids, err := s.drv.Messages().Post(c.ctx, q, c.ClientID, msgs)
	if err != nil {
		s.fail(w, storageErr(err, "Messages could not be enqueued.", ""))
		return
	}
	if s.afterPost != nil {
		s.afterPost()
	}
	base := c.base()
	b := c.w.out[:0]
	b = append(b, `{"resources":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = appendHref(b, base, id, "")
		b = append(b, '"')
	}
	b = append(b, "]}"...)
	c.w.out = b
	w.Header()["Location"] = []string{postLocation(base, ids)}
	writeRaw(w, http.StatusCreated, b)
}

// maxLocationBytes bounds the Location of a message post. Zaqar lists
// every id there (?ids=a,b,...); a batch of thousands of small messages
// would make a header of hundreds of KB, which proxies (nginx: 4-8 KB for
// all headers) and clients (Python's http.client: 64 KB a line) refuse.
// About 100 ids fit; a larger batch gets the messages collection as its
// Location, its ids being in the body's "resources" either way.
const maxLocationBytes = 4096

func postLocation(base string, ids []string) string {
	n := len(base) + len("/messages?ids=")
	for _, id := range ids {
		n += len(id) + 1
	}
	if n > maxLocationBytes {
		return base + "/messages"
	}
	loc := make([]byte, 0, n)
	loc = append(loc, base...)
	loc = append(loc, "/messages?ids="...)
	for i, id := range ids {
		if i > 0 {
			loc = append(loc, ',')
		}
		loc = append(loc, id...)
	}
	return string(loc)
}

// listMessages: GET /v2/queues/{queue_name}/messages[?ids=...].
// listRescans bounds how many more driver calls one listing request spends
// looking past hidden messages before it answers an empty page with a link.
const listRescans = 4

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request, c *Call) {
	query := r.URL.Query()
	if queryGiven(query, "ids") {
		s.getMessages(w, c, queryList(query, "ids"))
		return
	}
	lq, e := parseListMessages(query, s.opts.MaxMessagesPerPage)
	if e != nil {
		s.fail(w, e)
		return
	}
	q := c.ref()
	if !lq.delayedGiven {
		qs, err := s.queueSettings(c.ctx, q)
		if err != nil {
			s.fail(w, storageErr(err, "Messages could not be listed.", ""))
			return
		}
		// As Zaqar: a queue without a default delay lists delayed messages too.
		if !qs.hasDelay {
			lq.delayed = true
			lq.link.add("include_delayed", "true")
		}
	}
	lo := storage.ListMessagesOptions{
		Marker: lq.marker, Limit: lq.limit, ClientID: c.ClientID,
		Echo: lq.echo, IncludeClaimed: lq.claimed, IncludeDelayed: lq.delayed,
	}
	msgs, next, err := s.drv.Messages().List(c.ctx, q, lo)
	// A driver bounds the work of one call: when its scan budget runs out
	// among hidden messages (own ones without echo, claimed, delayed) it
	// returns nothing but a marker. Scan on from there a few times; if the
	// page is still empty it carries the link onwards, so an empty page
	// without a next link always means the end.
	for try := 0; err == nil && len(msgs) == 0 && next != "" && try < listRescans; try++ {
		lo.Marker = next
		msgs, next, err = s.drv.Messages().List(c.ctx, q, lo)
	}
	// Drivers may give a marker only after a full page, but clients
	// (zaqar-bench's observer) need a next link after every non-empty page
	// to resume from. Asking again for exactly as many messages as were
	// seen makes the page full, so the driver names its end; concurrent
	// deletes can shrink the page again, hence the bounded retries, after
	// which the last message's id (Zaqar's own marker form) serves.
	for try := 0; err == nil && next == "" && len(msgs) > 0; try++ {
		if try == 4 {
			next = msgs[len(msgs)-1].ID
			break
		}
		lo.Limit = len(msgs)
		msgs, next, err = s.drv.Messages().List(c.ctx, q, lo)
	}
	if err != nil {
		s.fail(w, storageErr(err, "Messages could not be listed.", ""))
		return
	}
	b := c.w.out[:0]
	if len(msgs) == 0 && next == "" {
		writeRaw(w, http.StatusOK, append(b, `{"messages":[],"links":[]}`...))
		return
	}
	base := c.base()
	now := s.clock.Now()
	b = append(b, `{"messages":[`...)
	for i := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendMessage(b, base, &msgs[i], now)
	}
	b = append(b, `],"links":[`...)
	// Markers are the driver's opaque positions.
	if next != "" {
		lq.link.setMarker(next)
		b = append(b, `{"rel":"next","href":`...)
		b = appendString(b, r.URL.Path+lq.link.String())
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	c.w.out = b
	writeRaw(w, http.StatusOK, b)
}

// getMessages: GET .../messages?ids=a,b (unknown ids skipped; none found 404).
func (s *Server) getMessages(w http.ResponseWriter, c *Call, ids []string) {
	if len(ids) == 0 || len(ids) > s.opts.MaxMessagesPerPage {
		s.fail(w, limitErr(s.opts.MaxMessagesPerPage))
		return
	}
	msgs, err := s.drv.Messages().GetMany(c.ctx, c.ref(), ids)
	if err != nil {
		s.fail(w, storageErr(err, "Message could not be retrieved.", ""))
		return
	}
	if len(msgs) == 0 {
		s.fail(w, notFound("No messages with IDs: "+pyList(ids)+" found in the queue "+
			c.queue+" for project "+c.Project+"."))
		return
	}
	base := c.base()
	now := s.clock.Now()
	b := append(c.w.out[:0], `{"messages":[`...)
	for i := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendMessage(b, base, &msgs[i], now)
	}
	b = append(b, "]}"...)
	c.w.out = b
	writeRaw(w, http.StatusOK, b)
}

func messageMissing(id string, c *Call) string {
	return "Message " + id + " does not exist in queue " + c.queue + " for project " + c.Project
}

// getMessage: GET /v2/queues/{queue_name}/messages/{message_id}.
func (s *Server) getMessage(w http.ResponseWriter, r *http.Request, c *Call) {
	id := r.PathValue("message_id")
	m, err := s.drv.Messages().Get(c.ctx, c.ref(), id)
	if err != nil {
		missing := messageMissing(id, c)
		// Zaqar looks the queue up first and names it when it is missing;
		// only a miss pays for the lookup.
		if kindOf(err) == storage.NotFound {
			if ok, qerr := s.drv.Queues().Exists(c.ctx, c.ref()); qerr == nil && !ok {
				missing = queueMissing(c)
			}
		}
		s.fail(w, storageErr(err, "Message could not be retrieved.", missing))
		return
	}
	b := appendMessage(c.w.out[:0], c.base(), &m, s.clock.Now())
	c.w.out = b
	writeRaw(w, http.StatusOK, b)
}

// deleteMessage: DELETE /v2/queues/{queue_name}/messages/{message_id}[?claim_id=].
func (s *Server) deleteMessage(w http.ResponseWriter, r *http.Request, c *Call) {
	id := r.PathValue("message_id")
	claimID := r.URL.Query().Get("claim_id")
	err := s.drv.Messages().Delete(c.ctx, c.ref(), id, claimID)
	if errors.Is(err, storage.ErrNotClaimed) {
		// Zaqar refuses a claim id that is no UUID (parsed as Python's
		// uuid.UUID does, like a Client-ID) as a claim that does not exist,
		// before it looks at the message's claim.
		if _, ok := parseClientID(claimID); !ok {
			err = storage.E(storage.OpMessageDelete, storage.Invalid, storage.ErrNotHolder)
		}
	}
	switch {
	case err == nil, storage.Is(err, storage.NotFound):
		writeEmpty(w, http.StatusNoContent)
	default:
		s.fail(w, storageErr(err, "Message could not be deleted.", ""))
	}
}

// deleteMessages: DELETE .../messages?ids=a,b or ?pop=N.
func (s *Server) deleteMessages(w http.ResponseWriter, r *http.Request, c *Call) {
	query := r.URL.Query()
	// As Zaqar: ?ids=, is ids given (so not with pop) that name no message.
	ids, idsGiven := queryList(query, "ids"), queryGiven(query, "ids")
	pop, popGiven, e := queryInt(query, "pop")
	if e != nil {
		s.fail(w, e)
		return
	}
	switch {
	case idsGiven && popGiven:
		s.fail(w, badRequest("pop and id params cannot be present together in the delete request."))
		return
	case !idsGiven && !popGiven:
		s.fail(w, badRequest(`The request should have either "ids" or "pop" parameter in the request, to be able to delete.`))
		return
	case popGiven && (pop < 1 || pop > s.opts.MaxMessagesPerClaim):
		s.fail(w, badRequest("Pop value must be at least 1 and may not be greater than "+
			strconv.Itoa(s.opts.MaxMessagesPerClaim)+"."))
		return
	case idsGiven && (len(ids) == 0 || len(ids) > s.opts.MaxMessagesPerPage):
		s.fail(w, badRequest("ids parameter should have at least 1 and not greater than "+
			strconv.Itoa(s.opts.MaxMessagesPerPage)+" values."))
		return
	}
	if !popGiven {
		if err := s.drv.Messages().DeleteMany(c.ctx, c.ref(), ids, query.Get("claim_id")); err != nil {
			s.fail(w, storageErr(err, "Messages could not be deleted.", ""))
			return
		}
		writeEmpty(w, http.StatusNoContent)
		return
	}
	msgs, err := s.drv.Messages().Pop(c.ctx, c.ref(), pop)
	if err != nil {
		s.fail(w, storageErr(err, "Messages could not be popped.", ""))
		return
	}
	now := s.clock.Now()
	b := append(c.w.out[:0], `{"messages":[`...)
	for i := range msgs {
		m := &msgs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendString(b, m.ID)
		b = append(b, ',')
		b = appendMessageState(b, m, now)
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	c.w.out = b
	writeRaw(w, http.StatusOK, b)
}

func appendNullableString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendString(b, s)
}

// appendMessageState appends the "age","ttl","body","claim_id","claim_count"
// members that popped messages and queue stats both show.
func appendMessageState(b []byte, m *storage.Message, now time.Time) []byte {
	b = append(b, `"age":`...)
	b = appendInt(b, age(now, m.Created))
	b = append(b, `,"ttl":`...)
	b = appendInt(b, int64(m.TTL/time.Second))
	b = appendMessageBody(b, m)
	b = append(b, `,"claim_id":`...)
	b = appendNullableString(b, m.ClaimID)
	b = append(b, `,"claim_count":`...)
	return appendInt(b, int64(m.ClaimCount))
}
