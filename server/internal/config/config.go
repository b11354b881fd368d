// Package config holds sluice-server's options: their defaults, how they are
// layered (flag > SLUICE_* environment > YAML file > default) and Validate.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
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
	// MetricsListen, when set, serves /metrics on a listener of its own at
	// this host:port and not on Listen, so a NetworkPolicy can admit the
	// scraper to metrics without opening them to every client. Empty: on
	// Listen, next to the API.
	MetricsListen string
	// PprofAddr serves Go's net/http/pprof on this loopback address (for
	// make bench-profile); empty, the default, serves nothing. It is its
	// own listener so profiles never share the API's port or its auth.
	PprofAddr string

	// Tokens binds static bearer tokens to projects. Empty: no authentication
	// (Zaqar's noauth mode: X-Project-ID names the project).
	Tokens map[string]string
	// AdminToken grants the admin role (health, pools, flavors) and may act
	// for any project named in X-Project-ID.
	AdminToken string
	// TrustRolesHeader accepts `X-Roles: admin` as the admin role, as Zaqar
	// does in noauth mode. It is only honoured while Tokens is empty.
	TrustRolesHeader bool
	// SignedURLSecret is the key of pre-signed URLs (Zaqar's [signed_url]
	// secret_key); SignedURLSecretFile names a file holding it instead (a
	// mounted Secret). Neither: /share answers 400, as Zaqar unconfigured.
	SignedURLSecret     string
	SignedURLSecretFile string
	// EncryptionKeyFile names the file of keys that encrypt message bodies
	// of queues with _enable_encrypt_messages (EncryptionKeys reads it).
	// Empty: no key, and such queues cannot be made.
	EncryptionKeyFile string
	// Auth is none, tokens, keystone or kubernetes; empty picks tokens when
	// Tokens is set (see AuthMode). Keystone and Kubernetes configure their
	// modes.
	Auth       string
	Keystone   KeystoneOptions
	Kubernetes KubernetesOptions
	// AccessFile is the JSON file of access grants to other projects'
	// queues (kubernetes mode; auth.Grants reads it). Empty: no grants.
	AccessFile string
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
	// RetryAfter is the Retry-After sent with 503 and 507 answers.
	RetryAfter time.Duration
	// StartTimeout bounds how long start-up keeps retrying the store and the
	// catalog: in Kubernetes they often come up after the server does.
	StartTimeout time.Duration

	// DrainDelay is how long health answers 503 after SIGTERM before the
	// listener may close (once connections stop coming), so load balancers
	// stop sending traffic first.
	DrainDelay time.Duration
	// ShutdownTimeout bounds the wait for in-flight requests after that.
	ShutdownTimeout time.Duration
	// ReadHeaderTimeout, ReadTimeout and IdleTimeout protect the listener
	// from slow clients: the time to send the headers, the whole request
	// (headers and body; a body shorter than its Content-Length gets 408
	// once it passes), and how long a keep-alive connection may sit idle.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	// MaxHeaderBytes caps the request line and headers; larger get 431.
	MaxHeaderBytes int
	// LeanHTTP serves plain keep-alive requests on the server's own
	// HTTP/1.1 loop and hands a connection to net/http at its first other
	// request (api/lean.go). Off: net/http serves every connection.
	LeanHTTP bool

	// SMTPURL is the relay for mailto subscribers:
	// smtp://host:port[?from=address]. Empty: mailto deliveries wait.
	SMTPURL string
	// RequireConfirmation: new subscriptions receive a confirmation request
	// and no message until confirmed (Zaqar's require_confirmation).
	RequireConfirmation bool
	// Deliveries enables the notification delivery engine on this replica.
	Deliveries bool
	// DeliveryTimeout bounds one webhook or mail send.
	DeliveryTimeout time.Duration
	// DeliveryConcurrency caps sends in flight on this replica.
	DeliveryConcurrency int
	// DeliveryPerSubscriber caps sends in flight to one subscriber.
	DeliveryPerSubscriber int
	// DeliveryPoll is how often the engine looks for due deliveries while
	// some are left waiting (it was at capacity); posts on this replica
	// wake it at once, and a retry or a lease falling due wakes it then.
	DeliveryPoll time.Duration
	// DeliveryIdlePoll is the longest the engine sleeps otherwise (never
	// less than DeliveryPoll): how soon it takes over deliveries that
	// another replica recorded and died before sending.
	DeliveryIdlePoll time.Duration
	// DeliveryRetryMin and DeliveryRetryMax bound the exponential backoff
	// between attempts of one delivery.
	DeliveryRetryMin time.Duration
	DeliveryRetryMax time.Duration

	// MigrateBatch is the most messages one batch of a queue move carries
	// (POST /v2/queues/{q}/migrate, with --catalog).
	MigrateBatch int
	// MigrateRate caps the messages per second one move carries, so a
	// move leaves room for the clients' own load on both pools; 0: no cap.
	// The defaults (batch 10, 8,000/s) keep the clients' p99 within 2x of
	// the same load without a move; batch 100 uncapped moves about 3.5x
	// faster at 6x the p99 (docs/benchmarks.md, make bench-migrate).
	MigrateRate int
	// MigrateLease is how long a replica holds a move without renewing
	// it: after a crash, another replica resumes the move this long later.
	MigrateLease time.Duration
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
		Kubernetes:          kubernetesDefaults(),
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
		ReadTimeout:         60 * time.Second,
		IdleTimeout:         120 * time.Second,
		MaxHeaderBytes:      64 << 10,
		LeanHTTP:            true,

		Deliveries:            true,
		DeliveryTimeout:       5 * time.Second,
		DeliveryConcurrency:   64,
		DeliveryPerSubscriber: 4,
		DeliveryPoll:          250 * time.Millisecond,
		DeliveryIdlePoll:      2 * time.Second,
		DeliveryRetryMin:      250 * time.Millisecond,
		DeliveryRetryMax:      time.Minute,
		MigrateBatch:          10,
		MigrateRate:           8000,
		MigrateLease:          10 * time.Second,
	}
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		bad("listen: %q is not host:port: %v", o.Listen, err)
	}
	errs = append(errs, o.validateMetricsListen()...)
	if o.PprofAddr != "" && !loopbackAddr(o.PprofAddr) {
		bad("pprof-addr: %q must be a loopback host:port (127.0.0.1:6060, [::1]:6060, localhost:6060)", o.PprofAddr)
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
	if _, err := o.SignedURLKey(); err != nil {
		bad("%v", err)
	}
	if _, err := o.EncryptionKeys(); err != nil {
		bad("%v", err)
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
		"read-timeout":        o.ReadTimeout,
		"idle-timeout":        o.IdleTimeout,
	} {
		if d <= 0 {
			bad("%s: %v must be positive", name, d)
		}
	}
	if o.ReadTimeout < o.ReadHeaderTimeout {
		bad("read-timeout: %v must be at least read-header-timeout (%v)", o.ReadTimeout, o.ReadHeaderTimeout)
	}
	if o.MaxHeaderBytes < 4096 || o.MaxHeaderBytes > 1<<20 {
		bad("max-header-bytes: %d must be in 4096..1048576", o.MaxHeaderBytes)
	}
	if o.SMTPURL != "" {
		if u, err := url.Parse(o.SMTPURL); err != nil || u.Scheme != "smtp" || u.Host == "" {
			bad("smtp-url: %q is not smtp://host:port[?from=address]", RedactURI(o.SMTPURL))
		}
	}
	if o.DeliveryConcurrency < 1 || o.DeliveryPerSubscriber < 1 || o.DeliveryPerSubscriber > o.DeliveryConcurrency {
		bad("delivery-concurrency (%d) and delivery-per-subscriber (%d) must be at least 1, per subscriber at most the total",
			o.DeliveryConcurrency, o.DeliveryPerSubscriber)
	}
	if o.DeliveryRetryMin <= 0 || o.DeliveryRetryMax < o.DeliveryRetryMin {
		bad("delivery-retry-min (%v) must be positive and at most delivery-retry-max (%v)", o.DeliveryRetryMin, o.DeliveryRetryMax)
	}
	for name, d := range map[string]time.Duration{"delivery-timeout": o.DeliveryTimeout, "delivery-poll": o.DeliveryPoll,
		"delivery-idle-poll": o.DeliveryIdlePoll} {
		if d <= 0 {
			bad("%s: %v must be positive", name, d)
		}
	}
	if o.MigrateBatch < 1 || o.MigrateBatch > 10000 || o.MigrateRate < 0 || o.MigrateLease < time.Second {
		bad("migrate-batch (%d) must be 1 to 10000, migrate-rate (%d) at least 0, migrate-lease (%v) at least 1s",
			o.MigrateBatch, o.MigrateRate, o.MigrateLease)
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errors.Join(errs...)
}

// SignedURLKey is the secret of pre-signed URLs, read from
// SignedURLSecretFile when that is set (one trailing newline dropped, as
// files written by editors and `kubectl create secret --from-file` end
// with one). nil: pre-signed URLs are off.
func (o *Options) SignedURLKey() ([]byte, error) {
	if o.SignedURLSecretFile == "" {
		if o.SignedURLSecret == "" {
			return nil, nil
		}
		return []byte(o.SignedURLSecret), nil
	}
	if o.SignedURLSecret != "" {
		return nil, errors.New("signed-url-secret and signed-url-secret-file: set one, not both")
	}
	b, err := os.ReadFile(o.SignedURLSecretFile)
	if err != nil {
		return nil, fmt.Errorf("signed-url-secret-file: %w", err)
	}
	b = []byte(strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"))
	if len(b) == 0 {
		return nil, fmt.Errorf("signed-url-secret-file: %s is empty", o.SignedURLSecretFile)
	}
	return b, nil
}

// validateMetricsListen checks --metrics-listen: host:port, with metrics
// on, and not the API's own address.
func (o *Options) validateMetricsListen() []error {
	if o.MetricsListen == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(o.MetricsListen)
	if err != nil {
		return []error{fmt.Errorf("metrics-listen: %q is not host:port: %v", o.MetricsListen, err)}
	}
	if !o.Metrics {
		return []error{errors.New("metrics-listen: set while metrics is false; drop one of them")}
	}
	// Port 0 binds a free port each: never a clash.
	if lhost, lport, err := net.SplitHostPort(o.Listen); err == nil && port == lport && port != "0" &&
		(host == lhost || wildcardHost(host) || wildcardHost(lhost)) {
		return []error{fmt.Errorf("metrics-listen: %q overlaps listen %q; give metrics a port of their own", o.MetricsListen, o.Listen)}
	}
	return nil
}

// wildcardHost reports whether a listen host binds every address.
func wildcardHost(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }

// loopbackAddr reports whether addr is host:port with a loopback host:
// profiles expose internals and cost CPU, so they are never served on a
// routable address.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
