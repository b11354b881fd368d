// Package auth validates clients' tokens for sluice-server. Keystone v3
// tokens as keystonemiddleware's auth_token does in front of Zaqar: the
// server holds a service token, asks Keystone about each client token it has
// not seen (GET /v3/auth/tokens), and remembers the answer until the token
// expires or the revalidation interval passes, whichever comes first.
// Kubernetes ServiceAccount tokens offline, against the keys the cluster's
// issuer publishes (kubernetes.go); access grants to other projects' queues
// come from a file (access.go).
package auth

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Identity is what a valid token says about its bearer.
type Identity struct {
	// Project is the id of the project the token is scoped to.
	Project string
	// Admin is true when the token carries the "admin" role.
	Admin bool
	// Expires is when Keystone stops honouring the token.
	Expires time.Time
	// ServiceAccount is the token's "namespace/name" in kubernetes mode,
	// empty otherwise.
	ServiceAccount string
}

// ErrInvalid means Keystone does not know the token, or it expired or was
// revoked: the client must get a new one (401).
var ErrInvalid = errors.New("the token is not valid")

// ErrUnscoped means the token is valid but scoped to no project (a domain
// or system token), so there is no project to act for (403).
var ErrUnscoped = errors.New("the token is not scoped to a project")

// UnavailableError means Keystone could not give an answer (unreachable,
// failing, or refusing the service credentials); the request gets 503 and
// never proceeds unauthenticated.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return "identity service unavailable: " + e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// Credentials are the service user's password credentials.
type Credentials struct {
	Username, Password, UserDomain string
	Project, ProjectDomain         string
}

// Client talks to one Keystone: it keeps a service token and validates
// client tokens with it.
type Client struct {
	base  string // ".../v3" without a trailing slash
	creds Credentials
	http  *http.Client

	mu         sync.Mutex
	svcToken   string
	svcExpires time.Time
	now        func() time.Time
}

// NewClient returns a client for the Keystone at url (with or without /v3).
// caFile, when set, is the PEM bundle that signs an https Keystone.
func NewClient(url string, creds Credentials, caFile string, timeout time.Duration) (*Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("keystone CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("keystone CA file %s: no PEM certificate in it", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	base := strings.TrimRight(url, "/")
	if !strings.HasSuffix(base, "/v3") {
		base += "/v3"
	}
	return &Client{base: base, creds: creds, http: &http.Client{Transport: tr, Timeout: timeout}, now: time.Now}, nil
}

// tokenBody is the part of Keystone's token document sluice reads.
type tokenBody struct {
	Token struct {
		ExpiresAt time.Time `json:"expires_at"`
		Project   *struct {
			ID string `json:"id"`
		} `json:"project"`
		Roles []struct {
			Name string `json:"name"`
		} `json:"roles"`
	} `json:"token"`
}

// Validate asks Keystone about a client token. It returns ErrInvalid for a
// token Keystone does not honour, ErrUnscoped for one without a project,
// and an *UnavailableError when Keystone gives no usable answer.
func (c *Client) Validate(ctx context.Context, token string) (Identity, error) {
	for attempt := 0; ; attempt++ {
		svc, err := c.serviceToken(ctx)
		if err != nil {
			return Identity{}, err
		}
		// nocatalog: the catalog is most of the document and sluice needs none of it.
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/auth/tokens?nocatalog", nil)
		if err != nil {
			return Identity{}, &UnavailableError{err}
		}
		req.Header.Set("X-Auth-Token", svc)
		req.Header.Set("X-Subject-Token", token)
		req.Header.Set("Accept", "application/json")
		resp, err := c.http.Do(req)
		if err != nil {
			return Identity{}, &UnavailableError{err}
		}
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK && rerr == nil:
			return identityOf(body)
		case resp.StatusCode == http.StatusNotFound:
			// Keystone's answer for unknown, expired and revoked tokens alike.
			return Identity{}, ErrInvalid
		case resp.StatusCode == http.StatusUnauthorized && attempt == 0:
			// Our own token expired or was revoked: get a new one, once.
			c.dropServiceToken(svc)
			continue
		}
		return Identity{}, &UnavailableError{fmt.Errorf("validating a token: Keystone answered %d", resp.StatusCode)}
	}
}

