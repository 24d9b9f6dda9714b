package registry

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/bulkhead-go/bulkhead"
	"github.com/prometheus/client_golang/prometheus"
)

// MetricsOptions chooses what [Registry.RegisterMetrics] exports; the zero
// value exports the gauges and counters named bulkhead_*, no histograms.
type MetricsOptions struct {
	// Resilience4jNames exports the series as Resilience4j's Micrometer
	// binders name them, for their dashboards (docs/metrics.md).
	Resilience4jNames bool
	// Histograms adds histograms of the time calls waited (by outcome) and
	// ran. With it on, every call builds an event and reads the clock.
	Histograms bool
	// Buckets are the histograms' upper bounds in seconds, strictly
	// increasing; nil means prometheus.DefBuckets.
	Buckets []float64
}

// collector is a prometheus.Collector over a Registry. It reads Stats at
// scrape time, so the gauges and counters cost nothing per call.
type collector struct {
	r       *Registry
	metrics []metricDesc        // every series of one bulkhead but those by reason
	fixed   []bulkhead.Instance // without r: the bulkheads to read
	reasons *prometheus.Desc    // rejections_total{name,kind,reason}
	keyed   *prometheus.Desc    // keyed_rejections_total{name,kind,reason}

	wait, run *prometheus.HistogramVec
	sinks     map[*entry]*sink // with histograms: the bulkheads that feed them (r.mu)
}

// reloadsDesc counts what Registry.Follow did, once it ran.
var reloadsDesc = prometheus.NewDesc("bulkhead_config_reloads_total",
	"Configurations Registry.Follow read, by result: applied, or refused (the running configuration stayed).", []string{"result"}, nil)

type histograms struct {
	permitted, rejected, cancelled, run prometheus.Observer
}

// sink feeds one collector's histograms with one bulkhead's events, with no
// lookup, no lock and no allocation.
type sink struct {
	c      *collector
	h      atomic.Pointer[histograms] // nil until the bulkhead's first event
	cancel func()
}

// metricDesc is one series of a bulkhead, read from its Stats (val), its
// KeyStats (key, keyed only) or its ShadowStats (shadow, shadowed only).
type metricDesc struct {
	desc   *prometheus.Desc
	typ    prometheus.ValueType
	val    func(s bulkhead.Stats) float64
	key    func(s bulkhead.KeyStats) float64
	shadow func(s bulkhead.ShadowStats) float64
	only   bulkhead.Kind // the one kind it is emitted for; 0: both
}

// shadowOf returns b's ShadowStats, if b has a shadow limit or observe mode.
func shadowOf(b bulkhead.Instance) (bulkhead.ShadowStats, bool) {
	if s, ok := b.(interface {
		ShadowStats() (bulkhead.ShadowStats, bool)
	}); ok {
		return s.ShadowStats()
	}
	return bulkhead.ShadowStats{}, false
}

var labels = []string{"name", "kind"}

