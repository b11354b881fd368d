package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// option is one setting as every layer sees it: a name (the flag, the YAML
// key, and SLUICE_<NAME> in the environment) and a setter from text.
type option struct {
	name  string
	usage string
	// flag: a boolean option, which may be given bare (--metrics means
	// --metrics=true)
	flag bool
	set  func(o *Options, v string) error
	get  func(o *Options) string
}

func str(p func(*Options) *string) (func(*Options, string) error, func(*Options) string) {
	return func(o *Options, v string) error { *p(o) = v; return nil },
		func(o *Options) string { return *p(o) }
}

func boolean(p func(*Options) *bool) (func(*Options, string) error, func(*Options) string) {
	return func(o *Options, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%q is not a boolean", v)
			}
			*p(o) = b
			return nil
		},
		func(o *Options) string { return strconv.FormatBool(*p(o)) }
}

func integer(p func(*Options) *int) (func(*Options, string) error, func(*Options) string) {
	return func(o *Options, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%q is not an integer", v)
			}
			*p(o) = n
			return nil
		},
		func(o *Options) string { return strconv.Itoa(*p(o)) }
}

func int64v(p func(*Options) *int64) (func(*Options, string) error, func(*Options) string) {
	return func(o *Options, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%q is not an integer", v)
			}
			*p(o) = n
			return nil
		},
		func(o *Options) string { return strconv.FormatInt(*p(o), 10) }
}

// duration accepts Go durations ("90s", "1m") and bare integers as seconds,
// the unit Zaqar's own limits use.
func duration(p func(*Options) *time.Duration) (func(*Options, string) error, func(*Options) string) {
	return func(o *Options, v string) error {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				*p(o) = time.Duration(n) * time.Second
				return nil
			}
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%q is not a duration (e.g. 30s, 5m) or a number of seconds", v)
			}
			*p(o) = d
			return nil
		},
		func(o *Options) string { return (*p(o)).String() }
}

// tokens parses "token=project,token2=project2".
func tokens(o *Options, v string) error {
	m := map[string]string{}
	for _, pair := range strings.Split(v, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		tok, project, ok := strings.Cut(pair, "=")
		if !ok || tok == "" || project == "" {
			return fmt.Errorf("%q is not token=project", pair)
		}
		m[tok] = project
	}
	o.Tokens = m
	return nil
}

func tokensString(o *Options) string {
	keys := make([]string, 0, len(o.Tokens))
	for k := range o.Tokens {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = "<redacted>=" + o.Tokens[k]
	}
	return strings.Join(parts, ",")
}

// textFlag holds a flag's text until Load applies it; a boolean option's
// flag may be given without a value.
type textFlag struct {
	s    string
	bare bool
}

func (f *textFlag) String() string     { return f.s }
func (f *textFlag) Set(v string) error { f.s = v; return nil }
func (f *textFlag) IsBoolFlag() bool   { return f.bare }

func opt(name, usage string, set func(*Options, string) error, get func(*Options) string) option {
	return option{name: name, usage: usage, set: set, get: get}
}

