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
	storage.Forbidden, storage.TooLarge, storage.Unavailable}

// Buckets span a fast in-memory call (microseconds) to a Redis timeout.
var Buckets = []float64{0.00002, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// recorder holds one driver's pre-resolved children, so a call costs two
// clock reads and an observation, never a label lookup.
type recorder struct {
	dur  [nOps]prometheus.Observer
	errs [nOps][]prometheus.Counter // by kind
}

func (r *recorder) done(o op, start time.Time, err error) {
	r.dur[o].Observe(time.Since(start).Seconds())
	if err != nil {
		k := storage.KindOf(err)
		if int(k) < len(r.errs[o]) {
			r.errs[o][k].Inc()
		}
	}
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
	r := &recorder{}
	for o := op(0); o < nOps; o++ {
		r.dur[o] = dur.WithLabelValues(name, opNames[o])
		r.errs[o] = make([]prometheus.Counter, len(kinds))
		for _, k := range kinds {
			r.errs[o][k] = errs.WithLabelValues(name, opNames[o], k.String())
		}
	}
	return r, nil
}
