package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/sync/singleflight"
)

// KubernetesConfig says where the cluster's service-account issuer is and
// what a ServiceAccount token must say to be accepted.
type KubernetesConfig struct {
	// API is the apiserver's base URL, https://host:port.
	API string
	// TokenFile holds the server's own ServiceAccount token, which reads
	// the discovery document and the keys. It is read again for every
	// fetch: the kubelet rotates it. Empty: those requests are anonymous.
	TokenFile string
	// CAFile is the PEM bundle that signs the apiserver's certificate.
	CAFile string
	// Audience must be one of a token's audiences.
	Audience string
	// Timeout bounds one fetch of the discovery document or the keys.
	Timeout time.Duration
}

// How the issuer's keys are kept. A token is checked against the keys in
// memory, never with a call to the apiserver; the keys are fetched at
// first use, again in the background once they are keysRefresh old, and
// at once for a token signed by a key id they lack (at most every
// kidRefetch, so tokens with made-up key ids cannot turn into load on the
// apiserver). After a failed fetch the next waits failedRetry.
const (
	keysRefresh = 5 * time.Minute
	kidRefetch  = 10 * time.Second
	failedRetry = time.Second
	// clockLeeway is how far exp, nbf and iat may be off, for clocks that
	// disagree a little between nodes.
	clockLeeway = 30 * time.Second
)

// signingAlgs are the algorithms the apiserver signs with (RSA keys sign
// RS256, ECDSA keys ES256/384/512). Anything else, none and HMAC among
// them, does not parse.
var signingAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.ES384, jose.ES512}

// ServiceAccounts validates Kubernetes ServiceAccount tokens offline: the
// signature against the issuer's published keys (OIDC discovery of the
// apiserver, then its JWKS), the issuer, the audience and the token's
// lifetime. A pod or ServiceAccount deleted after the token was issued is
// not noticed: its token works until it expires, as with any offline
// validation (the apiserver's TokenReview would see it at once).
type ServiceAccounts struct {
	cfg  KubernetesConfig
	http *http.Client
	base *url.URL
	log  *slog.Logger
	now  func() time.Time

	keys       atomic.Pointer[keySet]
	refreshing atomic.Bool
	flight     singleflight.Group

	mu           sync.Mutex
	lastKidFetch time.Time
	lastFailure  time.Time
	lastErr      error
	failing      bool
}

// keySet is one fetch of the issuer's discovery document and keys.
type keySet struct {
	issuer  string
	byKid   map[string]jose.JSONWebKey
	all     []jose.JSONWebKey
	fetched time.Time
}

