package api

import (
	"crypto/subtle"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"time"

	"sluice.dev/server/internal/auth"
	"sluice.dev/server/internal/config"
)

// In kubernetes mode a validated token is kept until it expires: checking
// it again would give the same answer (the keys decide, not the
// apiserver). Refusals are kept briefly, so a key the issuer has just
// published is taken up soon.
const (
	kubeCacheSize = 10000
	kubeRefusals  = 10 * time.Second
	kubeTimeout   = 5 * time.Second
)

// newKubernetes returns the kubernetes-mode authenticator, or nil in the
// other modes.
func newKubernetes(opts config.Options, log *slog.Logger) authenticator {
	if opts.AuthMode() != config.AuthKubernetes {
		return nil
	}
	k := opts.Kubernetes
	v, err := auth.NewServiceAccounts(auth.KubernetesConfig{
		API: opts.KubernetesAPI(), TokenFile: k.TokenFile, CAFile: k.CAFile, Audience: k.Audience, Timeout: kubeTimeout,
	}, log)
	if err != nil {
		log.Error("kubernetes auth cannot validate tokens", "error", err.Error())
		return brokenAuth{err}
	}
	return auth.NewCached(v, kubeCacheSize, math.MaxInt64).RememberRefusals(kubeRefusals)
}

var errIssuerDown = &apiError{http.StatusServiceUnavailable, titleUnavailable,
	"The service account issuer's keys could not be read to validate the token." + retrySuffix}

// authorizeKubernetes is authorize in kubernetes mode. The project is the
// token's namespace. An X-Project-ID naming another project is refused
// (403) unless an access grant lets the token's service account act on
// this route's queue there: grants cover the routes under
// /v2/queues/{queue_name}, never listings or other queues. Tokens never
// carry the admin role; the static admin token does, as in keystone mode.
func (s *Server) authorizeKubernetes(r *http.Request, c *Call) *apiError {
	h := r.Header
	tok := bearerToken(h)
	if tok == "" {
		return errNoToken
	}
	if s.adminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.adminToken)) == 1 {
		return adminFor(h, c)
	}
	id, err := s.kube.Authenticate(r.Context(), tok)
	if err != nil {
		return s.kubeRefusal(err, c)
	}
	if proj := h["X-Project-Id"]; len(proj) > 0 && proj[0] != "" && proj[0] != id.Project {
		// PathValue is "" on routes without a queue (listings, topics).
		if q := r.PathValue("queue_name"); q == "" || !s.grants.Allows(proj[0], q, id.ServiceAccount) {
			return &apiError{http.StatusForbidden, "Not authorized", "The token is not valid for project " + proj[0] + "."}
		}
		c.Project = proj[0]
		return nil
	}
	c.Project = id.Project
	return nil
}

// kubeRefusal answers a token that was not accepted, and logs why; apart
// from authorizeKubernetes so that the accepted path allocates nothing.
func (s *Server) kubeRefusal(err error, c *Call) *apiError {
	var down *auth.UnavailableError
	if errors.As(err, &down) {
		s.log.Warn("service account issuer unavailable: token not validated", "error", down.Err.Error(), "request_id", c.RequestID)
		return errIssuerDown
	}
	s.log.Debug("service account token refused", "reason", err.Error(), "request_id", c.RequestID)
	return errBadToken
}
