package auth

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"pgregory.net/rapid"

	"sluice.dev/server/internal/testutil"
)

// testClock is a settable clock safe to read from the background refresh.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *testClock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *testClock) add(d time.Duration) { c.ns.Add(int64(d)) }
func (c *testClock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }

func newServiceAccounts(t testing.TB, iss *testutil.Issuer, clk *testClock) *ServiceAccounts {
	t.Helper()
	v, err := NewServiceAccounts(KubernetesConfig{API: iss.URL, TokenFile: iss.TokenFile, CAFile: iss.CAFile,
		Audience: "sluice", Timeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v.now = clk.now
	return v
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestServiceAccountTokens(t *testing.T) {
	iss := testutil.StartIssuer(t)
	iss.AddKey("ec", "ES256")
	iss.AddKey("unpublished", "RS256")
	iss.Publish("k1", "ec")
	clk := newTestClock()
	v := newServiceAccounts(t, iss, clk)
	now := clk.now()
	good := func() testutil.Claims { return iss.TokenClaims("shop", "web", []string{"sluice"}, now, 10*time.Minute) }
	edit := func(f func(*testutil.Claims)) testutil.Claims { c := good(); f(&c); return c }
	// The classic confusion: HMAC keyed with the published RSA key's bytes.
	pubDER, err := x509.MarshalPKIXPublicKey(iss.Key("k1").Public())
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	cases := []struct {
		name   string
		token  string
		want   string // "" valid (as shop/web), else a fragment of the reason
		expiry time.Time
	}{
		{"good RS256", iss.Sign("k1", good()), "", now.Add(10 * time.Minute)},
		{"good ES256", iss.Sign("ec", good()), "", now.Add(10 * time.Minute)},
		{"no kid: every key is tried", testutil.SignJWT(t, iss.Key("ec"), jose.ES256, "", good()), "", now.Add(10 * time.Minute)},
		{"several audiences, ours among them", iss.Sign("k1", edit(func(c *testutil.Claims) { c.Audience = []string{"vault", "sluice"} })), "", time.Time{}},
		{"sub only, no kubernetes.io claim", iss.Sign("k1", edit(func(c *testutil.Claims) { c.Kubernetes = nil })), "", time.Time{}},
		{"expired within the leeway", iss.Sign("k1", edit(func(c *testutil.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-10 * time.Second)) })), "", time.Time{}},
		{"expired", iss.Sign("k1", edit(func(c *testutil.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-time.Minute)) })), "expired", time.Time{}},
		{"nbf in the future", iss.Sign("k1", edit(func(c *testutil.Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(5 * time.Minute)) })), "not valid yet", time.Time{}},
		{"iat in the future", iss.Sign("k1", edit(func(c *testutil.Claims) { c.IssuedAt = jwt.NewNumericDate(now.Add(5 * time.Minute)) })), "issued in the future", time.Time{}},
		{"wrong audience", iss.Sign("k1", edit(func(c *testutil.Claims) { c.Audience = []string{"https://kubernetes.default.svc"} })), "audiences", time.Time{}},
		{"no audience", iss.Sign("k1", edit(func(c *testutil.Claims) { c.Audience = nil })), "audiences", time.Time{}},
		{"wrong issuer", iss.Sign("k1", edit(func(c *testutil.Claims) { c.Issuer = "https://evil.example" })), "issuer", time.Time{}},
		{"no exp", iss.Sign("k1", edit(func(c *testutil.Claims) { c.Expiry = nil })), "no exp", time.Time{}},
		{"no sub, no kubernetes.io", iss.Sign("k1", edit(func(c *testutil.Claims) { c.Subject, c.Kubernetes = "", nil })), "no service account", time.Time{}},
		{"sub of a user", iss.Sign("k1", edit(func(c *testutil.Claims) { c.Subject, c.Kubernetes = "alice", nil })), "no service account", time.Time{}},
		{"sub disagrees with kubernetes.io", iss.Sign("k1", edit(func(c *testutil.Claims) { c.Subject = "system:serviceaccount:other:web" })), "disagrees", time.Time{}},
		{"namespace without name", iss.Sign("k1", edit(func(c *testutil.Claims) { c.Subject, c.Kubernetes.ServiceAccount.Name = "", "" })), "no service account", time.Time{}},
		{"signed by an unpublished key under a published kid", testutil.SignJWT(t, iss.Key("unpublished"), jose.RS256, "k1", good()), "signature", time.Time{}},
		{"alg none", b64(`{"alg":"none","typ":"JWT"}`) + "." + b64(`{"iss":"`+iss.Issuer+`","sub":"system:serviceaccount:shop:web","aud":["sluice"],"exp":9999999999}`) + ".", "algorithm", time.Time{}},
		{"HS256 keyed with the public key", testutil.SignJWT(t, pubPEM, jose.HS256, "k1", good()), "algorithm", time.Time{}},
		{"garbage", "not-a-token", "JWS", time.Time{}},
		{"three garbage parts", "a.b.c", "JWS", time.Time{}},
		{"empty", "", "JWS", time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Validate(context.Background(), tc.token)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if id.Project != "shop" || id.ServiceAccount != "shop/web" || id.Admin {
					t.Errorf("identity %+v", id)
				}
				if !tc.expiry.IsZero() && !id.Expires.Equal(tc.expiry.Truncate(time.Second)) {
					t.Errorf("expires %v, want %v", id.Expires, tc.expiry)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v (%+v), want ErrInvalid with %q", err, id, tc.want)
			}
		})
	}
	if n := iss.Fetches("/openid/v1/jwks"); n != 1 {
		t.Errorf("%d key fetches for %d tokens, want 1", n, len(cases))
	}
}

