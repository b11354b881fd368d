package api

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"time"

	"sluice.dev/server/internal/auth"
	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/notify"
	"sluice.dev/server/internal/storage"
)

// trustService is what trust+ subscriptions need of Keystone: the trust
// each one is notified with (*auth.Trusts in keystone mode, nil otherwise).
type trustService interface {
	// Create creates a trust from the bearer of userToken to the service
	// user, expiring at expires, and returns its id.
	Create(ctx context.Context, userToken string, expires time.Time) (string, error)
	// Delete deletes a trust; userToken is the caller's, a fallback.
	Delete(ctx context.Context, trustID, userToken string) error
	notify.Trusts
}

// keystoneClient is the one builder of Keystone clients from the options.
func keystoneClient(opts config.Options) (*auth.Client, error) {
	k := opts.Keystone
	pw, err := opts.KeystonePassword()
	if err != nil {
		return nil, err
	}
	return auth.NewClient(k.URL, auth.Credentials{
		Username: k.Username, Password: pw, UserDomain: k.UserDomain,
		Project: k.Project, ProjectDomain: k.ProjectDomain,
	}, k.CAFile, k.Timeout)
}

// newTrusts returns the keystone-mode trust service, or nil. A client that
// cannot be built leaves it nil: newKeystone then refuses every token, so
// no subscription route is reached.
func newTrusts(opts config.Options, log *slog.Logger) trustService {
	if opts.AuthMode() != config.AuthKeystone {
		return nil
	}
	cl, err := keystoneClient(opts)
	if err != nil {
		return nil
	}
	return auth.NewTrusts(cl, opts.Keystone.CacheSize)
}

// trustSlack is how much longer than its subscription a trust lives, so
// that the last deliveries are not refused because sluice's clock and
// Keystone's differ.
const trustSlack = time.Minute

// grantTrust creates the trust of a trust+ subscription that expires at
// expires, delegating from the caller.
func (s *Server) grantTrust(r *http.Request, c *Call, expires time.Time) (string, *apiError) {
	if s.trusts == nil {
		return "", errTrustNeedsKeystone
	}
	tok := bearerToken(r.Header)
	if s.adminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.adminToken)) == 1 {
		return "", errTrustNeedsUser
	}
	// Finished even if the client hangs up, so that a trust Keystone made
	// is not left behind unknown; bounded by the Keystone timeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 3*s.opts.Keystone.Timeout)
	defer cancel()
	id, err := s.trusts.Create(ctx, tok, expires.Add(trustSlack))
	if err != nil {
		s.log.Info("no Keystone trust for a trust+ subscription", "error", err.Error(), "request_id", c.RequestID)
		return "", trustErr(err)
	}
	return id, nil
}

// revokeTrust deletes a trust the subscriptions no longer use, best
// effort: one that stays lapses at its expiry, with its subscription's.
func (s *Server) revokeTrust(r *http.Request, c *Call, trustID string) {
	if trustID == "" || s.trusts == nil {
		return
	}
	// Both calls finish even if the client hangs up; each is bounded by
	// the Keystone timeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 3*s.opts.Keystone.Timeout)
	defer cancel()
	if err := s.trusts.Delete(ctx, trustID, bearerToken(r.Header)); err != nil {
		s.log.Warn("a Keystone trust was not deleted; it lapses at its expiry",
			"trust_id", trustID, "error", err.Error(), "request_id", c.RequestID)
	}
}

// trustOf is the trust a stored subscription is notified with.
func trustOf(sub storage.Subscription) string {
	if !notify.IsTrust(sub.Subscriber) {
		return ""
	}
	id, _ := sub.Options[notify.TrustOption].(string)
	return id
}

// trustsOf lists the trusts of the queue's subscriptions, to delete them
// after the subscriptions (queue delete, purge). A listing that fails
// leaves them to lapse.
func (s *Server) trustsOf(c *Call, q storage.QueueRef) []string {
	if s.trusts == nil {
		return nil
	}
	var ids []string
	marker := ""
	for {
		subs, next, err := s.drv.Subscriptions().List(c.ctx, q, storage.ListSubscriptionsOptions{Marker: marker, Limit: 100})
		if err != nil {
			return ids
		}
		for _, sub := range subs {
			if id := trustOf(sub); id != "" {
				ids = append(ids, id)
			}
		}
		if next == "" || len(subs) == 0 {
			return ids
		}
		marker = next
	}
}

// trustPlan is how a PATCH changes a subscription's trust: the options
// to write (nil: unchanged), the trust created for it and the one it
// replaces.
type trustPlan struct {
	options          storage.Metadata
	created, retired string
}

// planTrust decides a PATCH's trust: a trust+ subscription gets a new
// trust from the caller, whatever the PATCH changes, so that the token
// only ever carries what the user who delegated it asked for (where,
// what body and headers, how long): another user of the project who
// changes the request delegates their own roles, or is refused. One that
// stops being trust+ loses its trust. The trust id stays an option the
// server owns: a PATCH of the options may send it back unchanged, not set
// another.
func (s *Server) planTrust(r *http.Request, c *Call, old storage.Subscription, d subscriptionDoc) (trustPlan, *apiError) {
	subscriber := old.Subscriber
	if d.subscriber != nil {
		subscriber = *d.subscriber
	}
	stored, _ := old.Options[notify.TrustOption].(string)
	current := trustOf(old)
	opts := d.options
	if opts != nil {
		if v, ok := opts[notify.TrustOption]; ok {
			if id, _ := v.(string); id == "" || id != current {
				return trustPlan{}, errTrustOption
			}
			delete(opts, notify.TrustOption)
		}
	}
	trust := notify.IsTrust(subscriber)
	effective := opts
	if effective == nil {
		effective = old.Options
	}
	if e := trustHeadersErr(effective, trust); e != nil {
		return trustPlan{}, e
	}
	p := trustPlan{retired: current}
	keep := ""
	if trust {
		expires := old.Expires
		if d.ttl != nil {
			expires = s.clock.Now().Add(*d.ttl)
		}
		id, e := s.grantTrust(r, c, expires)
		if e != nil {
			return trustPlan{}, e
		}
		p.created, keep = id, id
	}
	if opts == nil && keep == stored {
		return p, nil
	}
	if opts == nil {
		opts = old.Options.Clone()
	}
	if keep != "" {
		opts[notify.TrustOption] = keep
	} else {
		delete(opts, notify.TrustOption)
	}
	p.options = opts
	return p, nil
}

// trustHeadersErr refuses, for a trust+ subscriber, a post_headers option
// that would replace the trust's token.
func trustHeadersErr(opts storage.Metadata, trust bool) *apiError {
	if !trust {
		return nil
	}
	h, _ := opts["post_headers"].(map[string]any)
	for k := range h {
		if notify.ReservedHeader(k, true) {
			return reservedHeaderErr(k)
		}
	}
	return nil
}
