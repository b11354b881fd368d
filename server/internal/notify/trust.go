package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"sluice.dev/server/internal/storage"
)

// Trusts hands out Keystone tokens for trust+ subscribers (*auth.Trusts in
// keystone mode).
type Trusts interface {
	// Token returns a token scoped to the trust, acting as its trustor on
	// project.
	Token(ctx context.Context, trustID string) (token, project string, err error)
	// Refused tells that a receiver refused token (401).
	Refused(trustID, token string)
}

// TrustOption is the subscription option that holds a trust+
// subscription's Keystone trust id, where Zaqar keeps it. The server sets
// it; clients cannot.
const TrustOption = "trust_id"

// IsTrust reports whether a subscriber is posted to with a trust's token.
func IsTrust(subscriber string) bool {
	return len(subscriber) > 6 && strings.EqualFold(subscriber[:6], "trust+")
}

// reserved are the headers "post_headers" cannot set: hop-by-hop headers
// (RFC 9110 section 7.6.1, and the proxy ones), the framing the client
// computes, and sluice's own, on which receivers rely.
var reserved = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Proxy-Authenticate": true, "Proxy-Authorization": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "Host": true,
	HeaderDelivery: true, HeaderSignature: true,
}

// ReservedHeader reports whether the "post_headers" option may not set
// the header name: one of the reserved above, or X-Auth-Token for a trust+
// subscriber, whose token is the trust's.
func ReservedHeader(name string, trust bool) bool {
	k := http.CanonicalHeaderKey(name)
	return reserved[k] || trust && k == "X-Auth-Token"
}

// Why a trust+ delivery could not get its token; the text is the
// delivery's last error.
var (
	errNoTrusts     = errors.New("trust+ subscriber not notified: Keystone trusts need --auth keystone")
	errNoTrust      = errors.New("trust+ subscriber not notified: the subscription has no Keystone trust (an update of it creates one)")
	errTrustProject = errors.New("trust+ subscriber not notified: the subscription's trust is for another project")
)

// trustToken is the token a trust+ subscriber of q is posted with, and its
// trust; a subscriber that is not trust+ gets none. A trust of another
// project than q's is never used, however its id came to be stored.
func (w *webhook) trustToken(ctx context.Context, q storage.QueueRef, sub storage.Subscription) (token, trustID string, err error) {
	if !IsTrust(sub.Subscriber) {
		return "", "", nil
	}
	if w.trusts == nil {
		return "", "", errNoTrusts
	}
	trustID, _ = sub.Options[TrustOption].(string)
	if trustID == "" {
		return "", "", errNoTrust
	}
	token, project, err := w.trusts.Token(ctx, trustID)
	if err != nil {
		return "", "", fmt.Errorf("no token for the subscription's trust: %w", err)
	}
	want := q.Project
	if p, ok := storage.IsTopic(q); ok {
		want = p
	}
	if project != want {
		return "", "", errTrustProject
	}
	return token, trustID, nil
}