func newCollector(r *Registry, opts MetricsOptions) (*collector, error) {
	c := &collector{r: r}
	// Under Resilience4jNames, the series Micrometer's binders emit for one
	// kind only are emitted for it only: a semaphore and a pool that share a
	// name then give dashboards that sum by name one series each, not two.
	prefix := "bulkhead_"
	var semaphoreOnly, poolOnly bulkhead.Kind // 0: both kinds
	if opts.Resilience4jNames {
		prefix, semaphoreOnly, poolOnly = "resilience4j_bulkhead_", bulkhead.Semaphore, bulkhead.Pool
	}
	m := func(t prometheus.ValueType, only bulkhead.Kind, name, help string, val func(s bulkhead.Stats) float64) metricDesc {
		return metricDesc{desc: prometheus.NewDesc(prefix+name, help, labels, nil), typ: t, only: only, val: val}
	}
	km := func(t prometheus.ValueType, name, help string, key func(s bulkhead.KeyStats) float64) metricDesc {
		return metricDesc{desc: prometheus.NewDesc(prefix+name, help, labels, nil), typ: t, key: key}
	}
	sm := func(t prometheus.ValueType, only bulkhead.Kind, name, help string, shadow func(s bulkhead.ShadowStats) float64) metricDesc {
		return metricDesc{desc: prometheus.NewDesc(prefix+"shadow_"+name, help, labels, nil), typ: t, only: only, shadow: shadow}
	}
	g, k := prometheus.GaugeValue, prometheus.CounterValue
	c.metrics = []metricDesc{
		m(g, semaphoreOnly, "available_concurrent_calls", "Calls that may start now: max allowed minus in flight, never below 0.", func(s bulkhead.Stats) float64 { return float64(s.AvailableConcurrentCalls) }),
		m(g, semaphoreOnly, "max_allowed_concurrent_calls", "The limit in force: permits (semaphore) or workers (pool).", func(s bulkhead.Stats) float64 { return float64(s.MaxConcurrentCalls) }),
		m(g, 0, "in_flight_calls", "Calls running now (pool: tasks on a worker).", func(s bulkhead.Stats) float64 { return float64(s.InFlight) }),
		m(g, 0, "waiting_calls", "Callers waiting: for a permit (semaphore) or for room in the queue (pool Go callers).", func(s bulkhead.Stats) float64 { return float64(s.Waiting) }),
		m(g, poolOnly, "queue_depth", "Tasks waiting in the queue for a worker (pool).", func(s bulkhead.Stats) float64 { return float64(s.QueueDepth) }),
		m(g, poolOnly, "queue_capacity", "The queue's capacity (pool); 0 for a semaphore.", func(s bulkhead.Stats) float64 { return float64(s.QueueCapacity) }),
		m(g, 0, "codel_overloaded", "1 while CoDel finds the line of waiters overloaded (its shortest wait above the target for an interval), else 0.", func(s bulkhead.Stats) float64 { return one(s.Overloaded) }),
		m(g, 0, "queue_lifo", "1 while the line of waiters serves the newest first (LIFO, or adaptive LIFO switched to it), else 0.", func(s bulkhead.Stats) float64 { return one(s.LIFO) }),
		m(k, 0, "calls_permitted_total", "Calls that got a permit or a worker and ran.", func(s bulkhead.Stats) float64 { return float64(s.Permitted) }),
		m(k, 0, "calls_rejected_total", "Calls refused because the bulkhead was full, at once or after waiting the maximum wait.", func(s bulkhead.Stats) float64 { return float64(s.Rejected) }),
		m(k, 0, "calls_cancelled_total", "Calls that gave up while waiting or queued: context ended, future cancelled or pool closed.", func(s bulkhead.Stats) float64 { return float64(s.Cancelled) }),
		m(k, 0, "calls_finished_total", "Permitted calls that completed, whatever their result.", func(s bulkhead.Stats) float64 { return float64(s.Finished) }),
		m(k, 0, "calls_failed_total", "Finished calls that returned an error or panicked.", func(s bulkhead.Stats) float64 { return float64(s.Failed) }),
		km(g, "active_keys", "Keys of a keyed bulkhead that hold or wait for capacity now.", func(s bulkhead.KeyStats) float64 { return float64(s.ActiveKeys) }),
		km(g, "idle_keys", "Entries of idle keys a keyed bulkhead keeps for reuse.", func(s bulkhead.KeyStats) float64 { return float64(s.IdleKeys) }),
		km(k, "keys_evicted_total", "Entries of idle keys a keyed bulkhead removed from its cache.", func(s bulkhead.KeyStats) float64 { return float64(s.Evicted) }),
		sm(g, 0, "max_allowed_concurrent_calls", "The shadow's limit, evaluated and never enforced (with observe: the configured limit).", func(s bulkhead.ShadowStats) float64 { return float64(s.Limit) }),
		sm(g, 0, "in_flight_calls", "Shadow permits (a pool's: shadow workers) held now: calls the shadow would have let run that are still running.", func(s bulkhead.ShadowStats) float64 { return float64(s.InUse) }),
		sm(g, bulkhead.Pool, "queue_depth", "A pool's shadow queue slots held now: tasks the shadow would have kept queued.", func(s bulkhead.ShadowStats) float64 { return float64(s.QueueDepth) }),
		sm(g, bulkhead.Pool, "queue_capacity", "A pool's shadow queue capacity.", func(s bulkhead.ShadowStats) float64 { return float64(s.QueueCapacity) }),
		sm(g, 0, "observe", "1 for a bulkhead that enforces nothing and evaluates its own limit as a shadow, else 0.", func(s bulkhead.ShadowStats) float64 { return one(s.Observe) }),
		sm(k, 0, "would_reject_total", "Calls that found the shadow full and would have been refused at once (a shadow without waiting).", func(s bulkhead.ShadowStats) float64 { return float64(s.WouldReject) }),
		sm(k, 0, "would_wait_total", "Calls that found the shadow full and would have had to wait for it.", func(s bulkhead.ShadowStats) float64 { return float64(s.WouldWait) }),
		sm(k, 0, "would_time_out_total", "Calls that waited for their permit longer than the shadow's maximum wait.", func(s bulkhead.ShadowStats) float64 { return float64(s.WouldTimeOut) }),
	}
	c.keyed = prometheus.NewDesc(prefix+"keyed_rejections_total",
		"Calls a keyed bulkhead refused, by reason: key (its key's limit), total (the shared total) or keys (MaxActiveKeys).", []string{"name", "kind", "reason"}, nil)
	c.reasons = prometheus.NewDesc(prefix+"rejections_total",
		"Calls refused, by reason (full, timeout, waiters, deadline, codel, key, total, keys, priority, displaced); "+
			"they add up to calls_rejected_total.", []string{"name", "kind", "reason"}, nil)
	if opts.Resilience4jNames {
		c.metrics = append(c.metrics,
			m(g, bulkhead.Pool, "thread_pool_size", "Pool only, for Resilience4j dashboards: the number of workers allowed (a Go pool has no core/max growth).", func(s bulkhead.Stats) float64 { return float64(s.MaxConcurrentCalls) }),
			m(g, bulkhead.Pool, "max_thread_pool_size", "Pool only, for Resilience4j dashboards: MaxWorkers.", func(s bulkhead.Stats) float64 { return float64(s.MaxConcurrentCalls) }),
			m(g, bulkhead.Pool, "core_thread_pool_size", "Pool only, for Resilience4j dashboards: MaxWorkers (a Go pool has no core size).", func(s bulkhead.Stats) float64 { return float64(s.MaxConcurrentCalls) }),
			m(g, bulkhead.Pool, "active_thread_count", "Pool only, for Resilience4j dashboards: tasks running now.", func(s bulkhead.Stats) float64 { return float64(s.InFlight) }),
			m(g, bulkhead.Pool, "available_thread_count", "Pool only, for Resilience4j dashboards: workers free now.", func(s bulkhead.Stats) float64 { return float64(s.AvailableConcurrentCalls) }))
	}
	if !opts.Histograms {
		return c, nil
	}
	buckets := opts.Buckets
	if buckets == nil {
		buckets = prometheus.DefBuckets
	}
	for i := 1; i < len(buckets); i++ {
		if !(buckets[i] > buckets[i-1]) {
			return nil, fmt.Errorf("registry: MetricsOptions.Buckets must be strictly increasing, got %v after %v at index %d", buckets[i], buckets[i-1], i)
		}
	}
	c.wait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: prefix + "wait_duration_seconds",
		Help: "How long calls waited for a permit (semaphore) or in the queue (pool), by outcome: " +
			"permitted, rejected (after waiting the maximum wait) or cancelled (gave up while waiting).",
		Buckets: buckets,
	}, []string{"name", "kind", "outcome"})
	c.run = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    prefix + "run_duration_seconds",
		Help:    "How long finished calls ran, for calls the bulkhead ran itself (Do, Execute, Transport, pool tasks).",
		Buckets: buckets,
	}, labels)
	c.sinks = map[*entry]*sink{}
	return c, nil
}

