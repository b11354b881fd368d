// Package api is sluice-server's HTTP side: the Zaqar v2 routes, header and
// body validation, the mapping of storage errors to statuses, metrics and
// the access log. Handlers are plain functions over net/http; the hot path
// allocates little and encodes its answers by hand.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"sluice.dev/server/internal/auth"
	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/logging"
	"sluice.dev/server/internal/metrics"
	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/encrypt"
)

// Server answers the Zaqar v2 API over one storage driver.
type Server struct {
	opts config.Options
	drv  storage.Driver // what handlers call (instrumented, routed with pooling, encrypting)
	log  *slog.Logger
	// clock is the drivers' clock: message and claim ages are measured on
	// the time the store decides expiry by.
	clock storage.Clock
	m     *metrics.Metrics

	mux       *http.ServeMux
	mu        sync.Mutex
	routes    map[string]*route
	unmatched *metrics.Endpoint
	draining  atomic.Bool
	cache     *settingsCache

	// boundCalls: storage calls get a deadline, from deadlines. The
	// in-process memory store never waits, so it runs without one.
	boundCalls   bool
	deadlines    *callDeadlines
	retryAfter   int
	authRequired bool
	tokens       map[string]string
	adminToken   string
	trustRoles   bool
	signKey      []byte // pre-signed URLs; nil: off
	// keystone validates tokens in keystone mode (nil otherwise).
	keystone    authenticator
	keystoneURL string
	// kube validates ServiceAccount tokens in kubernetes mode (nil
	// otherwise); grants are the access file's.
	kube   authenticator
	grants *auth.Grants
	// trusts are the Keystone trusts of trust+ subscribers (keystone
	// mode; nil otherwise).
	trusts trustService

	// locate names the pool a queue is placed on; set with pooling on, so
	// GET of a queue can tell operators its shard (X-Sluice-Pool).
	locate func(context.Context, storage.QueueRef) (string, error)

	// onSubscribe is told of each new subscription (the delivery engine
	// sends confirmation requests); afterPost of each successful post (it
	// wakes the engine). Both are nil without an engine.
	onSubscribe func(storage.QueueRef, storage.Subscription)
	afterPost   func()

	// store is drv without the encryption wrapper, which stays in front of
	// whatever pooling routes to; keys are its keys (nil: none configured).
	store storage.Driver
	keys  *encrypt.Keyring
}

// New builds a server over an open driver. m may be nil (no metrics); log
// may be nil (no logs).
func New(opts config.Options, drv storage.Driver, log *slog.Logger, m *metrics.Metrics) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = metrics.New()
		opts.Metrics = false
	}
	s := &Server{
		opts:         opts,
		store:        drv,
		keys:         keyring(opts),
		log:          log,
		m:            m,
		mux:          http.NewServeMux(),
		routes:       map[string]*route{},
		clock:        storage.SystemClock{},
		cache:        newSettingsCache(opts.MetadataCacheTTL),
		boundCalls:   opts.Store != "memory" || opts.Catalog != "",
		deadlines:    newCallDeadlines(opts.StorageTimeout),
		retryAfter:   int((opts.RetryAfter + time.Second - 1) / time.Second),
		authRequired: len(opts.Tokens) > 0,
		tokens:       opts.Tokens,
		adminToken:   opts.AdminToken,
		trustRoles:   opts.TrustRolesHeader,
		keystone:     newKeystone(opts, log),
		keystoneURL:  opts.Keystone.URL,
		kube:         newKubernetes(opts, log),
		grants:       auth.NewGrants(opts.AccessFile, log),
		trusts:       newTrusts(opts, log),
	}
	// Validate has read the key file already; an error here left it nil.
	s.signKey, _ = opts.SignedURLKey()
	s.drv = encrypt.Wrap(drv, s.keys)
	s.unmatched = m.Endpoint("other", "unmatched")
	s.mux.Handle("/", http.HandlerFunc(s.notFound))
	// Without this, ServeMux would redirect /v2 to /v2/; Zaqar answers 404.
	s.mux.Handle("/v2", http.HandlerFunc(s.notFound))
	s.routesV2()
	// With a metrics listener of its own (app.Run serves it), /metrics is
	// an unknown path here.
	if opts.Metrics && opts.MetricsListen == "" {
		mh := m.Handler()
		s.Handle("GET", "/metrics", Public, func(w http.ResponseWriter, r *http.Request, _ *Call) { mh.ServeHTTP(w, r) })
	}
	return s
}

