package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"sluice.dev/server/internal/notify"
	"sluice.dev/server/internal/storage"
)

// Subscription limits and defaults as Zaqar has them.
const (
	minSubscriptionTTL     = 60
	defaultSubscriptionTTL = 3600
	maxSubscriptionsPage   = 20
	defaultSubscriptions   = 10
	// maxSubscriptionTTL (200 years) keeps now+ttl a representable time;
	// Zaqar's own bound (year 9999) has the same message.
	maxSubscriptionTTL = 200 * 365 * 24 * 3600
)

// redacted replaces a subscription's signing secret in every answer.
const redacted = "<redacted>"

var (
	errSubscriberMissing = badRequest("Missing parameter subscriber in body.")
	errSubscriberType    = badRequest("The subscriber type of subscription must be supported in the list ['http', 'https', 'mailto', 'trust+http', 'trust+https'].")
	errSubscriptionTTL   = badRequest("TTL must be an integer.")
	errSubscriptionMin   = badRequest("The TTL for a subscription must be at least " + strconv.Itoa(minSubscriptionTTL) + " seconds long.")
	errSubscriptionMax   = badRequest("The TTL seconds for a subscription plus current time must be less than 9999-12-31 23:59:59.999999.")
	errOptionsType       = badRequest("Options must be a dict.")
	errNoSubscription    = badRequest("No subscription to create.")
	errSubscriptionsType = badRequest("Subscriptions must be a dict.")
	errConfirmedType     = badRequest("The 'confirmed' should be boolean.")
	errSubscriberTaken   = &apiError{http.StatusConflict, "Conflict",
		"Such subscription already exists. Subscriptions are unique by project + queue + subscriber URI."}

	errPostData    = badRequest(`The option post_data must be a string: a template in which "$zaqar_message$" (with its quotes) stands for the notification.`)
	errPostHeaders = badRequest("The option post_headers must be an object of header names and string values.")
	errTrustOption = badRequest("The option trust_id is the server's: it holds the Keystone trust of a trust+ subscriber and cannot be set.")
	// Zaqar answers these 503 "Subscription could not be created." after
	// its trust creation fails.
	errTrustNeedsKeystone = badRequest("A trust+ subscriber is notified with a Keystone trust, and this server does not use Keystone (--auth keystone): subscribe with http or https instead.")
	errTrustNeedsUser     = badRequest("A trust+ subscriber needs the token of a Keystone user, who delegates a trust to the server: the admin token names no user.")
)

// reservedHeaderErr refuses a post_headers name the sender owns.
func reservedHeaderErr(name string) *apiError {
	if notify.ReservedHeader(name, false) {
		return badRequest("The header " + strconv.Quote(name) + " cannot be set with post_headers: hop-by-hop headers, Content-Length, Host and X-Sluice-* are the server's.")
	}
	return badRequest("The header " + strconv.Quote(name) + " cannot be set with post_headers of a trust+ subscriber: it carries the trust's token.")
}

// optionsErr checks the options the notifier reads, as far as they do not
// depend on the subscriber: post_data a string, post_headers an object of
// valid headers that are not reserved.
func optionsErr(opts storage.Metadata) *apiError {
	if v, ok := opts["post_data"]; ok {
		if _, ok := v.(string); !ok {
			return errPostData
		}
	}
	v, ok := opts["post_headers"]
	if !ok {
		return nil
	}
	h, ok := v.(map[string]any)
	if !ok {
		return errPostHeaders
	}
	for k, v := range h {
		s, ok := v.(string)
		switch {
		case !ok:
			return errPostHeaders
		case !validHeaderName(k):
			return badRequest("The post_headers name " + strconv.Quote(k) + " is not a valid HTTP header name.")
		case !validHeaderValue(s):
			return badRequest("The post_headers value of " + strconv.Quote(k) + " is not a valid HTTP header value.")
		case notify.ReservedHeader(k, false):
			return reservedHeaderErr(k)
		}
	}
	return nil
}

// validHeaderName: a token (RFC 9110 section 5.6.2).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue: no control character but tab (RFC 9110 section 5.5).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func subscriptionMissing(id string) string { return "Subscription " + id + " does not exist" }

