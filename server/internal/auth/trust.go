package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"
)

// Keystone trusts, as Zaqar uses them for trust+ subscribers: the user who
// subscribes (the trustor) delegates their roles on the project to the
// service user (the trustee), and the service user later redeems the trust
// for a token that acts as the trustor, with which it posts notifications.

// RefusedError means Keystone refused a trust operation for a reason on
// the user's or the trust's side (a token that may not delegate, a missing
// role, a trust that was deleted or expired): Status is Keystone's answer
// and Message its explanation, meant for the user.
type RefusedError struct {
	Status  int
	Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("Keystone refused (%d): %s", e.Status, e.Message)
}

// keystoneTime is the form Keystone gives and takes expiry times in.
const keystoneTime = "2006-01-02T15:04:05.000000Z"

// Trustor is the bearer of a user token as a trust delegates from them:
// their user, the token's project and their roles on it (implied roles
// included, as Keystone lists them in the token).
type Trustor struct {
	UserID, Project string
	RoleIDs         []string
}

// Trustor asks Keystone about userToken, with the service token as
// Validate does. Errors: ErrInvalid, ErrUnscoped, *UnavailableError.
func (c *Client) Trustor(ctx context.Context, userToken string) (Trustor, error) {
	for attempt := 0; ; attempt++ {
		svc, err := c.serviceToken(ctx)
		if err != nil {
			return Trustor{}, err
		}
		status, body, _, err := c.call(ctx, http.MethodGet, "/auth/tokens?nocatalog", svc, nil, userToken)
		if err != nil {
			return Trustor{}, err
		}
		switch {
		case status == http.StatusOK:
			return trustorOf(body)
		case status == http.StatusNotFound:
			return Trustor{}, ErrInvalid
		case status == http.StatusUnauthorized && attempt == 0:
			c.dropServiceToken(svc)
			continue
		}
		return Trustor{}, &UnavailableError{fmt.Errorf("validating a token: Keystone answered %d", status)}
	}
}

