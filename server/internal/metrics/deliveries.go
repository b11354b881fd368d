package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/server/internal/storage"
)

// deliveryMetrics count notification deliveries. Like queue depth they
// are totals: subscriber URLs and queue names are unbounded and never
// labels.
type deliveryMetrics struct {
	outcomes *prometheus.CounterVec
	retries  prometheus.Counter
	latency  prometheus.Histogram
}

func newDeliveryMetrics(reg *prometheus.Registry) deliveryMetrics {
	d := deliveryMetrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_notification_deliveries_total",
			Help: "Notification deliveries settled by this replica, by outcome: delivered (the subscriber answered 2xx) or failed (given up because the message or the subscription expired first).",
		}, []string{"outcome"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_notification_retries_total",
			Help: "Failed notification attempts that were scheduled to be tried again.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sluice_notification_delivery_latency_seconds",
			Help: "Time from the post of a message being acknowledged to its subscriber answering 2xx, retries included.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
				30, 60, 300, 900, 3600},
		}),
	}
	// Both outcomes exist from the start, so rates work before the first one.
	d.outcomes.WithLabelValues("delivered")
	d.outcomes.WithLabelValues("failed")
	reg.MustRegister(d.outcomes, d.retries, d.latency)
	return d
}

// Delivered counts a successful send and its latency (notify.Observer).
func (m *Metrics) Delivered(latency time.Duration) {
	m.deliveries.outcomes.WithLabelValues("delivered").Inc()
	m.deliveries.latency.Observe(max(latency, 0).Seconds())
}

// Retried counts an attempt that failed and will be retried.
func (m *Metrics) Retried() { m.deliveries.retries.Inc() }

// GaveUp counts a delivery abandoned because its message or subscription
// expired first.
func (m *Metrics) GaveUp() { m.deliveries.outcomes.WithLabelValues("failed").Inc() }

var pendingDesc = prometheus.NewDesc("sluice_notification_deliveries_pending",
	"Notification deliveries not yet sent over the whole store at scrape time (all queues together).", nil, nil)

// WatchDeliveries registers the scrape-time count of pending deliveries.
func (m *Metrics) WatchDeliveries(d storage.DeliveryStore, timeout time.Duration) {
	m.Registry.MustRegister(&pendingCollector{d: d, timeout: timeout})
}

type pendingCollector struct {
	d       storage.DeliveryStore
	timeout time.Duration
}

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- pendingDesc }

func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	n, err := c.d.Pending(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(n))
}