// routesSubscriptions mounts the subscription routes and the deliveries
// extension under the queue path q.
func (s *Server) routesSubscriptions(q string) {
	s.Handle("POST", q+"/subscriptions", Project, s.createSubscription)
	s.Handle("GET", q+"/subscriptions", Project, s.listSubscriptions)
	s.Handle("GET", q+"/subscriptions/{subscription_id}", Project, s.getSubscription)
	s.Handle("PATCH", q+"/subscriptions/{subscription_id}", Project, s.patchSubscription)
	s.Handle("DELETE", q+"/subscriptions/{subscription_id}", Project, s.deleteSubscription)
	s.Handle("PUT", q+"/subscriptions/{subscription_id}/confirm", Project, s.confirmSubscription)
	s.Handle("GET", q+"/deliveries", Project, s.queueDeliveries)
}

// ValidSubscriber reports whether Zaqar accepts the subscriber URI: http,
// https, trust+http, trust+https with a host, or mailto with an address.
func ValidSubscriber(sub string) bool {
	return subscriberErr(sub) == nil
}

// webhookScheme reports whether a subscriber's scheme delivers by HTTP.
func webhookScheme(scheme string) bool {
	switch strings.ToLower(scheme) {
	case "http", "https", "trust+http", "trust+https":
		return true
	}
	return false
}

// subscriberErr words why sub cannot be a subscriber: Zaqar's message for
// a scheme it does not serve; for a served scheme that names nobody to
// reach (which Zaqar accepts, and then never delivers to), what is
// missing; for one Go's URL parser cannot read (a bad escape, port or
// IPv6 bracket, a control character), what it found.
func subscriberErr(sub string) *apiError {
	u, err := url.Parse(sub)
	if err != nil {
		scheme, _, _ := strings.Cut(sub, ":")
		var ue *url.Error
		if (webhookScheme(scheme) || strings.EqualFold(scheme, "mailto")) && errors.As(err, &ue) {
			return badRequest("The subscriber " + strconv.Quote(sub) + " is not a valid URL: " + ue.Err.Error() + ".")
		}
		return errSubscriberType
	}
	switch {
	case webhookScheme(u.Scheme):
		if u.Host == "" {
			return badRequest("The subscriber " + strconv.Quote(sub) + " names no host to deliver to.")
		}
		return nil
	case strings.EqualFold(u.Scheme, "mailto"):
		if !strings.Contains(u.Opaque+u.Path, "@") {
			return badRequest("The subscriber " + strconv.Quote(sub) + " names no mail address (mailto:user@host).")
		}
		return nil
	}
	return errSubscriberType
}

// subscriptionDoc is a validated POST or PATCH body; absent fields are nil.
type subscriptionDoc struct {
	subscriber *string
	ttl        *time.Duration
	options    storage.Metadata
}

// parseSubscription validates a body as Zaqar's subscription_posting and
// subscription_patching do, in their order.
func parseSubscription(body []byte, post bool) (subscriptionDoc, *apiError) {
	var d subscriptionDoc
	var doc map[string]json.RawMessage
	if len(strings.TrimSpace(string(body))) == 0 {
		if post {
			return d, errSubscriberMissing
		}
		return d, errNoSubscription
	}
	if _, e := parseJSONDocument(body); e != nil {
		return d, e
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		if post {
			return d, errSubscriberMissing
		}
		return d, errSubscriptionsType
	}
	if _, ok := doc["subscriber"]; post && !ok {
		return d, errSubscriberMissing
	}
	if len(doc) == 0 {
		return d, errNoSubscription
	}
	// A refusal Zaqar does not make (it skips an empty or null subscriber,
	// and takes one that names nobody to reach) comes after the checks it
	// does make, so where Zaqar refuses the body both name the same fault.
	var stricter *apiError
	if raw, ok := doc["subscriber"]; ok {
		var sub string
		if json.Unmarshal(raw, &sub) != nil {
			return d, errSubscriberType
		}
		if e := subscriberErr(sub); e != nil {
			if sub != "" && e == errSubscriberType {
				return d, e
			}
			stricter = e
		}
		d.subscriber = &sub
	}
	if raw, ok := doc["options"]; ok && !isNull(raw) {
		// The whole body passed parseJSONDocument's checks above; options
		// only has to be an object (numbers kept exact).
		var m storage.Metadata
		if storage.DecodeMetadata(raw, &m) != nil {
			// Zaqar skips a false-like value ([], "", 0, false): refused
			// after the checks it makes, as a stricter subscriber is.
			if v, err := parseJSONDocument(raw); err != nil || !falsy(v) {
				return d, errOptionsType
			}
			if stricter == nil {
				stricter = errOptionsType
			}
		}
		if e := optionsErr(m); e != nil && stricter == nil {
			stricter = e
		}
		d.options = m
	}
	if raw, ok := doc["ttl"]; ok && !isNull(raw) {
		n, ok := jsonInt(raw)
		if !ok {
			return d, errSubscriptionTTL
		}
		if n < minSubscriptionTTL {
			return d, errSubscriptionMin
		}
		if n > maxSubscriptionTTL {
			return d, errSubscriptionMax
		}
		ttl := time.Duration(n) * time.Second
		d.ttl = &ttl
	}
	if stricter != nil {
		return d, stricter
	}
	return d, nil
}