// SetClock makes the server measure ages on c, the clock its driver was
// opened with (the wall clock unless set).
func (s *Server) SetClock(c storage.Clock) { s.clock = c }

// Options are the server's options.
func (s *Server) Options() config.Options { return s.opts }

// SetDraining makes ping and health answer 503 (shutdown drain) or not.
func (s *Server) SetDraining(v bool) { s.draining.Store(v) }

// ServeHTTP routes one request, then records its metrics and access log line.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rw := rwPool.Get().(*respWriter)
	rw.reset(w)
	start := time.Now()
	rw.start = start
	id := newRequestID()
	rw.call.RequestID = id
	w.Header()["X-Openstack-Request-Id"] = []string{id}
	if s.draining.Load() {
		// Each client connection ends cleanly after this answer, so no
		// client is left holding a keep-alive connection that the coming
		// listener close would cut under its next request.
		w.Header()["Connection"] = []string{"close"}
	}
	inFlight := s.m.InFlight()
	inFlight.Inc()
	s.route(rw, r)
	inFlight.Dec()
	if !rw.wrote {
		rw.WriteHeader(http.StatusOK)
	}
	d := time.Since(start)
	ep, route := rw.ep, rw.route
	if ep == nil {
		ep, route = s.unmatched, "unmatched"
	}
	ep.Observe(rw.status, d)
	if s.opts.AccessLog {
		s.accessLog(rw.status, r.Method, route, r.URL.Path, d, id)
	}
	rw.release()
}

// accessLog writes the request's line (logging.Request words it).
func (s *Server) accessLog(status int, method, route, path string, d time.Duration, id string) {
	logging.Request(s.log.Handler(), status, method, route, path, d, id)
}

// newRequestID returns "req-<uuid4>" as Zaqar's x-openstack-request-id.
func newRequestID() string {
	u := uuid.New()
	var b [40]byte
	copy(b[:], "req-")
	hexUUID(b[4:], u)
	return string(b[:])
}

func hexUUID(dst []byte, u uuid.UUID) {
	j := 0
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst[j] = '-'
			j++
		}
		dst[j] = hexDigits[c>>4]
		dst[j+1] = hexDigits[c&0xF]
		j += 2
	}
}

// respWriter records the status for metrics and the log, and carries the
// per-request state and reusable buffers; it is pooled.
type respWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
	ep     *metrics.Endpoint
	route  string
	start  time.Time // when ServeHTTP took the request
	call   Call
	in     []byte // request body
	out    []byte // encoded answer
}

var rwPool = sync.Pool{New: func() any {
	return &respWriter{in: make([]byte, 0, 4096), out: make([]byte, 0, 4096)}
}}

func (w *respWriter) reset(inner http.ResponseWriter) {
	w.ResponseWriter = inner
	w.status = 0
	w.wrote = false
	w.ep = nil
	w.route = ""
	w.call = Call{}
}

// maxPooledBuf keeps one huge request from pinning its buffer for good.
const maxPooledBuf = 64 << 10

func (w *respWriter) release() {
	w.ResponseWriter = nil
	w.call = Call{}
	if cap(w.in) > maxPooledBuf {
		w.in = make([]byte, 0, 4096)
	}
	if cap(w.out) > maxPooledBuf {
		w.out = make([]byte, 0, 4096)
	}
	rwPool.Put(w)
}

func (w *respWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.status = code
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *respWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *respWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
