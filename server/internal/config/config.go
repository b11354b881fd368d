// Package config holds sluice-server's options: their defaults, how they are
// layered (flag > SLUICE_* environment > YAML file > default) and Validate.
package config

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"
)

// Options is everything sluice-server can be told. The zero value is not
// usable; start from Defaults.
type Options struct {
	// Listen is the address the HTTP server binds ("127.0.0.1:8888", ":8888").
	Listen string
	// Store is the storage URI: "memory", "redis://host:6379/0", ...
	Store string
	// Catalog is the management store of pools and flavors (redis:// or
	// mongodb://). Empty: no pooling, every queue lives on Store.
	Catalog string
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// AccessLog writes one JSON line per request.
	AccessLog bool
	// Metrics serves Prometheus metrics on /metrics.
	Metrics bool

	// Tokens binds static bearer tokens to projects. Empty: no authentication
	// (Zaqar's noauth mode: X-Project-ID names the project).
	Tokens map[string]string
	// AdminToken grants the admin role (health, pools, flavors) and may act
	// for any project named in X-Project-ID.
	AdminToken string
	// TrustRolesHeader accepts `X-Roles: admin` as the admin role, as Zaqar
	// does in noauth mode. It is only honoured while Tokens is empty.
	TrustRolesHeader bool
	// Auth is none, tokens or keystone; empty picks tokens when Tokens is
	// set (see AuthMode). Keystone configures the keystone mode.
	Auth     string
	Keystone KeystoneOptions
	// TLS serves HTTPS from certificate and key files.
	TLS TLSOptions

	// MaxBodyBytes caps every request body; larger bodies get 413.
	MaxBodyBytes int64
	// MaxMessagesPostSize is the largest message batch a queue may accept
	// (Zaqar's max_messages_post_size); queues may lower it in metadata.
	MaxMessagesPostSize int
	// MaxMessageTTL and the others are Zaqar's [transport] limits.
	MaxMessageTTL       time.Duration
	MaxClaimTTL         time.Duration
	MaxClaimGrace       time.Duration
	MaxMessagesPerPage  int
	MaxMessagesPerClaim int
	MaxQueuesPerPage    int
	MaxQueueMetadata    int
	DefaultMessageTTL   time.Duration
	DefaultClaimTTL     time.Duration
	DefaultClaimGrace   time.Duration

	// MetadataCacheTTL is how long queue settings (TTL and size defaults,
	// dead-letter policy) read from metadata are reused before re-reading.
	// Other replicas see a metadata change after at most this long. 0: no cache.
	MetadataCacheTTL time.Duration
	// StorageTimeout bounds each request's storage calls; past it the request
	// gets 503.
	StorageTimeout time.Duration
	// RetryAfter is the Retry-After sent with 503 answers.
	RetryAfter time.Duration
	// StartTimeout bounds how long start-up keeps retrying the store and the
	// catalog: in Kubernetes they often come up after the server does.
	StartTimeout time.Duration

	// DrainDelay is how long health answers 503 after SIGTERM before the
	// listener closes, so load balancers stop sending traffic first.
	DrainDelay time.Duration
	// ShutdownTimeout bounds the wait for in-flight requests after that.
	ShutdownTimeout time.Duration
	// ReadHeaderTimeout and IdleTimeout protect the listener from slow clients.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
}

