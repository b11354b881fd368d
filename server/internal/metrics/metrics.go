// Package metrics is sluice-server's Prometheus instrumentation, kept on the
// project's own registry. Labels are bounded: HTTP metrics are labelled by
// route template (never the URL), method and status code; queue depth is a
// total over all queues, computed at scrape time.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"sluice.dev/server/internal/storage"
)

// Metrics holds every collector the server updates.
type Metrics struct {
	Registry *prometheus.Registry

	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	inFlight      prometheus.Gauge
	handovers     prometheus.Counter
	claimsExpired prometheus.Counter
	deadLettered  prometheus.Counter
	deliveries    deliveryMetrics
}

// New registers the server's metrics, plus Go runtime and process metrics,
// on a fresh registry.
func New() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_http_requests_total",
		Help: "HTTP requests answered, by method, route template and status code.",
	}, []string{"method", "route", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_http_request_duration_seconds",
		Help: "Time from request routing to the last byte of the answer, by method and route template.",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
			0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"method", "route"})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_http_requests_in_flight",
		Help: "HTTP requests being served now.",
	})
	m.handovers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_http_handovers_total",
		Help: "Connections handed to net/http: by the lean HTTP/1.1 loop at a request outside its plain subset or while draining; every connection with --lean-http=false.",
	})
	m.claimsExpired = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_claims_expired_total",
		Help: "Claims that lapsed without being released, counted when the storage driver notices.",
	})
	m.deadLettered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_dead_letter_moves_total",
		Help: "Messages moved to a dead-letter queue (or dropped) after reaching _max_claim_count.",
	})
	m.Registry.MustRegister(m.requests, m.duration, m.inFlight, m.handovers, m.claimsExpired, m.deadLettered,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.deliveries = newDeliveryMetrics(m.Registry)
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// HandedOver counts a connection given to net/http.
func (m *Metrics) HandedOver() { m.handovers.Inc() }

// ClaimsExpired implements storage.Events.
func (m *Metrics) ClaimsExpired(n int) { m.claimsExpired.Add(float64(n)) }

// DeadLettered implements storage.Events.
func (m *Metrics) DeadLettered(n int) { m.deadLettered.Add(float64(n)) }

// InFlight is the gauge of requests being served.
func (m *Metrics) InFlight() prometheus.Gauge { return m.inFlight }

// Endpoint is the pre-resolved metrics of one method on one route, so the
// request path never looks labels up in a map.
type Endpoint struct {
	m             *Metrics
	method, route string
	dur           prometheus.Observer
	// codes are the counters of the status codes this endpoint has
	// answered so far, copied on write. An endpoint answers a handful of
	// codes, so scanning them is as quick as indexing a table of all 500,
	// which cost 4 KB per endpoint (a third of the idle heap).
	codes atomic.Pointer[[]codeCounter]
	mu    sync.Mutex // serialises adding a code
}

type codeCounter struct {
	code int
	c    prometheus.Counter
}

// Endpoint returns the children for a method and route template.
func (m *Metrics) Endpoint(method, route string) *Endpoint {
	return &Endpoint{m: m, method: method, route: route, dur: m.duration.WithLabelValues(method, route)}
}

// Observe counts one answered request and its duration.
func (e *Endpoint) Observe(code int, d time.Duration) {
	e.dur.Observe(d.Seconds())
	if code < 100 || code > 599 {
		code = 599
	}
	e.counter(code).Inc()
}

// counter is the requests counter of code, resolved once per endpoint.
func (e *Endpoint) counter(code int) prometheus.Counter {
	if c, ok := e.known(code); ok {
		return c
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.known(code); ok {
		return c
	}
	var codes []codeCounter
	if p := e.codes.Load(); p != nil {
		codes = *p
	}
	c := e.m.requests.WithLabelValues(e.method, e.route, strconv.Itoa(code))
	codes = append(codes[:len(codes):len(codes)], codeCounter{code, c})
	e.codes.Store(&codes)
	return c
}

func (e *Endpoint) known(code int) (prometheus.Counter, bool) {
	if p := e.codes.Load(); p != nil {
		for _, cc := range *p {
			if cc.code == code {
				return cc.c, true
			}
		}
	}
	return nil, false
}

// WatchStorage registers scrape-time collectors for the driver: whether it
// answers a ping, and total queue depth when it can report one.
func (m *Metrics) WatchStorage(d storage.Driver, timeout time.Duration) {
	m.Registry.MustRegister(&storageCollector{d: d, timeout: timeout})
}

// WatchPoolCapacity registers the gauges of each pool's memory, from the
// pooled driver's last readings (read every few seconds, not per scrape).
func (m *Metrics) WatchPoolCapacity(read func() map[string]storage.Capacity) {
	m.Registry.MustRegister(capacityCollector(read))
}

var (
	poolUsedDesc = prometheus.NewDesc("sluice_pool_memory_used_bytes",
		"Memory a pool's backend uses, as it counts it against its limit (Redis: used_memory less replication and AOF buffers).",
		[]string{"pool"}, nil)
	poolMaxDesc = prometheus.NewDesc("sluice_pool_memory_max_bytes",
		"A pool's memory limit (Redis maxmemory); 0 when none is set.", []string{"pool"}, nil)
	poolFullDesc = prometheus.NewDesc("sluice_pool_storage_full",
		"1 while a pool is at its limit and refuses posts (HTTP 507), else 0.", []string{"pool"}, nil)
)

type capacityCollector func() map[string]storage.Capacity

func (c capacityCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolUsedDesc
	ch <- poolMaxDesc
	ch <- poolFullDesc
}

func (c capacityCollector) Collect(ch chan<- prometheus.Metric) {
	for pool, cp := range c() {
		full := 0.0
		if cp.Full() {
			full = 1
		}
		ch <- prometheus.MustNewConstMetric(poolUsedDesc, prometheus.GaugeValue, float64(cp.UsedBytes), pool)
		ch <- prometheus.MustNewConstMetric(poolMaxDesc, prometheus.GaugeValue, float64(cp.MaxBytes), pool)
		ch <- prometheus.MustNewConstMetric(poolFullDesc, prometheus.GaugeValue, full, pool)
	}
}

var (
	upDesc = prometheus.NewDesc("sluice_storage_up",
		"1 when the storage backend answered a ping at scrape time, else 0.", nil, nil)
	depthDesc = prometheus.NewDesc("sluice_queue_messages",
		"Live messages over all queues at scrape time, by state (free or claimed).", []string{"state"}, nil)
)

type storageCollector struct {
	d       storage.Driver
	timeout time.Duration
}

func (c *storageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- upDesc
	ch <- depthDesc
}

func (c *storageCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	up := 1.0
	if err := c.d.Ping(ctx); err != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up)
	dr, ok := c.d.(storage.DepthReporter)
	if !ok || up == 0 {
		return
	}
	depth, err := dr.Depth(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(depth.Free), "free")
	ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(depth.Claimed), "claimed")
}
