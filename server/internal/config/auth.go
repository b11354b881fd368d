package config

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// Authentication modes (--auth).
const (
	// AuthNone is Zaqar's noauth: X-Project-ID names the project.
	AuthNone = "none"
	// AuthTokens binds static bearer tokens to projects (--auth-tokens).
	AuthTokens = "tokens"
	// AuthKeystone validates X-Auth-Token against Keystone v3.
	AuthKeystone = "keystone"
	// AuthKubernetes validates Kubernetes ServiceAccount tokens against the
	// cluster issuer's published keys; the token's namespace is the project.
	AuthKubernetes = "kubernetes"
)

// KubernetesOptions say how sluice-server reads its cluster's
// service-account issuer keys and what a client's token must be for.
type KubernetesOptions struct {
	// API is the apiserver's URL; empty: the in-cluster address from
	// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
	API string
	// TokenFile is the server's own ServiceAccount token (read again at
	// every key fetch; the kubelet rotates it). Empty: fetch anonymously.
	TokenFile string
	// CAFile is the PEM bundle of the apiserver's CA.
	CAFile string
	// Audience must be among a client token's audiences.
	Audience string
}

func kubernetesDefaults() KubernetesOptions {
	return KubernetesOptions{
		TokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
		CAFile:    "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
		Audience:  "sluice",
	}
}

// KubernetesAPI is the apiserver's URL: --kubernetes-api, else
// https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (what the
// kubelet sets in every pod); "" outside a pod when unset.
func (o *Options) KubernetesAPI() string {
	if o.Kubernetes.API != "" {
		return strings.TrimRight(o.Kubernetes.API, "/")
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" {
		return ""
	}
	if port == "" {
		port = "443"
	}
	return "https://" + net.JoinHostPort(host, port)
}

// KeystoneOptions say where Keystone is and how sluice-server authenticates
// itself to validate its clients' tokens, as keystonemiddleware's
// [keystone_authtoken] section does.
type KeystoneOptions struct {
	// URL is Keystone's public endpoint, with or without the /v3 suffix.
	URL string
	// Username, Password, Project and the domains are the service user's
	// password credentials; the user needs the "service" role (or reader
	// with system scope) to validate other users' tokens.
	Username      string
	Password      string
	PasswordFile  string
	Project       string
	UserDomain    string
	ProjectDomain string
	// CAFile is a PEM bundle to trust for an https Keystone; empty: the
	// system roots.
	CAFile string
	// CacheSize bounds how many validated tokens are remembered.
	CacheSize int
	// Revalidate is how old a cached validation may get before the token is
	// checked with Keystone again: a revoked token stops working within it.
	Revalidate time.Duration
	// Timeout bounds one call to Keystone.
	Timeout time.Duration
}

func keystoneDefaults() KeystoneOptions {
	return KeystoneOptions{
		UserDomain:    "Default",
		ProjectDomain: "Default",
		CacheSize:     10000,
		Revalidate:    5 * time.Minute,
		Timeout:       5 * time.Second,
	}
}

// AuthMode is the effective --auth: when unset, static tokens if any were
// given, otherwise none.
func (o *Options) AuthMode() string {
	if o.Auth != "" {
		return o.Auth
	}
	if len(o.Tokens) > 0 {
		return AuthTokens
	}
	return AuthNone
}

// KeystonePassword is the service password: --keystone-password, or the
// content of --keystone-password-file (a Secret mount) without its final
// newline.
func (o *Options) KeystonePassword() (string, error) {
	if o.Keystone.PasswordFile == "" {
		return o.Keystone.Password, nil
	}
	b, err := os.ReadFile(o.Keystone.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("keystone-password-file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

func (o *Options) validateAuth() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	k := o.Keystone
	if o.AccessFile != "" && o.AuthMode() != AuthKubernetes {
		bad("access-file: grants name service accounts, so they need --auth %s", AuthKubernetes)
	}
	switch o.AuthMode() {
	case AuthNone:
		if len(o.Tokens) > 0 {
			bad("auth: %q cannot be used with auth-tokens", AuthNone)
		}
	case AuthTokens:
		if len(o.Tokens) == 0 {
			bad("auth: %q needs auth-tokens", AuthTokens)
		}
	case AuthKeystone:
		if len(o.Tokens) > 0 {
			bad("auth: %q cannot be used with auth-tokens", AuthKeystone)
		}
		if u, err := url.Parse(k.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("keystone-url: %q is not an http(s) URL", k.URL)
		}
		if k.Username == "" || k.Project == "" {
			bad("keystone-username and keystone-project: required with --auth keystone")
		}
		if k.Password != "" && k.PasswordFile != "" {
			bad("keystone-password and keystone-password-file: give one, not both")
		}
		if pw, err := o.KeystonePassword(); err != nil {
			bad("%v", err)
		} else if pw == "" {
			bad("keystone-password (or keystone-password-file): required with --auth keystone")
		}
		if k.CAFile != "" {
			if _, err := os.Stat(k.CAFile); err != nil {
				bad("keystone-ca-file: %v", err)
			}
		}
		if k.CacheSize < 1 {
			bad("keystone-cache-size: %d must be at least 1", k.CacheSize)
		}
		if k.Revalidate <= 0 {
			bad("keystone-revalidate: %v must be positive", k.Revalidate)
		}
		if k.Timeout <= 0 {
			bad("keystone-timeout: %v must be positive", k.Timeout)
		}
	case AuthKubernetes:
		errs = append(errs, o.validateKubernetes()...)
	default:
		bad("auth: %q is not one of none, tokens, keystone, kubernetes", o.Auth)
	}
	return errs
}

func (o *Options) validateKubernetes() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	kube := o.Kubernetes
	if len(o.Tokens) > 0 {
		bad("auth: %q cannot be used with auth-tokens", AuthKubernetes)
	}
	if api := o.KubernetesAPI(); api == "" {
		bad("kubernetes-api: required outside a pod (KUBERNETES_SERVICE_HOST is unset)")
	} else if u, err := url.Parse(api); err != nil || u.Scheme != "https" || u.Host == "" {
		bad("kubernetes-api: %q is not an https URL", api)
	}
	if pem, err := os.ReadFile(kube.CAFile); err != nil {
		bad("kubernetes-ca-file: %v", err)
	} else if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		bad("kubernetes-ca-file: %s holds no PEM certificate", kube.CAFile)
	}
	if strings.TrimSpace(kube.Audience) == "" {
		bad("kubernetes-audience: must not be empty")
	}
	return errs
}