// Defaults returns the options sluice-server runs with when told nothing.
func Defaults() Options {
	return Options{
		Listen:              "127.0.0.1:8888",
		Store:               "memory",
		LogLevel:            "info",
		AccessLog:           true,
		Metrics:             true,
		Tokens:              map[string]string{},
		TrustRolesHeader:    true,
		Keystone:            keystoneDefaults(),
		MaxBodyBytes:        1 << 20,
		MaxMessagesPostSize: 262144,
		MaxMessageTTL:       1209600 * time.Second,
		MaxClaimTTL:         43200 * time.Second,
		MaxClaimGrace:       43200 * time.Second,
		MaxMessagesPerPage:  20,
		MaxMessagesPerClaim: 20,
		MaxQueuesPerPage:    20,
		MaxQueueMetadata:    64 * 1024,
		DefaultMessageTTL:   3600 * time.Second,
		DefaultClaimTTL:     300 * time.Second,
		DefaultClaimGrace:   60 * time.Second,
		MetadataCacheTTL:    time.Second,
		StorageTimeout:      5 * time.Second,
		RetryAfter:          2 * time.Second,
		StartTimeout:        2 * time.Minute,
		DrainDelay:          5 * time.Second,
		ShutdownTimeout:     25 * time.Second,
		ReadHeaderTimeout:   10 * time.Second,
		IdleTimeout:         120 * time.Second,
	}
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		bad("listen: %q is not host:port: %v", o.Listen, err)
	}
	if strings.TrimSpace(o.Store) == "" {
		bad("store: must not be empty (memory, redis://host:6379/0, ...)")
	}
	switch o.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log-level: %q is not one of debug, info, warn, error", o.LogLevel)
	}
	for tok, project := range o.Tokens {
		if tok == "" || project == "" {
			bad("auth-tokens: token and project must both be non-empty")
		}
		if len(project) > 256 {
			bad("auth-tokens: project ids are at most 256 characters")
		}
		if tok == o.AdminToken {
			bad("auth-tokens: a project token must differ from the admin token")
		}
	}
	errs = append(errs, o.validateAuth()...)
	errs = append(errs, o.validateTLS()...)
	if o.MaxBodyBytes < 1024 {
		bad("max-body-bytes: %d is below 1024", o.MaxBodyBytes)
	}
	if o.MaxMessagesPostSize < 1 || int64(o.MaxMessagesPostSize) > o.MaxBodyBytes {
		bad("max-messages-post-size: %d must be in 1..max-body-bytes (%d)", o.MaxMessagesPostSize, o.MaxBodyBytes)
	}
	if o.MaxQueueMetadata < 1 || int64(o.MaxQueueMetadata) > o.MaxBodyBytes {
		bad("max-queue-metadata: %d must be in 1..max-body-bytes (%d)", o.MaxQueueMetadata, o.MaxBodyBytes)
	}
	if o.MaxMessageTTL < 60*time.Second {
		bad("max-message-ttl: %v is below the 60s minimum", o.MaxMessageTTL)
	}
	if o.MaxClaimTTL < 60*time.Second {
		bad("max-claim-ttl: %v is below the 60s minimum", o.MaxClaimTTL)
	}
	if o.MaxClaimGrace < 60*time.Second {
		bad("max-claim-grace: %v is below the 60s minimum", o.MaxClaimGrace)
	}
	if o.DefaultMessageTTL < 60*time.Second || o.DefaultMessageTTL > o.MaxMessageTTL {
		bad("default-message-ttl: %v must be in 60s..max-message-ttl", o.DefaultMessageTTL)
	}
	if o.DefaultClaimTTL < 60*time.Second || o.DefaultClaimTTL > o.MaxClaimTTL {
		bad("default-claim-ttl: %v must be in 60s..max-claim-ttl", o.DefaultClaimTTL)
	}
	if o.DefaultClaimGrace < 60*time.Second || o.DefaultClaimGrace > o.MaxClaimGrace {
		bad("default-claim-grace: %v must be in 60s..max-claim-grace", o.DefaultClaimGrace)
	}
	for name, v := range map[string]int{
		"max-messages-per-page":  o.MaxMessagesPerPage,
		"max-messages-per-claim": o.MaxMessagesPerClaim,
		"max-queues-per-page":    o.MaxQueuesPerPage,
	} {
		if v < 1 || v > 1000 {
			bad("%s: %d must be in 1..1000", name, v)
		}
	}
	for name, d := range map[string]time.Duration{
		"metadata-cache-ttl": o.MetadataCacheTTL,
		"drain-delay":        o.DrainDelay,
	} {
		if d < 0 {
			bad("%s: %v must not be negative", name, d)
		}
	}
	for name, d := range map[string]time.Duration{
		"storage-timeout":     o.StorageTimeout,
		"retry-after":         o.RetryAfter,
		"start-timeout":       o.StartTimeout,
		"shutdown-timeout":    o.ShutdownTimeout,
		"read-header-timeout": o.ReadHeaderTimeout,
		"idle-timeout":        o.IdleTimeout,
	} {
		if d <= 0 {
			bad("%s: %v must be positive", name, d)
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errors.Join(errs...)
}
