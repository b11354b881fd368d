// Package instrument times every storage call into Prometheus, so drivers
// stay free of metrics code: the server wraps whatever driver it opened
// (and the pooled driver wraps each pool's) once.
//
// Metrics, with bounded labels only (driver is a configured name such as
// "redis" or a pool name; op is one of the fixed operation names below;
// kind is a storage error kind):
//
//	sluice_storage_op_duration_seconds{driver,op}   histogram
//	sluice_storage_op_errors_total{driver,op,kind}  counter
package instrument

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/server/internal/storage"
)

// op indexes the fixed set of timed operations.
type op int

const (
	opQueueCreate op = iota
	opQueueExists
	opQueueGetMetadata
	opQueueSetMetadata
	opQueueUpdateMetadata
	opQueueDelete
	opQueueList
	opQueueStats
	opQueuePurge
	opMessagePost
	opMessageList
	opMessageGet
	opMessageGetMany
	opMessageDelete
	opMessageDeleteMany
	opMessagePop
	opClaimCreate
	opClaimGet
	opClaimUpdate
	opClaimDelete
	opPing
	opDepth
	opSubCreate
	opSubGet
	opSubList
	opSubUpdate
	opSubConfirm
	opSubDelete
	opSubPurge
	opDlvLease
	opDlvAck
	opDlvRetry
	opDlvFail
	opDlvRelease
	opDlvStats
	opDlvPending
	nOps
)

// opNames are the op label values: the storage package's operation table.
var opNames = [nOps]string{
	storage.OpQueueCreate, storage.OpQueueExists, storage.OpQueueGetMetadata, storage.OpQueueSetMetadata,
	storage.OpQueueUpdateMetadata, storage.OpQueueDelete, storage.OpQueueList, storage.OpQueueStats, storage.OpQueuePurge,
	storage.OpMessagePost, storage.OpMessageList, storage.OpMessageGet, storage.OpMessageGetMany,
	storage.OpMessageDelete, storage.OpMessageDeleteMany, storage.OpMessagePop,
	storage.OpClaimCreate, storage.OpClaimGet, storage.OpClaimUpdate, storage.OpClaimDelete,
	"ping", "depth",
	storage.OpSubscriptionCreate, storage.OpSubscriptionGet, storage.OpSubscriptionList, storage.OpSubscriptionUpdate,
	storage.OpSubscriptionConfirm, storage.OpSubscriptionDelete, storage.OpSubscriptionPurge,
	storage.OpDeliveryLease, storage.OpDeliveryAck, storage.OpDeliveryRetry, storage.OpDeliveryFail, storage.OpDeliveryRelease,
	storage.OpDeliveryStats, storage.OpDeliveryPending,
}

var kinds = []storage.Kind{storage.Internal, storage.NotFound, storage.Conflict, storage.Invalid,
	storage.Forbidden, storage.TooLarge, storage.Unavailable, storage.Full}

// Buckets span a fast in-memory call (microseconds) to a Redis timeout.
var Buckets = []float64{0.00002, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// recorder holds one driver's pre-resolved duration children, so a call
// costs two clock reads and an observation, never a label lookup. Error
// counters are resolved at the first error of each op and kind instead:
// most pairs never fail, and a child costs about 750 bytes, which the 252
// pairs of every wrapped driver (each pool's too) would hold from the
// start (docs/benchmarks.md, idle RSS).
type recorder struct {
	name   string
	dur    [nOps]prometheus.Observer
	errVec *prometheus.CounterVec
	errs   [nOps][]atomic.Pointer[prometheus.Counter] // by kind
}

func (r *recorder) done(o op, start time.Time, err error) {
	r.dur[o].Observe(time.Since(start).Seconds())
	if err != nil {
		k := storage.KindOf(err)
		if int(k) < len(r.errs[o]) {
			r.errCounter(o, k).Inc()
		}
	}
}

// errCounter is the errors counter of op o and kind k, created on first use.
func (r *recorder) errCounter(o op, k storage.Kind) prometheus.Counter {
	slot := &r.errs[o][k]
	if c := slot.Load(); c != nil {
		return *c
	}
	// WithLabelValues returns the one child of these labels however many
	// callers race here, so storing any of them is right.
	c := r.errVec.WithLabelValues(r.name, opNames[o], k.String())
	slot.Store(&c)
	return c
}

// vecs registers (or finds already registered) the metric families.
func vecs(reg prometheus.Registerer) (*prometheus.HistogramVec, *prometheus.CounterVec, error) {
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_storage_op_duration_seconds",
		Help:    "Time spent in storage calls, by driver and operation.",
		Buckets: Buckets,
	}, []string{"driver", "op"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_storage_op_errors_total",
		Help: "Storage calls that returned an error, by driver, operation and error kind.",
	}, []string{"driver", "op", "kind"})
	if err := reg.Register(dur); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, nil, err
		}
		dur = are.ExistingCollector.(*prometheus.HistogramVec)
	}
	if err := reg.Register(errs); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, nil, err
		}
		errs = are.ExistingCollector.(*prometheus.CounterVec)
	}
	return dur, errs, nil
}

func newRecorder(name string, reg prometheus.Registerer) (*recorder, error) {
	dur, errs, err := vecs(reg)
	if err != nil {
		return nil, err
	}
	r := &recorder{name: name, errVec: errs}
	for o := op(0); o < nOps; o++ {
		r.dur[o] = dur.WithLabelValues(name, opNames[o])
		r.errs[o] = make([]atomic.Pointer[prometheus.Counter], len(kinds))
	}
	return r, nil
}
