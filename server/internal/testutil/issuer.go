package testutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/uuid"
)

// Issuer stands in for a kube-apiserver's service-account issuer: OIDC
// discovery (/.well-known/openid-configuration) and the keys
// (/openid/v1/jwks) over HTTPS, answered only to the bearer of the
// credential in TokenFile, as the apiserver answers service accounts. It
// signs tokens shaped as the apiserver's (kubectl create token). The real
// apiserver's tokens are checked in auth's TestRealAPIServer.
type Issuer struct {
	URL       string // the apiserver's address, https://127.0.0.1:port
	Issuer    string // the iss it signs and advertises
	CAFile    string // PEM of its certificate
	TokenFile string // the credential the server reads, rewritable with SetCredential

	t   testing.TB
	srv *httptest.Server

	mu        sync.Mutex
	keys      map[string]crypto.Signer
	published []string // kids in the JWKS, in order
	down      bool
	cred      string
	fetches   map[string]int // by path
	jwksURI   string         // advertised; "" = URL + /openid/v1/jwks
}

// StartIssuer starts an issuer publishing one RSA key, kid "k1".
func StartIssuer(t testing.TB) *Issuer {
	t.Helper()
	i := &Issuer{t: t, keys: map[string]crypto.Signer{}, fetches: map[string]int{}}
	i.srv = httptest.NewTLSServer(http.HandlerFunc(i.serve))
	t.Cleanup(i.srv.Close)
	i.URL = i.srv.URL
	i.Issuer = "https://kubernetes.default.svc.cluster.local"
	dir := t.TempDir()
	i.CAFile = filepath.Join(dir, "ca.crt")
	WriteFileAtomic(t, i.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: i.srv.Certificate().Raw}))
	i.TokenFile = filepath.Join(dir, "token")
	i.SetCredential("server-credential-1")
	i.AddKey("k1", "RS256")
	i.Publish("k1")
	return i
}

func (i *Issuer) serve(w http.ResponseWriter, r *http.Request) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.fetches[r.URL.Path]++
	if i.down {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+i.cred {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	// The apiserver's routes produce one media type each and answer 406
	// to an Accept without it (go-restful).
	produces := map[string]string{"/.well-known/openid-configuration": "application/json",
		"/openid/v1/jwks": "application/jwk-set+json"}[r.URL.Path]
	if a := r.Header.Get("Accept"); a != "" && produces != "" && !strings.Contains(a, produces) && !strings.Contains(a, "*/*") {
		w.WriteHeader(http.StatusNotAcceptable)
		return
	}
	w.Header().Set("Content-Type", produces)
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		uri := i.jwksURI
		if uri == "" {
			uri = i.URL + "/openid/v1/jwks"
		}
		json.NewEncoder(w).Encode(map[string]any{"issuer": i.Issuer, "jwks_uri": uri,
			"response_types_supported": []string{"id_token"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	case "/openid/v1/jwks":
		var set jose.JSONWebKeySet
		for _, kid := range i.published {
			k := i.keys[kid]
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Public(), KeyID: kid, Use: "sig", Algorithm: algOf(k)})
		}
		json.NewEncoder(w).Encode(set)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func algOf(k crypto.Signer) string {
	if _, ok := k.(*ecdsa.PrivateKey); ok {
		return "ES256"
	}
	return "RS256"
}

// AddKey makes a signing key (alg RS256 or ES256), not yet published.
func (i *Issuer) AddKey(kid, alg string) {
	i.t.Helper()
	var k crypto.Signer
	var err error
	if alg == "ES256" {
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		i.t.Fatal(err)
	}
	i.mu.Lock()
	i.keys[kid] = k
	i.mu.Unlock()
}

// Publish makes the JWKS hold exactly these keys.
func (i *Issuer) Publish(kids ...string) {
	i.mu.Lock()
	i.published = kids
	i.mu.Unlock()
}

// Key is a signing key made by AddKey.
func (i *Issuer) Key(kid string) crypto.Signer {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.keys[kid]
}

// SetDown makes every request fail with 503 (true) or be answered.
func (i *Issuer) SetDown(down bool) {
	i.mu.Lock()
	i.down = down
	i.mu.Unlock()
}

// SetJWKSURI changes the advertised jwks_uri.
func (i *Issuer) SetJWKSURI(uri string) {
	i.mu.Lock()
	i.jwksURI = uri
	i.mu.Unlock()
}

// SetCredential rotates the server's credential: the file and what the
// issuer accepts change together, as when the kubelet rotates a token.
func (i *Issuer) SetCredential(cred string) {
	i.mu.Lock()
	i.cred = cred
	i.mu.Unlock()
	WriteFileAtomic(i.t, i.TokenFile, []byte(cred+"\n"))
}

// Fetches is how many requests reached path.
func (i *Issuer) Fetches(path string) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.fetches[path]
}

// Claims are a ServiceAccount token's claims as the apiserver writes them.
type Claims struct {
	jwt.Claims
	Kubernetes *KubeClaim `json:"kubernetes.io,omitempty"`
}

// KubeClaim is the apiserver's private "kubernetes.io" claim.
type KubeClaim struct {
	Namespace      string   `json:"namespace"`
	ServiceAccount NameUID  `json:"serviceaccount"`
	Pod            *NameUID `json:"pod,omitempty"`
}

// NameUID names an object.
type NameUID struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// TokenClaims are the claims of a token for namespace/name with audience
// aud, issued now and valid for ttl.
func (i *Issuer) TokenClaims(namespace, name string, aud []string, now time.Time, ttl time.Duration) Claims {
	return Claims{
		Claims: jwt.Claims{Issuer: i.Issuer, Subject: "system:serviceaccount:" + namespace + ":" + name,
			Audience: aud, IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now),
			Expiry: jwt.NewNumericDate(now.Add(ttl)), ID: uuid.NewString()},
		Kubernetes: &KubeClaim{Namespace: namespace, ServiceAccount: NameUID{Name: name, UID: "uid-" + name}},
	}
}

// Token is a token for namespace/name, audience "sluice", valid for ttl
// from now, signed with kid "k1".
func (i *Issuer) Token(namespace, name string, ttl time.Duration) string {
	return i.Sign("k1", i.TokenClaims(namespace, name, []string{"sluice"}, time.Now(), ttl))
}

// Sign signs claims (any JSON object) with the key kid, naming kid in the
// header.
func (i *Issuer) Sign(kid string, claims any) string {
	i.t.Helper()
	i.mu.Lock()
	k := i.keys[kid]
	i.mu.Unlock()
	if k == nil {
		i.t.Fatalf("issuer: no key %q", kid)
	}
	return SignJWT(i.t, k, jose.SignatureAlgorithm(algOf(k)), kid, claims)
}

// Fataler is what SignJWT needs of a test: testing.TB, or rapid's T.
type Fataler interface {
	Helper()
	Fatal(args ...any)
}

// SignJWT signs claims with key and alg (HS256 takes a []byte key).
func SignJWT(t Fataler, key any, alg jose.SignatureAlgorithm, kid string, claims any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