// subscriptionJSON is a subscription as Zaqar shows it.
type subscriptionJSON struct {
	ID         string           `json:"id"`
	Source     string           `json:"source"`
	Subscriber string           `json:"subscriber"`
	TTL        int64            `json:"ttl"`
	Age        int64            `json:"age"`
	Options    storage.Metadata `json:"options"`
	Confirmed  bool             `json:"confirmed"`
}

func showSubscription(queue string, sub storage.Subscription, now time.Time) subscriptionJSON {
	opts := sub.Options
	if opts == nil {
		opts = storage.Metadata{}
	}
	if _, ok := opts["secret"]; ok {
		opts = opts.Clone()
		opts["secret"] = redacted
	}
	return subscriptionJSON{
		ID: sub.ID, Source: queue, Subscriber: sub.Subscriber,
		TTL: int64(sub.TTL / time.Second), Age: int64(max(sub.Age(now), 0) / time.Second),
		Options: opts, Confirmed: sub.Confirmed,
	}
}

// createSubscription: POST /v2/queues/{q}/subscriptions -> 201 {"subscription_id"}.
func (s *Server) createSubscription(w http.ResponseWriter, r *http.Request, c *Call) {
	body, e := s.readBody(r, c.w)
	if e != nil {
		s.fail(w, e)
		return
	}
	d, e := parseSubscription(body, true)
	if e != nil {
		s.fail(w, e)
		return
	}
	sub := storage.Subscription{
		Subscriber:        *d.subscriber,
		TTL:               defaultSubscriptionTTL * time.Second,
		Options:           d.options,
		NeedsConfirmation: s.opts.RequireConfirmation,
	}
	if d.ttl != nil {
		sub.TTL = *d.ttl
	}
	if sub.Options == nil {
		sub.Options = storage.Metadata{}
	}
	if _, ok := sub.Options[notify.TrustOption]; ok {
		s.fail(w, errTrustOption)
		return
	}
	trust := notify.IsTrust(sub.Subscriber)
	if e := trustHeadersErr(sub.Options, trust); e != nil {
		s.fail(w, e)
		return
	}
	// A trust+ subscriber's trust is created first and stored with it, so
	// a refusal stores nothing.
	var trustID string
	if trust {
		if trustID, e = s.grantTrust(r, c, s.clock.Now().Add(sub.TTL)); e != nil {
			s.fail(w, e)
			return
		}
		sub.Options[notify.TrustOption] = trustID
	}
	id, created, err := s.drv.Subscriptions().Create(c.ctx, c.ref(), sub)
	if err != nil {
		s.revokeTrust(r, c, trustID)
		s.fail(w, storageErr(err, "Subscription could not be created.", ""))
		return
	}
	if !created {
		// The subscriber was there already and keeps its own trust.
		s.revokeTrust(r, c, trustID)
	}
	if s.onSubscribe != nil {
		// Also for a subscriber posted again: one still unconfirmed gets
		// another confirmation request.
		sub.ID = id
		s.onSubscribe(c.ref(), sub)
	}
	w.Header()["Location"] = []string{r.URL.Path}
	WriteJSON(w, http.StatusCreated, map[string]string{"subscription_id": id})
}