func (s *sink) observe(e *entry, ev *bulkhead.Event) {
	h := s.h.Load()
	if h == nil {
		if h = s.c.series(e, s); h == nil {
			return
		}
	}
	switch ev.Type {
	case bulkhead.EventPermitted:
		h.permitted.Observe(ev.Wait.Seconds())
	case bulkhead.EventRejected:
		if fe, ok := ev.Err.(*bulkhead.FullError); ok && fe.Waited {
			h.rejected.Observe(ev.Wait.Seconds()) // refused at once: it did not wait
		}
	case bulkhead.EventCancelled:
		h.cancelled.Observe(ev.Wait.Seconds())
	case bulkhead.EventFinished:
		if ev.Run > 0 {
			h.run.Observe(ev.Run.Seconds())
		}
	}
}

// series makes the series of e's bulkhead for s, on its first event; nil
// once s is unwatched, so that a late event cannot bring them back.
func (c *collector) series(e *entry, s *sink) *histograms {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	if h := s.h.Load(); h != nil {
		return h
	}
	if c.sinks[e] != s {
		return nil
	}
	kind := e.kind.String()
	h := &histograms{
		permitted: c.wait.WithLabelValues(e.name, kind, "permitted"),
		rejected:  c.wait.WithLabelValues(e.name, kind, "rejected"),
		cancelled: c.wait.WithLabelValues(e.name, kind, "cancelled"),
		run:       c.run.WithLabelValues(e.name, kind),
	}
	s.h.Store(h)
	return h
}

