package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"

	"sluice.dev/server/internal/auth"
	"sluice.dev/server/internal/config"
)

// authenticator resolves a Keystone token to its identity (*auth.Cached).
type authenticator interface {
	Authenticate(ctx context.Context, token string) (auth.Identity, error)
}

// brokenAuth stands in when the Keystone client cannot be built (an
// unreadable CA file): every token is then unvalidated, never accepted.
type brokenAuth struct{ err error }

func (b brokenAuth) Authenticate(context.Context, string) (auth.Identity, error) {
	return auth.Identity{}, &auth.UnavailableError{Err: b.err}
}

// newKeystone returns the keystone-mode authenticator, or nil in the other
// modes.
func newKeystone(opts config.Options, log *slog.Logger) authenticator {
	if opts.AuthMode() != config.AuthKeystone {
		return nil
	}
	cl, err := keystoneClient(opts)
	if err != nil {
		log.Error("keystone auth cannot validate tokens", "error", err.Error())
		return brokenAuth{err}
	}
	return auth.NewCached(cl, opts.Keystone.CacheSize, opts.Keystone.Revalidate)
}

var (
	errKeystoneDown = &apiError{http.StatusServiceUnavailable, titleUnavailable,
		"The identity service could not validate the token." + retrySuffix}
	errUnscoped = &apiError{http.StatusForbidden, "Not authorized", "The token is not scoped to a project."}
)

// authorizeKeystone is authorize in keystone mode. The project is the
// token's; an X-Project-ID naming another project is refused (403) rather
// than silently replaced, so a misconfigured client learns of it. The
// static admin token, when set, still grants the admin role (the operator
// registers pools with it) and acts for the project it names.
func (s *Server) authorizeKeystone(r *http.Request, c *Call) *apiError {
	h := r.Header
	tok := bearerToken(h)
	if tok == "" {
		return s.keystoneChallenge(errNoToken)
	}
	if s.adminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.adminToken)) == 1 {
		return adminFor(h, c)
	}
	id, err := s.keystone.Authenticate(r.Context(), tok)
	var down *auth.UnavailableError
	switch {
	case err == nil:
	case errors.As(err, &down):
		s.log.Warn("keystone unavailable: token not validated", "error", down.Err.Error(), "request_id", c.RequestID)
		return errKeystoneDown
	case errors.Is(err, auth.ErrUnscoped):
		return errUnscoped
	default:
		return s.keystoneChallenge(errBadToken)
	}
	if proj := h["X-Project-Id"]; len(proj) > 0 && proj[0] != "" && proj[0] != id.Project {
		return &apiError{http.StatusForbidden, "Not authorized", "The token is not valid for project " + proj[0] + "."}
	}
	c.Project = id.Project
	c.Admin = id.Admin
	return nil
}

// keystoneChallenge tells the client where to get a token, as
// keystonemiddleware's WWW-Authenticate does.
func (s *Server) keystoneChallenge(e *apiError) *apiError {
	if s.keystoneURL != "" {
		e = &apiError{e.status, e.title, e.desc + " Get one from the identity service at " + s.keystoneURL + "."}
	}
	return e
}
