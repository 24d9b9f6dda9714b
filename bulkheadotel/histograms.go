package bulkheadotel

import (
	"context"

	"github.com/bulkhead-go/bulkhead"
	"go.opentelemetry.io/otel/metric"
)

// histograms records the wait and run times that events carry.
type histograms struct {
	wait, run metric.Float64Histogram
	cache     *attrCache
}

func newHistograms(m metric.Meter, buckets []float64, cache *attrCache) (*histograms, error) {
	if buckets == nil {
		buckets = defaultBuckets
	}
	wait, err := m.Float64Histogram("bulkhead.call.time_in_queue",
		metric.WithDescription("How long calls waited for a permit (semaphore) or in the queue (pool), by result: "+
			"permitted, rejected (after waiting the maximum wait) or cancelled (gave up while waiting)."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(buckets...))
	if err != nil {
		return nil, err
	}
	run, err := m.Float64Histogram("bulkhead.call.duration",
		metric.WithDescription("How long finished calls ran, for calls the bulkhead timed "+
			"(Do, Execute, permits' Release, pool tasks)."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(buckets...))
	if err != nil {
		return nil, err
	}
	return &histograms{wait: wait, run: run, cache: cache}, nil
}

// observe records one event, like the Prometheus collector's histograms: a
// call refused at once did not wait and is not recorded.
func (h *histograms) observe(e bulkhead.Event) {
	hist, r, d := h.wait, none, e.Wait
	switch e.Type {
	case bulkhead.EventPermitted:
		r = permitted
	case bulkhead.EventRejected:
		if fe, ok := e.Err.(*bulkhead.FullError); !ok || !fe.Waited {
			return
		}
		r = rejected
	case bulkhead.EventCancelled:
		r = cancelled
	case bulkhead.EventFinished:
		if e.Run <= 0 {
			return
		}
		hist, d = h.run, e.Run
	default:
		return
	}
	h.cache.mu.Lock()
	opt := h.cache.get(key{e.Kind, e.Name})[r]
	h.cache.mu.Unlock()
	hist.Record(context.Background(), d.Seconds(), opt)
}