// listSubscriptions: GET /v2/queues/{q}/subscriptions[?marker,limit].
func (s *Server) listSubscriptions(w http.ResponseWriter, r *http.Request, c *Call) {
	qv := r.URL.Query()
	var link linkQuery
	limit := defaultSubscriptions
	marker := qv.Get("marker")
	if marker != "" {
		link.add("marker", marker)
	}
	n, given, e := queryInt(qv, "limit")
	if e != nil {
		s.fail(w, e)
		return
	}
	if given {
		if n < 1 || n > maxSubscriptionsPage {
			s.fail(w, limitErr(maxSubscriptionsPage))
			return
		}
		limit = n
		link.add("limit", strconv.Itoa(n))
	}
	subs, _, err := s.drv.Subscriptions().List(c.ctx, c.ref(), storage.ListSubscriptionsOptions{Marker: marker, Limit: limit})
	if err != nil {
		s.fail(w, storageErr(err, "Subscriptions could not be listed.", ""))
		return
	}
	type linkJSON struct {
		Rel  string `json:"rel"`
		Href string `json:"href"`
	}
	out := struct {
		Subscriptions []subscriptionJSON `json:"subscriptions"`
		Links         []linkJSON         `json:"links"`
	}{Subscriptions: []subscriptionJSON{}, Links: []linkJSON{}}
	now := s.clock.Now()
	for _, sub := range subs {
		out.Subscriptions = append(out.Subscriptions, showSubscription(c.queue, sub, now))
	}
	// Zaqar links a next page whenever this one is not empty.
	if len(subs) > 0 {
		link.setMarker(subs[len(subs)-1].ID)
		out.Links = append(out.Links, linkJSON{"next", r.URL.Path + link.String()})
	}
	WriteJSON(w, http.StatusOK, out)
}

// getSubscription: GET /v2/queues/{q}/subscriptions/{id}.
func (s *Server) getSubscription(w http.ResponseWriter, r *http.Request, c *Call) {
	id := r.PathValue("subscription_id")
	sub, err := s.drv.Subscriptions().Get(c.ctx, c.ref(), id)
	if err != nil {
		s.fail(w, storageErr(err, "Subscription could not be retrieved.", subscriptionMissing(id)))
		return
	}
	WriteJSON(w, http.StatusOK, showSubscription(c.queue, sub, s.clock.Now()))
}

// patchSubscription: PATCH /v2/queues/{q}/subscriptions/{id} -> 204. A
// redacted secret sent back unchanged keeps the stored one.
func (s *Server) patchSubscription(w http.ResponseWriter, r *http.Request, c *Call) {
	id := r.PathValue("subscription_id")
	body, e := s.readBody(r, c.w)
	if e != nil {
		s.fail(w, e)
		return
	}
	d, e := parseSubscription(body, false)
	if e != nil {
		s.fail(w, e)
		return
	}
	old, err := s.drv.Subscriptions().Get(c.ctx, c.ref(), id)
	if err != nil {
		s.fail(w, storageErr(err, "Subscription could not be updated.", subscriptionMissing(id)))
		return
	}
	if d.options != nil && d.options["secret"] == redacted {
		if secret, ok := old.Options["secret"]; ok {
			d.options["secret"] = secret
		}
	}
	plan, e := s.planTrust(r, c, old, d)
	if e != nil {
		s.fail(w, e)
		return
	}
	if plan.options != nil {
		d.options = plan.options
	}
	err = s.drv.Subscriptions().Update(c.ctx, c.ref(), id, storage.SubscriptionUpdate{
		Subscriber: d.subscriber, TTL: d.ttl, Options: d.options,
	})
	if err != nil {
		s.revokeTrust(r, c, plan.created)
	} else {
		s.revokeTrust(r, c, plan.retired)
	}
	if storage.Is(err, storage.Conflict) {
		s.fail(w, errSubscriberTaken)
		return
	}
	if err != nil {
		s.fail(w, storageErr(err, "Subscription could not be updated.", subscriptionMissing(id)))
		return
	}
	w.Header()["Location"] = []string{r.URL.Path}
	writeEmpty(w, http.StatusNoContent)
}

