package auth

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// trustKeystone is the part of *Client that Trusts uses.
type trustKeystone interface {
	ServiceUserID(ctx context.Context) (string, error)
	Trustor(ctx context.Context, userToken string) (Trustor, error)
	CreateTrust(ctx context.Context, userToken string, who Trustor, trustee string, expires time.Time) (string, error)
	DeleteTrust(ctx context.Context, trustID, token string) error
	TrustToken(ctx context.Context, trustID string) (TrustToken, error)
}

// Trusts creates and deletes the trusts of trust+ subscriptions, with the
// service user as trustee, and hands out tokens scoped to them for the
// notifications:
//   - a token is reused until shortly before it expires (a minute, or a
//     quarter of its lifetime when that is shorter), then a new one is
//     issued; concurrent deliveries for one trust make one Keystone call;
//   - a token a receiver refused (Refused) is not handed out again;
//   - at most size tokens are kept; past that, inserting drops the expired
//     ones, or one of the others.
type Trusts struct {
	kc   trustKeystone
	size int
	now  func() time.Time

	mu      sync.Mutex
	trustee string
	tokens  map[string]cachedToken
	flight  singleflight.Group
}

type cachedToken struct {
	TrustToken
	issued time.Time
}

// NewTrusts manages trusts through c, keeping at most size tokens.
func NewTrusts(c *Client, size int) *Trusts {
	return newTrusts(c, size)
}

func newTrusts(kc trustKeystone, size int) *Trusts {
	return &Trusts{kc: kc, size: max(size, 1), now: time.Now, tokens: map[string]cachedToken{}}
}

// Create creates a trust from the bearer of userToken to the service
// user, with the bearer's current roles on the token's project, expiring
// at expires, and returns its id. Errors: those of Client.Trustor, ErrNoUser
// and those of Client.CreateTrust.
func (t *Trusts) Create(ctx context.Context, userToken string, expires time.Time) (string, error) {
	who, err := t.kc.Trustor(ctx, userToken)
	if err != nil {
		return "", err
	}
	trustee, err := t.trusteeID(ctx)
	if err != nil {
		return "", err
	}
	return t.kc.CreateTrust(ctx, userToken, who, trustee, expires)
}

// trusteeID is the service user's id, asked once.
func (t *Trusts) trusteeID(ctx context.Context) (string, error) {
	t.mu.Lock()
	id := t.trustee
	t.mu.Unlock()
	if id != "" {
		return id, nil
	}
	id, err := t.kc.ServiceUserID(ctx)
	if err != nil {
		return "", err
	}
	t.mu.Lock()
	t.trustee = id
	t.mu.Unlock()
	return id, nil
}

// Delete deletes a trust. It authenticates with a token scoped to the
// trust, which acts as the trustor whom Keystone lets delete it, and, when
// Keystone refuses that, with userToken (the caller's, "" for none). A
// trust that can no longer be redeemed has expired or is gone already:
// nothing to delete.
func (t *Trusts) Delete(ctx context.Context, trustID, userToken string) error {
	tok, _, err := t.Token(ctx, trustID)
	t.forget(trustID)
	var refused *RefusedError
	if err != nil {
		if errors.As(err, &refused) {
			return nil
		}
		return err
	}
	err = t.kc.DeleteTrust(ctx, trustID, tok)
	if errors.As(err, &refused) && userToken != "" {
		err = t.kc.DeleteTrust(ctx, trustID, userToken)
	}
	return err
}

// Token returns a token scoped to the trust and the project it acts on,
// from the cache while it is fresh. Errors as Client.TrustToken.
func (t *Trusts) Token(ctx context.Context, trustID string) (token, project string, err error) {
	now := t.now()
	t.mu.Lock()
	e, ok := t.tokens[trustID]
	t.mu.Unlock()
	if ok && fresh(e, now) {
		return e.Token, e.Project, nil
	}
	res, err, _ := t.flight.Do(trustID, func() (any, error) {
		// Detached: other deliveries may wait for the answer; the Keystone
		// client's timeout bounds the call.
		issued := t.now()
		tt, err := t.kc.TrustToken(context.WithoutCancel(ctx), trustID)
		if err != nil {
			return TrustToken{}, err
		}
		t.store(trustID, cachedToken{TrustToken: tt, issued: issued})
		return tt, nil
	})
	tt := res.(TrustToken)
	return tt.Token, tt.Project, err
}

// fresh reports whether a cached token may still be handed out at now.
func fresh(e cachedToken, now time.Time) bool {
	margin := min(time.Minute, e.Expires.Sub(e.issued)/4)
	return now.Add(margin).Before(e.Expires)
}

func (t *Trusts) store(trustID string, e cachedToken) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.tokens[trustID]; !ok && len(t.tokens) >= t.size {
		now := t.now()
		for k, old := range t.tokens {
			if !fresh(old, now) {
				delete(t.tokens, k)
			}
		}
		for k := range t.tokens {
			if len(t.tokens) < t.size {
				break
			}
			delete(t.tokens, k)
		}
	}
	t.tokens[trustID] = e
}

// Refused tells that a receiver refused token (it answered 401): the next
// Token for the trust asks Keystone again.
func (t *Trusts) Refused(trustID, token string) {
	t.mu.Lock()
	if e, ok := t.tokens[trustID]; ok && e.Token == token {
		delete(t.tokens, trustID)
	}
	t.mu.Unlock()
}

func (t *Trusts) forget(trustID string) {
	t.mu.Lock()
	delete(t.tokens, trustID)
	t.mu.Unlock()
}

// Len is how many tokens are kept.
func (t *Trusts) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.tokens)
}