// watch starts feeding c's histograms with e's events. r.mu must be held.
func (c *collector) watch(e *entry) {
	s := &sink{c: c}
	s.cancel = e.hists.Subscribe(func(ev bulkhead.Event) { s.observe(e, &ev) })
	c.sinks[e] = s
}

// unwatch stops it and deletes e's series. r.mu must be held.
func (c *collector) unwatch(e *entry) {
	c.sinks[e].cancel()
	delete(c.sinks, e)
	l := prometheus.Labels{"name": e.name, "kind": e.kind.String()}
	c.wait.DeletePartialMatch(l)
	c.run.DeletePartialMatch(l)
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.metrics {
		ch <- d.desc
	}
	ch <- reloadsDesc
	ch <- c.reasons
	ch <- c.keyed
	if c.wait != nil {
		c.wait.Describe(ch)
		c.run.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	bs := c.fixed
	if c.r != nil {
		bs = c.r.Instances()
	}
	for _, b := range bs {
		s, name := b.Stats(), b.Name()
		kind := s.Kind.String()
		by := s.RejectedBy
		k, keyed := b.(bulkhead.KeyedInstance)
		var ks bulkhead.KeyStats
		if keyed {
			ks = k.KeyStats()
			// A keyed bulkhead counts its reasons in KeyStats.
			by[bulkhead.ReasonKey], by[bulkhead.ReasonTotal], by[bulkhead.ReasonKeys] = ks.RejectedKey, ks.RejectedTotal, ks.RejectedKeys
			for _, r := range []bulkhead.Reason{bulkhead.ReasonKey, bulkhead.ReasonTotal, bulkhead.ReasonKeys} {
				ch <- prometheus.MustNewConstMetric(c.keyed, prometheus.CounterValue, float64(by[r]), name, kind, r.String())
			}
		}
		ss, shadowed := shadowOf(b)
		for _, d := range c.metrics { // label values: names are valid UTF-8 (every New checks)
			switch {
			case d.only != 0 && d.only != s.Kind:
			case d.key != nil && keyed:
				ch <- prometheus.MustNewConstMetric(d.desc, d.typ, d.key(ks), name, kind)
			case d.shadow != nil && shadowed:
				ch <- prometheus.MustNewConstMetric(d.desc, d.typ, d.shadow(ss), name, kind)
			case d.val != nil:
				ch <- prometheus.MustNewConstMetric(d.desc, d.typ, d.val(s), name, kind)
			}
		}
		for _, r := range bulkhead.Reasons {
			ch <- prometheus.MustNewConstMetric(c.reasons, prometheus.CounterValue, float64(by[r]), name, kind, r.String())
		}
	}
	if c.r == nil {
		return
	}
	if st := c.r.reloadStatus(); st != nil {
		ch <- prometheus.MustNewConstMetric(reloadsDesc, prometheus.CounterValue, float64(st.Applied), "applied")
		ch <- prometheus.MustNewConstMetric(reloadsDesc, prometheus.CounterValue, float64(st.Refused), "refused")
	}
	if c.wait != nil {
		c.wait.Collect(ch)
		c.run.Collect(ch)
	}
}

// RegisterMetrics registers on reg a prometheus.Collector over every
// bulkhead of r, labelled with name and kind (docs/metrics.md); unregister
// undoes it. Two registries on one prometheus.Registry need a label each
// (prometheus.WrapRegistererWith).
func (r *Registry) RegisterMetrics(reg prometheus.Registerer, opts MetricsOptions) (unregister func(), err error) {
	if reg == nil {
		panic("registry: RegisterMetrics called with a nil prometheus.Registerer")
	}
	c, err := newCollector(r, opts)
	if err != nil {
		return nil, err
	}
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("registry: RegisterMetrics: %w (is another Registry's collector registered there? "+
			"register each through prometheus.WrapRegistererWith with a label that tells them apart)", err)
	}
	if c.wait != nil { // every bulkhead, present and future, feeds c's histograms
		r.mu.Lock()
		r.collectors = append(r.collectors, c)
		for _, e := range r.entries {
			c.watch(e)
		}
		r.retainLocked()
		r.mu.Unlock()
	}
	return sync.OnceFunc(func() {
		reg.Unregister(c)
		if c.wait != nil {
			r.mu.Lock()
			r.collectors = slices.DeleteFunc(r.collectors, func(x *collector) bool { return x == c })
			for e := range c.sinks {
				c.unwatch(e)
			}
			r.releaseLocked()
			r.mu.Unlock()
		}
	}), nil
}

func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
