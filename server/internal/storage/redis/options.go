package redis

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Defaults chosen so that an unreachable Redis turns into a fast 503 rather
// than a request hanging (Zaqar's Redis driver retried for minutes):
// connection attempts and replies are bounded, and a failed command is never
// retried by the client, because a retried script might apply twice.
const (
	defaultDialTimeout  = time.Second
	defaultReadTimeout  = 2 * time.Second
	defaultWriteTimeout = 2 * time.Second
)

// clientConfig is what a store URI says. Forms:
//
//	redis://[user:password@]host[:port][/db][?options]
//	rediss://...                                   (TLS)
//	redis://[:password@]h1:26379,h2:26379[/db]?master=mymaster[&sentinel_password=...]
//
// Options: dial_timeout, read_timeout, write_timeout (Go durations such as
// 500ms, or seconds), pool_size, master, sentinel_password, sentinel_username,
// and with rediss:// tls_ca_file (a PEM bundle to trust instead of the system
// roots: a private CA mounted from a Secret). db=N is accepted in place of
// the path (the catalog's documented Sentinel form); the two must agree.
// layout=stream is accepted and changes nothing: the store driver posts
// messages to the stream area and its claims hold them in place (lib.lua,
// "The stream area"); layout=hash, message hashes for servers of versions
// before the stream area, is retired and refused.
type clientConfig struct {
	addrs            []string
	master           string
	username         string
	password         string
	sentinelUser     string
	sentinelPassword string
	db               int
	tls              bool
	rootCAs          *x509.CertPool // nil: the system roots
	dialTimeout      time.Duration
	readTimeout      time.Duration
	writeTimeout     time.Duration
	poolSize         int
}

func parseURI(u *url.URL) (clientConfig, error) {
	cfg := clientConfig{
		dialTimeout:  defaultDialTimeout,
		readTimeout:  defaultReadTimeout,
		writeTimeout: defaultWriteTimeout,
		tls:          u.Scheme == "rediss",
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return cfg, fmt.Errorf("scheme %q is not redis or rediss", u.Scheme)
	}
	if u.User != nil {
		cfg.username = u.User.Username()
		cfg.password, _ = u.User.Password()
	}
	q := u.Query()
	cfg.master = q.Get("master")
	defPort := "6379"
	if cfg.master != "" {
		defPort = "26379"
	}
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			continue
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = h, defPort
		}
		if host == "" {
			host = "127.0.0.1"
		}
		cfg.addrs = append(cfg.addrs, net.JoinHostPort(host, port))
	}
	if len(cfg.addrs) == 0 {
		cfg.addrs = []string{net.JoinHostPort("127.0.0.1", defPort)}
	}
	if len(cfg.addrs) > 1 && cfg.master == "" {
		return cfg, fmt.Errorf("several hosts are only meaningful for Sentinel: add ?master=<name>")
	}
	path := strings.Trim(u.Path, "/")
	if path != "" {
		var err error
		if cfg.db, err = parseDB(path); err != nil {
			return cfg, err
		}
	}
	for key, vals := range q {
		v := vals[0]
		var err error
		switch key {
		case "master":
		case "db":
			db := cfg.db
			if cfg.db, err = parseDB(v); err == nil && path != "" && db != cfg.db {
				err = fmt.Errorf("the path names database %d", db)
			}
		case "sentinel_password":
			cfg.sentinelPassword = v
		case "sentinel_username":
			cfg.sentinelUser = v
		case "dial_timeout":
			cfg.dialTimeout, err = parseDuration(v)
		case "read_timeout":
			cfg.readTimeout, err = parseDuration(v)
		case "write_timeout":
			cfg.writeTimeout, err = parseDuration(v)
		case "tls_ca_file":
			if !cfg.tls {
				return cfg, fmt.Errorf("option tls_ca_file needs the rediss:// scheme")
			}
			cfg.rootCAs, err = CAPool(v)
		case "layout":
			switch v {
			case "stream":
			case "hash":
				err = fmt.Errorf("the hash layout is retired: stream is the only layout")
			default:
				err = fmt.Errorf("must be stream")
			}
		case "pool_size":
			cfg.poolSize, err = strconv.Atoi(v)
			if err == nil && cfg.poolSize < 1 {
				err = fmt.Errorf("must be at least 1")
			}
		default:
			return cfg, fmt.Errorf("unknown option %q", key)
		}
		if err != nil {
			return cfg, fmt.Errorf("option %s=%q: %v", key, v, err)
		}
	}
	return cfg, nil
}