func trustorOf(body []byte) (Trustor, error) {
	var doc struct {
		Token struct {
			User *struct {
				ID string `json:"id"`
			} `json:"user"`
			Project *struct {
				ID string `json:"id"`
			} `json:"project"`
			Roles []struct {
				ID string `json:"id"`
			} `json:"roles"`
		} `json:"token"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return Trustor{}, &UnavailableError{fmt.Errorf("Keystone token document: %w", err)}
	}
	t := doc.Token
	if t.User == nil || t.User.ID == "" {
		return Trustor{}, ErrNoUser
	}
	if t.Project == nil || t.Project.ID == "" {
		return Trustor{}, ErrUnscoped
	}
	who := Trustor{UserID: t.User.ID, Project: t.Project.ID}
	for _, r := range t.Roles {
		who.RoleIDs = append(who.RoleIDs, r.ID)
	}
	return who, nil
}

// ErrNoUser means a token names no Keystone user to delegate from.
var ErrNoUser = errors.New("the token names no user")

// ServiceUserID is the id of the service user, the trustee of every trust
// sluice creates: Keystone lets a token's bearer look at it.
func (c *Client) ServiceUserID(ctx context.Context) (string, error) {
	svc, err := c.serviceToken(ctx)
	if err != nil {
		return "", err
	}
	who, err := c.Trustor(ctx, svc)
	if err != nil {
		var down *UnavailableError
		if errors.As(err, &down) {
			return "", err
		}
		return "", &UnavailableError{fmt.Errorf("the service token: %w", err)}
	}
	return who.UserID, nil
}

// CreateTrust creates, with userToken (whose bearer who describes), a
// trust from who to trustee on who.Project with who's roles, impersonating
// the trustor and expiring at expires; it returns the trust's id. The
// errors: ErrInvalid when Keystone no longer honours userToken, a
// *RefusedError when it refuses the trust, else an *UnavailableError.
func (c *Client) CreateTrust(ctx context.Context, userToken string, who Trustor, trustee string, expires time.Time) (string, error) {
	type role struct {
		ID string `json:"id"`
	}
	var doc struct {
		Trust struct {
			Trustor       string `json:"trustor_user_id"`
			Trustee       string `json:"trustee_user_id"`
			Project       string `json:"project_id"`
			Impersonation bool   `json:"impersonation"`
			Roles         []role `json:"roles"`
			ExpiresAt     string `json:"expires_at"`
		} `json:"trust"`
	}
	t := &doc.Trust
	t.Trustor, t.Trustee, t.Project, t.Impersonation = who.UserID, trustee, who.Project, true
	t.ExpiresAt = expires.UTC().Format(keystoneTime)
	for _, id := range who.RoleIDs {
		t.Roles = append(t.Roles, role{id})
	}
	payload, _ := json.Marshal(&doc)
	status, body, _, err := c.call(ctx, http.MethodPost, "/OS-TRUST/trusts", userToken, payload, "")
	if err != nil {
		return "", err
	}
	switch {
	case status == http.StatusCreated:
		var created struct {
			Trust struct {
				ID string `json:"id"`
			} `json:"trust"`
		}
		if json.Unmarshal(body, &created) != nil || created.Trust.ID == "" {
			return "", &UnavailableError{errors.New("Keystone created a trust without an id")}
		}
		return created.Trust.ID, nil
	case status == http.StatusUnauthorized:
		return "", ErrInvalid
	}
	return "", refusal("creating a trust", status, body)
}

// DeleteTrust deletes a trust with token, which must be the trustor's (a
// token scoped to the trust acts as the trustor). A trust already gone is
// not an error.
func (c *Client) DeleteTrust(ctx context.Context, trustID, token string) error {
	status, body, _, err := c.call(ctx, http.MethodDelete, "/OS-TRUST/trusts/"+trustID, token, nil, "")
	if err != nil {
		return err
	}
	if status == http.StatusNoContent || status == http.StatusNotFound {
		return nil
	}
	return refusal("deleting a trust", status, body)
}

// TrustToken redeems a trust: the service user authenticates with its
// password and a scope of the trust, and Keystone issues a token acting
// as the trustor on the trust's project. A trust that is gone, expired, or
// whose trustor lost the roles answers a *RefusedError.
func (c *Client) TrustToken(ctx context.Context, trustID string) (TrustToken, error) {
	var scope struct {
		Trust struct {
			ID string `json:"id"`
		} `json:"OS-TRUST:trust"`
	}
	scope.Trust.ID = trustID
	payload := c.passwordAuth(scope)
	status, body, hdr, err := c.call(ctx, http.MethodPost, "/auth/tokens?nocatalog", "", payload, "")
	if err != nil {
		return TrustToken{}, err
	}
	if status != http.StatusCreated {
		return TrustToken{}, refusal("redeeming a trust", status, body)
	}
	var tb tokenBody
	t := TrustToken{Token: hdr.Get("X-Subject-Token")}
	if json.Unmarshal(body, &tb) != nil || t.Token == "" || tb.Token.ExpiresAt.IsZero() || tb.Token.Project == nil {
		return TrustToken{}, &UnavailableError{errors.New("Keystone issued a trust token without X-Subject-Token, expires_at or project")}
	}
	t.Project, t.Expires = tb.Token.Project.ID, tb.Token.ExpiresAt
	return t, nil
}

// TrustToken is a token scoped to a trust: it acts on Project until
// Expires.
type TrustToken struct {
	Token, Project string
	Expires        time.Time
}

// call makes one request to Keystone; token, when set, authenticates it,
// and subject, when set, is the token it asks about.
func (c *Client) call(ctx context.Context, method, path, token string, payload []byte, subject string) (int, []byte, http.Header, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, nil, &UnavailableError{err}
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	if subject != "" {
		req.Header.Set("X-Subject-Token", subject)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, &UnavailableError{err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, nil, &UnavailableError{err}
	}
	return resp.StatusCode, body, resp.Header, nil
}

// refusal words a Keystone answer that is not a success: a 4xx is the
// user's or the trust's (RefusedError, with Keystone's message), anything
// else Keystone's own trouble.
func refusal(what string, status int, body []byte) error {
	if status < 400 || status > 499 {
		return &UnavailableError{fmt.Errorf("%s: Keystone answered %d", what, status)}
	}
	var doc struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := http.StatusText(status)
	if json.Unmarshal(body, &doc) == nil && doc.Error.Message != "" {
		msg = doc.Error.Message
	}
	if len(msg) > 300 {
		cut := 300
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	return &RefusedError{Status: status, Message: msg}
}