// NewServiceAccounts returns a validator for the cluster at cfg.API. It
// fetches nothing yet: the first token does.
func NewServiceAccounts(cfg KubernetesConfig, log *slog.Logger) (*ServiceAccounts, error) {
	base, err := url.Parse(strings.TrimRight(cfg.API, "/"))
	if err != nil || base.Scheme != "https" || base.Host == "" {
		return nil, fmt.Errorf("kubernetes API %q is not an https URL", cfg.API)
	}
	pem, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("kubernetes CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("kubernetes CA file %s: no PEM certificate in it", cfg.CAFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ServiceAccounts{cfg: cfg, base: base, log: log, now: time.Now,
		http: &http.Client{Transport: tr, Timeout: cfg.Timeout,
			// The server's own token goes to the apiserver only.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}, nil
}

// kubeClaims are the private claims the apiserver puts in a bound token.
type kubeClaims struct {
	Kubernetes *struct {
		Namespace      string `json:"namespace"`
		ServiceAccount struct {
			Name string `json:"name"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...)
}

// Validate checks a ServiceAccount token. The identity's project is the
// token's namespace and ServiceAccount its namespace/name; a token never
// carries the admin role. It returns an error wrapping ErrInvalid (with
// the reason, for the log) for a token that does not hold, and an
// *UnavailableError when the issuer's keys cannot be had to decide.
func (v *ServiceAccounts) Validate(ctx context.Context, token string) (Identity, error) {
	tok, err := jwt.ParseSigned(token, signingAlgs)
	if err != nil {
		return Identity{}, invalid("not a JWS compact token with an accepted algorithm: %v", err)
	}
	if len(tok.Headers) != 1 {
		return Identity{}, invalid("%d signatures", len(tok.Headers))
	}
	kid, alg := tok.Headers[0].KeyID, tok.Headers[0].Algorithm
	ks, err := v.keysFor(ctx, kid)
	if err != nil {
		return Identity{}, err
	}
	candidates := ks.all
	if kid != "" {
		k, ok := ks.byKid[kid]
		if !ok {
			return Identity{}, invalid("signed by key id %q, which the issuer does not publish", kid)
		}
		candidates = []jose.JSONWebKey{k}
	}
	var std jwt.Claims
	var priv kubeClaims
	verified := false
	for _, k := range candidates {
		if k.Algorithm != "" && k.Algorithm != alg {
			continue
		}
		if tok.Claims(k.Key, &std, &priv) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return Identity{}, invalid("the signature does not verify with the issuer's keys")
	}
	if std.Expiry == nil {
		return Identity{}, invalid("no exp claim")
	}
	err = std.ValidateWithLeeway(jwt.Expected{Issuer: ks.issuer, AnyAudience: jwt.Audience{v.cfg.Audience}, Time: v.now()}, clockLeeway)
	switch {
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return Identity{}, invalid("issuer %q, want %q", std.Issuer, ks.issuer)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return Identity{}, invalid("audiences %q do not include %q", []string(std.Audience), v.cfg.Audience)
	case err != nil:
		return Identity{}, invalid("%v", err)
	}
	ns, name, err := serviceAccountOf(std.Subject, priv)
	if err != nil {
		return Identity{}, err
	}
	return Identity{Project: ns, ServiceAccount: ns + "/" + name, Expires: std.Expiry.Time()}, nil
}

// serviceAccountOf reads namespace and name from the kubernetes.io claim,
// else from sub (system:serviceaccount:NS:NAME); both, when present, must
// agree.
func serviceAccountOf(sub string, priv kubeClaims) (ns, name string, err error) {
	rest, isSA := strings.CutPrefix(sub, "system:serviceaccount:")
	subNS, subName, _ := strings.Cut(rest, ":")
	if !isSA || strings.Contains(subName, ":") {
		subNS, subName = "", ""
	}
	if k := priv.Kubernetes; k != nil && (k.Namespace != "" || k.ServiceAccount.Name != "") {
		ns, name = k.Namespace, k.ServiceAccount.Name
		if sub != "" && (ns != subNS || name != subName) {
			return "", "", invalid("sub %q disagrees with the kubernetes.io claim (%s/%s)", sub, ns, name)
		}
	} else {
		ns, name = subNS, subName
	}
	if ns == "" || name == "" || strings.Contains(ns, "/") || strings.Contains(name, "/") {
		return "", "", invalid("no service account namespace and name (sub %q)", sub)
	}
	return ns, name, nil
}

// keysFor returns keys to check a token signed with kid by: those in
// memory while they hold kid (refreshed behind the request once old),
// else a fresh fetch when one is allowed.
func (v *ServiceAccounts) keysFor(ctx context.Context, kid string) (*keySet, error) {
	now := v.now()
	ks := v.keys.Load()
	if ks == nil {
		return v.fetch(ctx)
	}
	if _, known := ks.byKid[kid]; known || kid == "" {
		if now.Sub(ks.fetched) >= keysRefresh && v.refreshing.CompareAndSwap(false, true) {
			go func() {
				defer v.refreshing.Store(false)
				v.fetch(context.WithoutCancel(ctx))
			}()
		}
		return ks, nil
	}
	v.mu.Lock()
	allowed := now.Sub(v.lastKidFetch) >= kidRefetch
	if allowed {
		v.lastKidFetch = now
	}
	v.mu.Unlock()
	if !allowed {
		return ks, nil
	}
	return v.fetch(ctx)
}

// fetch reads the discovery document and the keys, once however many
// callers ask at the same time, and keeps them.
func (v *ServiceAccounts) fetch(ctx context.Context) (*keySet, error) {
	res, err, _ := v.flight.Do("keys", func() (any, error) {
		v.mu.Lock()
		if v.lastErr != nil && v.now().Sub(v.lastFailure) < failedRetry {
			err := v.lastErr
			v.mu.Unlock()
			return nil, err
		}
		v.mu.Unlock()
		ks, err := v.load(context.WithoutCancel(ctx))
		v.mu.Lock()
		defer v.mu.Unlock()
		if err != nil {
			err = &UnavailableError{err}
			v.lastErr, v.lastFailure = err, v.now()
			if !v.failing {
				v.failing = true
				v.log.Warn("service account issuer keys: fetch failed", "error", err.Error())
			}
			return nil, err
		}
		v.lastErr = nil
		old := v.keys.Swap(ks)
		if v.failing || old == nil || !slices.Equal(kids(old), kids(ks)) {
			v.log.Info("service account issuer keys", "issuer", ks.issuer, "kids", kids(ks))
		}
		v.failing = false
		return ks, nil
	})
	if err != nil {
		return nil, err
	}
	return res.(*keySet), nil
}

func kids(ks *keySet) []string {
	out := make([]string, 0, len(ks.all))
	for _, k := range ks.all {
		out = append(out, k.KeyID)
	}
	slices.Sort(out)
	return out
}

// load is one fetch: the discovery document, then its jwks_uri.
func (v *ServiceAccounts) load(ctx context.Context) (*keySet, error) {
	var disc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := v.getJSON(ctx, v.base.JoinPath("/.well-known/openid-configuration"), "application/json", &disc); err != nil {
		return nil, err
	}
	if disc.Issuer == "" {
		return nil, errors.New("the discovery document names no issuer")
	}
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	// The apiserver answers 406 to a JWKS request accepting only JSON.
	if err := v.getJSON(ctx, v.jwksURL(disc.JWKSURI), "application/jwk-set+json, application/json", &raw); err != nil {
		return nil, err
	}
	ks := &keySet{issuer: disc.Issuer, byKid: map[string]jose.JSONWebKey{}, fetched: v.now()}
	for _, r := range raw.Keys {
		var k jose.JSONWebKey
		// A key of a type this library does not know is skipped, not fatal.
		if k.UnmarshalJSON(r) != nil || !k.IsPublic() || k.Use != "" && k.Use != "sig" {
			continue
		}
		switch k.Key.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey:
		default:
			continue
		}
		ks.all = append(ks.all, k)
		if k.KeyID != "" {
			ks.byKid[k.KeyID] = k
		}
	}
	if len(ks.all) == 0 {
		return nil, errors.New("the issuer publishes no RSA or ECDSA signing key")
	}
	return ks, nil
}

// jwksURL is the discovery document's jwks_uri when it is on the
// apiserver, else the apiserver's own /openid/v1/jwks: the server's token
// is never sent elsewhere (an issuer that publishes its keys on another
// host still serves them here).
func (v *ServiceAccounts) jwksURL(advertised string) *url.URL {
	if u, err := url.Parse(advertised); err == nil && u.Scheme == v.base.Scheme && u.Host == v.base.Host {
		return u
	}
	return v.base.JoinPath("/openid/v1/jwks")
}

func (v *ServiceAccounts) getJSON(ctx context.Context, u *url.URL, accept string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", accept)
	if v.cfg.TokenFile != "" {
		b, err := os.ReadFile(v.cfg.TokenFile)
		if err != nil {
			return fmt.Errorf("kubernetes token file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
	}
	resp, err := v.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: the apiserver answered %d", u, resp.StatusCode)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}