func identityOf(body []byte) (Identity, error) {
	var tb tokenBody
	if err := json.Unmarshal(body, &tb); err != nil {
		return Identity{}, &UnavailableError{fmt.Errorf("Keystone token document: %w", err)}
	}
	t := tb.Token
	if t.ExpiresAt.IsZero() {
		return Identity{}, &UnavailableError{errors.New("Keystone token document has no expires_at")}
	}
	if t.Project == nil || t.Project.ID == "" {
		return Identity{}, ErrUnscoped
	}
	id := Identity{Project: t.Project.ID, Expires: t.ExpiresAt}
	for _, r := range t.Roles {
		if strings.EqualFold(r.Name, "admin") {
			id.Admin = true
		}
	}
	return id, nil
}

// serviceToken returns the cached service token, fetching a new one when
// there is none or it is within a minute of expiring.
func (c *Client) serviceToken(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.svcToken != "" && c.now().Add(time.Minute).Before(c.svcExpires) {
		return c.svcToken, nil
	}
	tok, exp, err := c.issue(ctx)
	if err != nil {
		return "", err
	}
	c.svcToken, c.svcExpires = tok, exp
	return tok, nil
}

func (c *Client) dropServiceToken(tok string) {
	c.mu.Lock()
	if c.svcToken == tok {
		c.svcToken = ""
	}
	c.mu.Unlock()
}

// named is a Keystone name within its domain.
type named struct {
	Name   string `json:"name"`
	Domain struct {
		Name string `json:"name"`
	} `json:"domain"`
}

// passwordAuth is the body of POST /auth/tokens authenticating the service
// user with its password, for scope (a project's, or a trust's).
func (c *Client) passwordAuth(scope any) []byte {
	var doc struct {
		Auth struct {
			Identity struct {
				Methods  []string `json:"methods"`
				Password struct {
					User struct {
						named
						Password string `json:"password"`
					} `json:"user"`
				} `json:"password"`
			} `json:"identity"`
			Scope any `json:"scope"`
		} `json:"auth"`
	}
	id := &doc.Auth.Identity
	id.Methods = []string{"password"}
	id.Password.User.Name = c.creds.Username
	id.Password.User.Domain.Name = c.creds.UserDomain
	id.Password.User.Password = c.creds.Password
	doc.Auth.Scope = scope
	payload, _ := json.Marshal(&doc)
	return payload
}

// issue gets a project-scoped service token with the password credentials.
func (c *Client) issue(ctx context.Context) (string, time.Time, error) {
	var scope struct {
		Project named `json:"project"`
	}
	scope.Project.Name = c.creds.Project
	scope.Project.Domain.Name = c.creds.ProjectDomain
	payload := c.passwordAuth(scope)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/auth/tokens?nocatalog", bytes.NewReader(payload))
	if err != nil {
		return "", time.Time{}, &UnavailableError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return "", time.Time{}, &UnavailableError{err}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated {
		// Never an open door: bad service credentials leave every unknown
		// token unvalidated (503), and the log says why.
		return "", time.Time{}, &UnavailableError{fmt.Errorf("service user %q could not authenticate: Keystone answered %d", c.creds.Username, resp.StatusCode)}
	}
	var tb tokenBody
	tok := resp.Header.Get("X-Subject-Token")
	if err := json.Unmarshal(body, &tb); err != nil || tok == "" {
		return "", time.Time{}, &UnavailableError{errors.New("Keystone issued a service token without X-Subject-Token or expires_at")}
	}
	return tok, tb.Token.ExpiresAt, nil
}