// deleteSubscription: DELETE /v2/queues/{q}/subscriptions/{id} -> 204, also
// for unknown ids. A trust+ subscription's trust is deleted after it.
func (s *Server) deleteSubscription(w http.ResponseWriter, r *http.Request, c *Call) {
	id := r.PathValue("subscription_id")
	var trustID string
	if s.trusts != nil {
		if old, err := s.drv.Subscriptions().Get(c.ctx, c.ref(), id); err == nil {
			trustID = trustOf(old)
		}
	}
	if err := s.drv.Subscriptions().Delete(c.ctx, c.ref(), id); err != nil {
		s.fail(w, storageErr(err, "Subscription could not be deleted.", ""))
		return
	}
	s.revokeTrust(r, c, trustID)
	writeEmpty(w, http.StatusNoContent)
}

// confirmSubscription: PUT /v2/queues/{q}/subscriptions/{id}/confirm
// {"confirmed": bool} -> 204.
func (s *Server) confirmSubscription(w http.ResponseWriter, r *http.Request, c *Call) {
	id := r.PathValue("subscription_id")
	body, e := s.readBody(r, c.w)
	if e != nil {
		s.fail(w, e)
		return
	}
	var doc map[string]json.RawMessage
	if len(body) > 0 {
		if _, e := parseJSONDocument(body); e != nil {
			s.fail(w, e)
			return
		}
		_ = json.Unmarshal(body, &doc)
	}
	var confirmed bool
	if raw, ok := doc["confirmed"]; !ok || json.Unmarshal(raw, &confirmed) != nil {
		s.fail(w, errConfirmedType)
		return
	}
	if err := s.drv.Subscriptions().Confirm(c.ctx, c.ref(), id, confirmed); err != nil {
		s.fail(w, storageErr(err, "Subscription could not be confirmed.", subscriptionMissing(id)))
		return
	}
	w.Header()["Location"] = []string{r.URL.Path}
	writeEmpty(w, http.StatusNoContent)
}

// deliveriesJSON is the answer of the deliveries extension.
type deliveriesJSON struct {
	Pending     int64               `json:"pending"`
	Failed      int64               `json:"failed"`
	Delivered   int64               `json:"delivered"`
	LastError   *string             `json:"last_error"`
	LastErrorAt *string             `json:"last_error_at"`
	Subs        []subDeliveriesJSON `json:"subscriptions"`
}

type subDeliveriesJSON struct {
	ID          string  `json:"id"`
	Subscriber  string  `json:"subscriber"`
	Pending     int64   `json:"pending"`
	Failed      int64   `json:"failed"`
	Delivered   int64   `json:"delivered"`
	LastError   *string `json:"last_error"`
	LastErrorAt *string `json:"last_error_at"`
}

func lastError(text string, at time.Time) (*string, *string) {
	if at.IsZero() {
		return nil, nil
	}
	ts := at.UTC().Format(time.RFC3339)
	return &text, &ts
}

// queueDeliveries: GET /v2/queues/{q}/deliveries, sluice's view of the
// queue's notification health.
func (s *Server) queueDeliveries(w http.ResponseWriter, r *http.Request, c *Call) {
	st, err := s.drv.Deliveries().Stats(c.ctx, c.ref())
	if err != nil {
		s.fail(w, storageErr(err, "Deliveries could not be counted.", ""))
		return
	}
	out := deliveriesJSON{Pending: st.Pending, Failed: st.Failed, Delivered: st.Delivered, Subs: []subDeliveriesJSON{}}
	out.LastError, out.LastErrorAt = lastError(st.LastError, st.LastErrorAt)
	for _, row := range st.Subscriptions {
		j := subDeliveriesJSON{ID: row.ID, Subscriber: row.Subscriber, Pending: row.Pending, Failed: row.Failed, Delivered: row.Delivered}
		j.LastError, j.LastErrorAt = lastError(row.LastError, row.LastErrorAt)
		out.Subs = append(out.Subs, j)
	}
	WriteJSON(w, http.StatusOK, out)
}