// TestServiceAccountKeyRotation: a token signed by a key the validator has
// not seen makes it fetch the keys again (at most every kidRefetch), so a
// rotation is picked up; an unknown kid is refused without a fetch in
// between.
func TestServiceAccountKeyRotation(t *testing.T) {
	iss := testutil.StartIssuer(t)
	clk := newTestClock()
	v := newServiceAccounts(t, iss, clk)
	ctx := context.Background()
	claims := func() testutil.Claims {
		return iss.TokenClaims("shop", "web", []string{"sluice"}, clk.now(), time.Hour)
	}
	if _, err := v.Validate(ctx, iss.Sign("k1", claims())); err != nil {
		t.Fatal(err)
	}
	iss.AddKey("k2", "ES256")
	// k2 signs before it is published (a misbehaving issuer): refused after
	// one fetch, and a second unknown-kid token within kidRefetch does not
	// fetch again.
	if _, err := v.Validate(ctx, iss.Sign("k2", claims())); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unpublished key: %v", err)
	}
	if _, err := v.Validate(ctx, iss.Sign("k2", claims())); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unpublished key again: %v", err)
	}
	if n := iss.Fetches("/openid/v1/jwks"); n != 2 {
		t.Fatalf("%d key fetches, want 2 (first use, one unknown kid)", n)
	}
	// Rotation: k2 published, k1 withdrawn.
	iss.Publish("k2")
	if _, err := v.Validate(ctx, iss.Sign("k2", claims())); !errors.Is(err, ErrInvalid) {
		t.Fatalf("within kidRefetch of the last fetch: %v", err)
	}
	clk.add(kidRefetch)
	if _, err := v.Validate(ctx, iss.Sign("k2", claims())); err != nil {
		t.Fatalf("after the rotation: %v", err)
	}
	// k1 is no longer published: its tokens stop working with the new keys.
	if _, err := v.Validate(ctx, iss.Sign("k1", claims())); !errors.Is(err, ErrInvalid) {
		t.Fatalf("withdrawn key: %v", err)
	}
	// Periodic refresh: old keys are fetched again behind a request.
	before := iss.Fetches("/openid/v1/jwks")
	clk.add(keysRefresh)
	if _, err := v.Validate(ctx, iss.Sign("k2", claims())); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for iss.Fetches("/openid/v1/jwks") == before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if iss.Fetches("/openid/v1/jwks") == before {
		t.Fatal("stale keys were not refreshed")
	}
}

