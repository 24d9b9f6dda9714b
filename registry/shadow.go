package registry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkhead-go/bulkhead"
)

// shadowed is a bulkhead with a shadow limit or observe mode
// (*semaphore.Bulkhead, *pool.Bulkhead).
type shadowed interface {
	ShadowStats() (bulkhead.ShadowStats, bool)
}

// shadowDescs are the series of a bulkhead's ShadowStats, labelled with its
// name and kind only, sent for shadowed and observe-only bulkheads (the
// queue's for pools only).
type shadowDescs struct{ limit, inUse, queued, qcap, observe, reject, wait, timeOut *prometheus.Desc }

func newShadowDescs(prefix string) shadowDescs {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prefix+"shadow_"+name, help, labels, nil)
	}
	return shadowDescs{
		limit:   d("max_allowed_concurrent_calls", "The shadow's limit, evaluated and never enforced (with observe: the configured limit)."),
		inUse:   d("in_flight_calls", "Shadow permits (a pool's: shadow workers) held now: calls the shadow would have let run that are still running."),
		queued:  d("queue_depth", "A pool's shadow queue slots held now: tasks the shadow would have kept queued."),
		qcap:    d("queue_capacity", "A pool's shadow queue capacity."),
		observe: d("observe", "1 for a bulkhead that enforces nothing and evaluates its own limit as a shadow, else 0."),
		reject:  d("would_reject_total", "Calls that found the shadow full and would have been refused at once (a shadow without waiting)."),
		wait:    d("would_wait_total", "Calls that found the shadow full and would have had to wait for it."),
		timeOut: d("would_time_out_total", "Calls that waited for their permit longer than the shadow's maximum wait."),
	}
}

func (sd shadowDescs) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sd.limit, sd.inUse, sd.queued, sd.qcap, sd.observe, sd.reject, sd.wait, sd.timeOut} {
		ch <- d
	}
}

// collect sends b's shadow series, if b has a shadow.
func (sd shadowDescs) collect(ch chan<- prometheus.Metric, b bulkhead.Instance, name, kind string) {
	s, ok := b.(shadowed)
	if !ok {
		return
	}
	ss, ok := s.ShadowStats()
	if !ok {
		return
	}
	g, k := prometheus.GaugeValue, prometheus.CounterValue
	for _, m := range []struct {
		d *prometheus.Desc
		t prometheus.ValueType
		v float64
	}{{sd.limit, g, float64(ss.Limit)}, {sd.inUse, g, float64(ss.InUse)}, {sd.observe, g, one(ss.Observe)},
		{sd.reject, k, float64(ss.WouldReject)}, {sd.wait, k, float64(ss.WouldWait)}, {sd.timeOut, k, float64(ss.WouldTimeOut)}} {
		ch <- prometheus.MustNewConstMetric(m.d, m.t, m.v, name, kind)
	}
	if kind == bulkhead.Pool.String() {
		ch <- prometheus.MustNewConstMetric(sd.queued, g, float64(ss.QueueDepth), name, kind)
		ch <- prometheus.MustNewConstMetric(sd.qcap, g, float64(ss.QueueCapacity), name, kind)
	}
}

// statusShadow is the status page's view of ShadowStats.
type statusShadow struct {
	Limit int `json:"limit"`
	InUse int `json:"inUse"`
	// A pool's shadow queue.
	QueueDepth    int    `json:"queueDepth,omitempty"`
	QueueCapacity int    `json:"queueCapacity,omitempty"`
	WouldReject   uint64 `json:"wouldReject"`
	WouldWait     uint64 `json:"wouldWait"`
	WouldTimeOut  uint64 `json:"wouldTimeOut"`
	Observe       bool   `json:"observe,omitempty"`
}

// shadowStatus returns b's shadow for the status page, or nil.
func shadowStatus(b bulkhead.Instance) *statusShadow {
	s, ok := b.(shadowed)
	if !ok {
		return nil
	}
	ss, ok := s.ShadowStats()
	if !ok {
		return nil
	}
	return &statusShadow{Limit: ss.Limit, InUse: ss.InUse, QueueDepth: ss.QueueDepth, QueueCapacity: ss.QueueCapacity,
		WouldReject: ss.WouldReject, WouldWait: ss.WouldWait, WouldTimeOut: ss.WouldTimeOut, Observe: ss.Observe}
}