// options is the single table of settings; flags, env and YAML all use it.
var options = func() []option {
	o := []option{}
	add := func(name, usage string, set func(*Options, string) error, get func(*Options) string) {
		op := opt(name, usage, set, get)
		// Boolean options print as true or false whatever their value.
		probe := Defaults()
		_, err := strconv.ParseBool(get(&probe))
		op.flag = err == nil && (get(&probe) == "true" || get(&probe) == "false")
		o = append(o, op)
	}
	s, g := str(func(o *Options) *string { return &o.Listen })
	add("listen", "HTTP listen address host:port", s, g)
	s, _ = str(func(o *Options) *string { return &o.Store })
	add("store", "storage URI: memory, redis://host:6379/0", s, func(o *Options) string { return RedactURI(o.Store) })
	s, _ = str(func(o *Options) *string { return &o.Catalog })
	add("catalog", "pool catalog URI (redis:// or mongodb://); empty: no pooling", s, func(o *Options) string { return RedactURI(o.Catalog) })
	s, g = str(func(o *Options) *string { return &o.LogLevel })
	add("log-level", "debug, info, warn or error", s, g)
	s, g = boolean(func(o *Options) *bool { return &o.AccessLog })
	add("access-log", "log one JSON line per request", s, g)
	s, g = boolean(func(o *Options) *bool { return &o.Metrics })
	add("metrics", "serve Prometheus metrics on /metrics", s, g)
	s, g = str(func(o *Options) *string { return &o.MetricsListen })
	add("metrics-listen", "serve /metrics only on this host:port, not on listen; empty: on listen", s, g)
	s, g = str(func(o *Options) *string { return &o.PprofAddr })
	add("pprof-addr", "serve Go profiles (net/http/pprof) on this loopback host:port; empty: off", s, g)
	add("auth-tokens", "static bearer tokens bound to projects: token=project,... (empty: no auth)", tokens, tokensString)
	s, g = str(func(o *Options) *string { return &o.AdminToken })
	add("admin-token", "bearer token granting the admin role (health, pools, flavors)", s, func(o *Options) string {
		if o.AdminToken == "" {
			return ""
		}
		return "<redacted>"
	})
	s, g = boolean(func(o *Options) *bool { return &o.TrustRolesHeader })
	add("trust-roles-header", "without auth-tokens, accept 'X-Roles: admin' as the admin role (as Zaqar noauth)", s, g)
	s, _ = str(func(o *Options) *string { return &o.SignedURLSecret })
	add("signed-url-secret", "key of pre-signed URLs (Zaqar's [signed_url] secret_key); empty: /share is off", s, func(o *Options) string {
		if o.SignedURLSecret == "" {
			return ""
		}
		return "<redacted>"
	})
	s, g = str(func(o *Options) *string { return &o.SignedURLSecretFile })
	add("signed-url-secret-file", "file holding the key of pre-signed URLs (a mounted Secret)", s, g)
	s, g = str(func(o *Options) *string { return &o.EncryptionKeyFile })
	add("encryption-key-file", "file of message encryption keys, KEYID:BASE64 a line (the first encrypts, every one decrypts); needed by queues with _enable_encrypt_messages", s, g)
	s, g = int64v(func(o *Options) *int64 { return &o.MaxBodyBytes })
	add("max-body-bytes", "largest request body accepted (413 beyond)", s, g)
	s, g = integer(func(o *Options) *int { return &o.MaxMessagesPostSize })
	add("max-messages-post-size", "largest message batch in bytes; queues may lower it", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.MaxMessageTTL })
	add("max-message-ttl", "largest message TTL", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.MaxClaimTTL })
	add("max-claim-ttl", "largest claim TTL", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.MaxClaimGrace })
	add("max-claim-grace", "largest claim grace", s, g)
	s, g = integer(func(o *Options) *int { return &o.MaxMessagesPerPage })
	add("max-messages-per-page", "largest message listing page and bulk get/delete", s, g)
	s, g = integer(func(o *Options) *int { return &o.MaxMessagesPerClaim })
	add("max-messages-per-claim", "largest claim or pop", s, g)
	s, g = integer(func(o *Options) *int { return &o.MaxQueuesPerPage })
	add("max-queues-per-page", "largest queue listing page", s, g)
	s, g = integer(func(o *Options) *int { return &o.MaxQueueMetadata })
	add("max-queue-metadata", "largest queue metadata document in bytes", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.DefaultMessageTTL })
	add("default-message-ttl", "message TTL when neither message nor queue sets one", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.DefaultClaimTTL })
	add("default-claim-ttl", "claim TTL when the request sets none", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.DefaultClaimGrace })
	add("default-claim-grace", "claim grace when the request sets none", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.MetadataCacheTTL })
	add("metadata-cache-ttl", "reuse queue settings read from metadata this long (0: always read)", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.StorageTimeout })
	add("storage-timeout", "bound on a request's storage calls (503 beyond)", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.RetryAfter })
	add("retry-after", "Retry-After sent with 503 and 507 answers", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.StartTimeout })
	add("start-timeout", "keep retrying the store and the catalog at start-up this long", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.DrainDelay })
	add("drain-delay", "after SIGTERM, answer health with 503 and Connection: close this long, then close the listener once connections stop coming", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.ShutdownTimeout })
	add("shutdown-timeout", "after the drain delay, the bound on lingering idle connections and in-flight requests", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.ReadHeaderTimeout })
	add("read-header-timeout", "time allowed to read request headers", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.ReadTimeout })
	add("read-timeout", "time allowed to read a whole request, body included (408 past it)", s, g)
	s, g = integer(func(o *Options) *int { return &o.MaxHeaderBytes })
	add("max-header-bytes", "largest request line and headers in bytes (431 past it)", s, g)
	s, g = boolean(func(o *Options) *bool { return &o.LeanHTTP })
	add("lean-http", "serve plain keep-alive requests on sluice's own HTTP/1.1 loop (false: net/http serves all)", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.IdleTimeout })
	add("idle-timeout", "keep-alive connections idle longer are closed", s, g)
	s, _ = str(func(o *Options) *string { return &o.SMTPURL })
	add("smtp-url", "SMTP relay for mailto subscribers: smtp://host:port[?from=address]", s, func(o *Options) string { return RedactURI(o.SMTPURL) })
	s, g = boolean(func(o *Options) *bool { return &o.RequireConfirmation })
	add("require-confirmation", "new subscriptions get a confirmation request and no message until confirmed", s, g)
	s, g = boolean(func(o *Options) *bool { return &o.Deliveries })
	add("deliveries", "run the notification delivery engine on this replica", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.DeliveryTimeout })
	add("delivery-timeout", "bound on one webhook or mail send", s, g)
	s, g = integer(func(o *Options) *int { return &o.DeliveryConcurrency })
	add("delivery-concurrency", "notification sends in flight on this replica", s, g)
	s, g = integer(func(o *Options) *int { return &o.DeliveryPerSubscriber })
	add("delivery-per-subscriber", "notification sends in flight to one subscriber", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.DeliveryPoll })
	add("delivery-poll", "look for due deliveries this often while some wait for room (posts on this replica wake the engine at once, retries at their time)", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.DeliveryIdlePoll })
	add("delivery-idle-poll", "look at least this often otherwise (not less than delivery-poll): how soon deliveries that a replica recorded and died before sending are taken over", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.DeliveryRetryMin })
	add("delivery-retry-min", "first retry delay of a failed delivery (doubles per attempt, with jitter)", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.DeliveryRetryMax })
	add("delivery-retry-max", "longest delay between attempts of one delivery", s, g)
	s, g = integer(func(o *Options) *int { return &o.MigrateBatch })
	add("migrate-batch", "messages per batch when a queue moves between pools", s, g)
	s, g = integer(func(o *Options) *int { return &o.MigrateRate })
	add("migrate-rate", "messages per second one queue move carries at most (0: no cap)", s, g)
	s, g = duration(func(o *Options) *time.Duration { return &o.MigrateLease })
	add("migrate-lease", "a replica holds a queue move this long between renewals; after a crash another resumes it", s, g)
	return o
}()