// TestServiceAccountIssuerUnavailable: without keys there is no answer
// (UnavailableError, never acceptance); once the keys are in memory an
// issuer outage changes nothing for tokens signed by them.
func TestServiceAccountIssuerUnavailable(t *testing.T) {
	iss := testutil.StartIssuer(t)
	clk := newTestClock()
	v := newServiceAccounts(t, iss, clk)
	ctx := context.Background()
	tok := iss.Sign("k1", iss.TokenClaims("shop", "web", []string{"sluice"}, clk.now(), time.Hour))
	iss.SetDown(true)
	var down *UnavailableError
	if _, err := v.Validate(ctx, tok); !errors.As(err, &down) {
		t.Fatalf("issuer down at first use: %v", err)
	}
	// Failed fetches are retried at most every failedRetry.
	n := iss.Fetches("/.well-known/openid-configuration")
	if _, err := v.Validate(ctx, tok); !errors.As(err, &down) || iss.Fetches("/.well-known/openid-configuration") != n {
		t.Fatalf("retried at once: %v, %d fetches", err, iss.Fetches("/.well-known/openid-configuration"))
	}
	iss.SetDown(false)
	clk.add(failedRetry)
	if _, err := v.Validate(ctx, tok); err != nil {
		t.Fatalf("issuer back: %v", err)
	}
	iss.SetDown(true)
	clk.add(keysRefresh + time.Second)
	if _, err := v.Validate(ctx, iss.Sign("k1", iss.TokenClaims("shop", "web", []string{"sluice"}, clk.now(), time.Hour))); err != nil {
		t.Fatalf("issuer down, keys in memory: %v", err)
	}
	// An unknown kid cannot be decided while the issuer is down.
	iss.AddKey("k9", "RS256")
	clk.add(kidRefetch)
	if _, err := v.Validate(ctx, iss.Sign("k9", iss.TokenClaims("shop", "web", []string{"sluice"}, clk.now(), time.Hour))); !errors.As(err, &down) {
		t.Fatalf("unknown kid, issuer down: %v", err)
	}
}