func redacted(s string) string {
	if s == "" {
		return ""
	}
	return "<redacted>"
}

// authOptions are the --auth, --keystone-*, --kubernetes-* and
// --access-file settings, appended to the one options table so flags,
// environment and YAML all know them.
func authOptions() []option {
	ks := func(name, usage string, p func(*KeystoneOptions) *string) option {
		return opt(name, usage, func(o *Options, v string) error { *p(&o.Keystone) = v; return nil },
			func(o *Options) string { return *p(&o.Keystone) })
	}
	d := func(name, usage string, p func(*KeystoneOptions) *time.Duration) option {
		s, g := duration(func(o *Options) *time.Duration { return p(&o.Keystone) })
		return opt(name, usage, s, g)
	}
	kube := func(name, usage string, p func(*KubernetesOptions) *string) option {
		return opt(name, usage, func(o *Options, v string) error { *p(&o.Kubernetes) = v; return nil },
			func(o *Options) string { return *p(&o.Kubernetes) })
	}
	access, accessGet := str(func(o *Options) *string { return &o.AccessFile })
	auth, authGet := str(func(o *Options) *string { return &o.Auth })
	size, sizeGet := integer(func(o *Options) *int { return &o.Keystone.CacheSize })
	return []option{
		opt("auth", "none, tokens, keystone or kubernetes (empty: tokens when auth-tokens are given, else none)", auth, authGet),
		ks("keystone-url", "Keystone public endpoint, e.g. https://keystone:5000/v3", func(k *KeystoneOptions) *string { return &k.URL }),
		ks("keystone-username", "service user that validates tokens", func(k *KeystoneOptions) *string { return &k.Username }),
		opt("keystone-password", "service user's password (prefer keystone-password-file)",
			func(o *Options, v string) error { o.Keystone.Password = v; return nil },
			func(o *Options) string { return redacted(o.Keystone.Password) }),
		ks("keystone-password-file", "file holding the service user's password (a Secret mount)", func(k *KeystoneOptions) *string { return &k.PasswordFile }),
		ks("keystone-project", "service user's project", func(k *KeystoneOptions) *string { return &k.Project }),
		ks("keystone-user-domain", "service user's domain name", func(k *KeystoneOptions) *string { return &k.UserDomain }),
		ks("keystone-project-domain", "service project's domain name", func(k *KeystoneOptions) *string { return &k.ProjectDomain }),
		ks("keystone-ca-file", "PEM CA bundle for an https Keystone (empty: system roots)", func(k *KeystoneOptions) *string { return &k.CAFile }),
		opt("keystone-cache-size", "most validated tokens kept in memory", size, sizeGet),
		d("keystone-revalidate", "re-check a cached token with Keystone after this long (revocation delay)", func(k *KeystoneOptions) *time.Duration { return &k.Revalidate }),
		d("keystone-timeout", "bound on one call to Keystone", func(k *KeystoneOptions) *time.Duration { return &k.Timeout }),
		kube("kubernetes-api", "apiserver URL whose service-account issuer keys validate tokens (empty: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)",
			func(k *KubernetesOptions) *string { return &k.API }),
		kube("kubernetes-token-file", "the server's own ServiceAccount token, read again at each key fetch (empty: anonymous)",
			func(k *KubernetesOptions) *string { return &k.TokenFile }),
		kube("kubernetes-ca-file", "PEM CA bundle of the apiserver", func(k *KubernetesOptions) *string { return &k.CAFile }),
		kube("kubernetes-audience", "audience a client's ServiceAccount token must carry", func(k *KubernetesOptions) *string { return &k.Audience }),
		opt("access-file", "JSON access grants: service accounts allowed on one queue of another project; re-read when it changes", access, accessGet),
	}
}

func init() { options = append(options, authOptions()...) }