// EnvName is the environment variable for an option: SLUICE_MAX_BODY_BYTES.
func EnvName(name string) string {
	return "SLUICE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Loaded is the outcome of Load: the options and what the command asked for.
type Loaded struct {
	Options     Options
	CheckConfig bool   // --check-config: validate, print, exit
	File        string // the YAML file read, if any
}

// Load layers defaults, the YAML file (--config or SLUICE_CONFIG), SLUICE_*
// environment variables and command-line flags, in rising precedence.
// It does not validate; call Options.Validate.
func Load(args []string, getenv func(string) string, stderr io.Writer) (Loaded, error) {
	fs := flag.NewFlagSet("sluice-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var out Loaded
	fs.StringVar(&out.File, "config", getenv("SLUICE_CONFIG"), "optional YAML file of options (keys as the flag names); env SLUICE_CONFIG")
	fs.BoolVar(&out.CheckConfig, "check-config", false, "validate the configuration, print it and exit")
	flagVals := map[string]*string{}
	defaults := Defaults()
	for _, op := range options {
		v := &textFlag{s: op.get(&defaults), bare: op.flag}
		flagVals[op.name] = &v.s
		fs.Var(v, op.name, op.usage+"; env "+EnvName(op.name))
	}
	if err := fs.Parse(args); err != nil {
		return out, err
	}
	if fs.NArg() > 0 {
		return out, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	o := Defaults()
	if out.File != "" {
		if err := applyYAML(&o, out.File); err != nil {
			return out, err
		}
	}
	var errs []error
	for _, op := range options {
		if v, ok := lookupEnv(getenv, EnvName(op.name)); ok {
			if err := op.set(&o, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", EnvName(op.name), err))
			}
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, op := range options {
		if set[op.name] {
			if err := op.set(&o, *flagVals[op.name]); err != nil {
				errs = append(errs, fmt.Errorf("--%s: %w", op.name, err))
			}
		}
	}
	out.Options = o
	return out, errors.Join(errs...)
}

func lookupEnv(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

// applyYAML reads a flat mapping of option names to values; auth-tokens may
// also be a mapping of token to project.
func applyYAML(o *Options, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	byName := map[string]option{}
	for _, op := range options {
		byName[op.name] = op
	}
	var errs []error
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		op, ok := byName[k]
		if !ok {
			errs = append(errs, fmt.Errorf("config file %s: unknown option %q", path, k))
			continue
		}
		var text string
		switch v := doc[k].(type) {
		case map[string]any:
			pairs := make([]string, 0, len(v))
			for tok, project := range v {
				pairs = append(pairs, fmt.Sprintf("%s=%v", tok, project))
			}
			text = strings.Join(pairs, ",")
		case nil:
			continue
		default:
			text = fmt.Sprint(v)
		}
		if err := op.set(o, text); err != nil {
			errs = append(errs, fmt.Errorf("config file %s: %s: %w", path, k, err))
		}
	}
	return errors.Join(errs...)
}

// RedactURI hides the password of a URI (store URIs may carry one).
func RedactURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.User == nil {
		return uri
	}
	return u.Redacted()
}

// Dump writes the effective options, one name=value per line, secrets
// redacted; --check-config prints it.
func Dump(o *Options, w io.Writer) {
	for _, op := range options {
		fmt.Fprintf(w, "%s=%s\n", op.name, op.get(o))
	}
}