// TestServiceAccountCredential: the server's own token is read again at
// every fetch (the kubelet rotates it), and never sent to a jwks_uri on
// another host: the apiserver's own path is used instead.
func TestServiceAccountCredential(t *testing.T) {
	iss := testutil.StartIssuer(t)
	other := testutil.StartIssuer(t) // a stranger that would see the credential
	clk := newTestClock()
	v := newServiceAccounts(t, iss, clk)
	ctx := context.Background()
	claims := func() testutil.Claims {
		return iss.TokenClaims("shop", "web", []string{"sluice"}, clk.now(), time.Hour)
	}
	iss.SetJWKSURI(other.URL + "/openid/v1/jwks")
	if _, err := v.Validate(ctx, iss.Sign("k1", claims())); err != nil {
		t.Fatal(err)
	}
	if other.Fetches("/openid/v1/jwks") != 0 {
		t.Error("the keys were fetched from the other host")
	}
	iss.SetCredential("server-credential-2")
	iss.AddKey("k2", "RS256")
	iss.Publish("k1", "k2")
	clk.add(kidRefetch)
	if _, err := v.Validate(ctx, iss.Sign("k2", claims())); err != nil {
		t.Fatalf("after the credential rotated: %v", err)
	}
	anon, err := NewServiceAccounts(KubernetesConfig{API: iss.URL, CAFile: iss.CAFile, Audience: "sluice", Timeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var down *UnavailableError
	if _, err := anon.Validate(ctx, iss.Sign("k1", claims())); !errors.As(err, &down) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("anonymous fetch from an issuer that wants a credential: %v", err)
	}
	for _, bad := range []KubernetesConfig{
		{API: "http://" + strings.TrimPrefix(iss.URL, "https://"), CAFile: iss.CAFile},
		{API: iss.URL, CAFile: iss.TokenFile},
		{API: iss.URL, CAFile: iss.CAFile + ".missing"},
	} {
		if _, err := NewServiceAccounts(bad, nil); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestServiceAccountClaimsProperty: over generated combinations of the
// checked claims, a token is accepted exactly when every one holds.
func TestServiceAccountClaimsProperty(t *testing.T) {
	iss := testutil.StartIssuer(t)
	iss.AddKey("ec", "ES256")
	iss.AddKey("stray", "RS256")
	iss.Publish("k1", "ec")
	clk := newTestClock()
	v := newServiceAccounts(t, iss, clk)
	base := clk.now().Truncate(time.Second)
	rapid.Check(t, func(rt *rapid.T) {
		clk.set(base)
		expIn := time.Duration(rapid.IntRange(-120, 3600).Draw(rt, "exp_s")) * time.Second
		nbfIn := time.Duration(rapid.IntRange(-3600, 120).Draw(rt, "nbf_s")) * time.Second
		auds := rapid.SliceOfN(rapid.SampledFrom([]string{"sluice", "api", "vault", "Sluice"}), 0, 3).Draw(rt, "aud")
		issuer := rapid.SampledFrom([]string{iss.Issuer, iss.Issuer + "/", "https://other"}).Draw(rt, "iss")
		kid := rapid.SampledFrom([]string{"k1", "ec", "stray", ""}).Draw(rt, "kid")
		withSub := rapid.Bool().Draw(rt, "sub")
		withClaim := rapid.Bool().Draw(rt, "kubernetes.io")

		c := iss.TokenClaims("ns", "sa", auds, base, expIn)
		c.Issuer = issuer
		c.NotBefore = jwt.NewNumericDate(base.Add(nbfIn))
		c.IssuedAt = nil
		if !withSub {
			c.Subject = ""
		}
		if !withClaim {
			c.Kubernetes = nil
		}
		var tok string
		switch kid {
		case "":
			tok = testutil.SignJWT(rt, iss.Key("k1"), jose.RS256, "", c) // no kid: k1 verifies it
		case "stray":
			tok = testutil.SignJWT(rt, iss.Key("stray"), jose.RS256, "k1", c) // forged under k1's kid
		default:
			tok = iss.Sign(kid, c)
		}
		hasAud := false
		for _, a := range auds {
			hasAud = hasAud || a == "sluice"
		}
		want := expIn >= -clockLeeway && nbfIn <= clockLeeway && hasAud && issuer == iss.Issuer &&
			kid != "stray" && (withSub || withClaim)
		id, err := v.Validate(context.Background(), tok)
		if want != (err == nil) {
			rt.Fatalf("accepted=%v, want %v: %v", err == nil, want, err)
		}
		if err == nil && (id.Project != "ns" || id.ServiceAccount != "ns/sa") {
			rt.Fatalf("identity %+v", id)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			rt.Fatalf("not ErrInvalid: %v", err)
		}
	})
}

// BenchmarkServiceAccountFirstSight: the offline check of a token never
// seen before (parse, signature, claims), with the keys in memory: what a
// new token costs the server, against the stand-in issuer's RS256 and
// ES256 keys (the real apiserver's: BenchmarkRealAPIServerFirstSight).
func BenchmarkServiceAccountFirstSight(b *testing.B) {
	iss := testutil.StartIssuer(b)
	iss.AddKey("ec", "ES256")
	iss.Publish("k1", "ec")
	v := newServiceAccounts(b, iss, newTestClock())
	for _, kid := range []string{"k1", "ec"} {
		b.Run(map[string]string{"k1": "RS256", "ec": "ES256"}[kid], func(b *testing.B) {
			tok := iss.Sign(kid, iss.TokenClaims("shop", "web", []string{"sluice"}, time.Now(), time.Hour))
			if _, err := v.Validate(context.Background(), tok); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := v.Validate(context.Background(), tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