// CAPool reads a PEM bundle of CA certificates (tls_ca_file).
func CAPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// parseDB reads a database number.
func parseDB(s string) (int, error) {
	db, err := strconv.Atoi(s)
	if err != nil || db < 0 {
		return 0, fmt.Errorf("database %q is not a non-negative number", s)
	}
	return db, nil
}

// parseDuration takes "500ms", "2s" or a bare number of seconds.
func parseDuration(s string) (time.Duration, error) {
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		if secs <= 0 {
			return 0, fmt.Errorf("must be positive")
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err == nil && d <= 0 {
		err = fmt.Errorf("must be positive")
	}
	return d, err
}

// NewClient is the one way sluice opens a Redis URI: the store driver and
// the pooling catalog both call it, so a URI means the same client options
// (timeouts, no command retries, Sentinel auth, TLS and tls_ca_file)
// whichever role it plays. See clientConfig for the forms.
func NewClient(u *url.URL) (*goredis.Client, error) {
	cfg, err := parseURI(u)
	if err != nil {
		return nil, err
	}
	return cfg.client(), nil
}

// client builds the go-redis client: a failover client (which asks the
// sentinels for the current master and follows failovers) when a master
// name is given, a plain one otherwise.
func (cfg clientConfig) client() *goredis.Client {
	var tlsConf *tls.Config
	if cfg.tls {
		host, _, _ := net.SplitHostPort(cfg.addrs[0])
		tlsConf = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12, RootCAs: cfg.rootCAs}
	}
	if cfg.master != "" {
		return goredis.NewFailoverClient(&goredis.FailoverOptions{
			MasterName:       cfg.master,
			SentinelAddrs:    cfg.addrs,
			SentinelUsername: cfg.sentinelUser,
			SentinelPassword: cfg.sentinelPassword,
			Username:         cfg.username,
			Password:         cfg.password,
			DB:               cfg.db,
			Protocol:         2,
			DisableIdentity:  true,
			MaxRetries:       -1,
			DialTimeout:      cfg.dialTimeout,
			ReadTimeout:      cfg.readTimeout,
			WriteTimeout:     cfg.writeTimeout,
			// The request's deadline (--storage-timeout) bounds the socket
			// reads and writes too, so a shard that stops answering (a
			// partition) costs a request its timeout and not the read
			// timeout on top.
			ContextTimeoutEnabled: true,
			PoolSize:              cfg.poolSize,
			TLSConfig:             tlsConf,
			Dialer:                dialer(cfg.dialTimeout, tlsConf),
		})
	}
	return goredis.NewClient(&goredis.Options{
		Addr:     cfg.addrs[0],
		Username: cfg.username,
		Password: cfg.password,
		DB:       cfg.db,
		// RESP2 and no CLIENT SETINFO: a new connection is ready after the
		// TCP handshake (plus AUTH/SELECT when configured).
		Protocol:        2,
		DisableIdentity: true,
		MaxRetries:      -1,
		// One dial attempt per request: against a Redis that is down,
		// go-redis' default of 5 attempts with backoff only delays the 503.
		DialerRetries: 1,
		DialTimeout:   cfg.dialTimeout,
		ReadTimeout:   cfg.readTimeout,
		WriteTimeout:  cfg.writeTimeout,
		// The request's deadline bounds socket reads and writes too (see
		// the failover client above).
		ContextTimeoutEnabled: true,
		PoolSize:              cfg.poolSize,
		TLSConfig:             tlsConf,
		Dialer:                dialer(cfg.dialTimeout, tlsConf),
	})
}
