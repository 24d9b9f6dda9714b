package registry

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/bulkhead-go/bulkhead"
	"github.com/prometheus/client_golang/prometheus"
)

// MetricsOptions chooses what [Registry.RegisterMetrics] exports. The zero
// value exports the gauges and counters under the bulkhead_ prefix, without
// histograms.
type MetricsOptions struct {
	// Resilience4jNames uses the prefix resilience4j_bulkhead_ instead of
	// bulkhead_, and adds Resilience4j's thread-pool gauges for pools, so
	// that dashboards built for Resilience4j's Micrometer metrics keep
	// working. See docs/metrics.md.
	Resilience4jNames bool
	// Histograms adds histograms of the time calls waited for a permit or
	// a worker (with an outcome label: permitted, rejected after waiting,
	// cancelled while waiting) and of the time they ran, fed by the
	// bulkheads' events. Off by default: with it on, every call builds an
	// event and reads the clock.
	Histograms bool
	// Buckets are the histograms' upper bounds in seconds, strictly
	// increasing; nil means prometheus.DefBuckets.
	Buckets []float64
}

// collector is a prometheus.Collector over a Registry. It reads every
// bulkhead's Stats at scrape time, so the gauges and counters cost nothing
// per call.
type collector struct {
	r        *Registry
	gauges   []metricDesc
	counters []metricDesc
	pool     []metricDesc // Resilience4j's thread-pool gauges

	wait, run *prometheus.HistogramVec
	mu        sync.Mutex                          // serialises changes to series
	series    atomic.Pointer[map[key]*histograms] // copy on write: read per event without a lock
}

// histograms are one bulkhead's histogram series.
type histograms struct {
	permitted, rejected, cancelled, run prometheus.Observer
}

type metricDesc struct {
	desc *prometheus.Desc
	typ  prometheus.ValueType
	val  func(s bulkhead.Stats) float64
}

var labels = []string{"name", "kind"}

func newCollector(r *Registry, opts MetricsOptions) (*collector, error) {
	c := &collector{r: r}
	prefix := "bulkhead_"
	if opts.Resilience4jNames {
		prefix = "resilience4j_bulkhead_"
	}
	m := func(t prometheus.ValueType, name, help string, val func(s bulkhead.Stats) float64) metricDesc {
		return metricDesc{prometheus.NewDesc(prefix+name, help, labels, nil), t, val}
	}
	g, k := prometheus.GaugeValue, prometheus.CounterValue
	c.gauges = []metricDesc{
		m(g, "available_concurrent_calls", "Calls that may start now: max allowed minus in flight, never below 0.",
			func(s bulkhead.Stats) float64 { return float64(s.AvailableConcurrentCalls) }),
		m(g, "max_allowed_concurrent_calls", "The limit in force: permits (semaphore) or workers (pool).",
			func(s bulkhead.Stats) float64 { return float64(s.MaxConcurrentCalls) }),
		m(g, "in_flight_calls", "Calls running now (pool: tasks on a worker).",
			func(s bulkhead.Stats) float64 { return float64(s.InFlight) }),
		m(g, "waiting_calls", "Callers waiting for a permit (semaphore).",
			func(s bulkhead.Stats) float64 { return float64(s.Waiting) }),
		m(g, "queue_depth", "Tasks waiting in the queue for a worker (pool).",
			func(s bulkhead.Stats) float64 { return float64(s.QueueDepth) }),
		m(g, "queue_capacity", "The queue's capacity (pool); 0 for a semaphore.",
			func(s bulkhead.Stats) float64 { return float64(s.QueueCapacity) }),
		m(k, "calls_permitted_total", "Calls that got a permit or a worker and ran.",
			func(s bulkhead.Stats) float64 { return float64(s.Permitted) }),
		m(k, "calls_rejected_total", "Calls refused because the bulkhead was full, at once or after waiting the maximum wait.",
			func(s bulkhead.Stats) float64 { return float64(s.Rejected) }),
		m(k, "calls_cancelled_total", "Calls that gave up while waiting or queued: context ended, future cancelled or pool closed.",
			func(s bulkhead.Stats) float64 { return float64(s.Cancelled) }),
		m(k, "calls_finished_total", "Permitted calls that completed, whatever their result.",
			func(s bulkhead.Stats) float64 { return float64(s.Finished) }),
		m(k, "calls_failed_total", "Finished calls that returned an error or panicked.",
			func(s bulkhead.Stats) float64 { return float64(s.Failed) }),
	}
	if opts.Resilience4jNames {
		c.pool = []metricDesc{
			m(g, "thread_pool_size", "Pool only, for Resilience4j dashboards: the number of workers allowed (a Go pool has no core/max growth).",
				func(s bulkhead.Stats) float64 { return float64(s.MaxConcurrentCalls) }),
			m(g, "max_thread_pool_size", "Pool only, for Resilience4j dashboards: MaxWorkers.",
				func(s bulkhead.Stats) float64 { return float64(s.MaxConcurrentCalls) }),
			m(g, "core_thread_pool_size", "Pool only, for Resilience4j dashboards: MaxWorkers (a Go pool has no core size).",
				func(s bulkhead.Stats) float64 { return float64(s.MaxConcurrentCalls) }),
			m(g, "active_thread_count", "Pool only, for Resilience4j dashboards: tasks running now.",
				func(s bulkhead.Stats) float64 { return float64(s.InFlight) }),
			m(g, "available_thread_count", "Pool only, for Resilience4j dashboards: workers free now.",
				func(s bulkhead.Stats) float64 { return float64(s.AvailableConcurrentCalls) }),
		}
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
	c.series.Store(&map[key]*histograms{})
	return c, nil
}

// observe feeds the histograms: one map lookup and one Observe per event,
// no lock and no allocation once the bulkhead's series exist.
func (c *collector) observe(e bulkhead.Event) {
	h := (*c.series.Load())[key{e.Kind, e.Name}]
	if h == nil {
		if h = c.add(key{e.Kind, e.Name}); h == nil {
			return
		}
	}
	switch e.Type {
	case bulkhead.EventPermitted:
		h.permitted.Observe(e.Wait.Seconds())
	case bulkhead.EventRejected:
		if fe, ok := e.Err.(*bulkhead.FullError); ok && fe.Waited {
			h.rejected.Observe(e.Wait.Seconds()) // refused at once: it did not wait
		}
	case bulkhead.EventCancelled:
		h.cancelled.Observe(e.Wait.Seconds())
	case bulkhead.EventFinished:
		if e.Run > 0 {
			h.run.Observe(e.Run.Seconds())
		}
	}
}

// add makes the series of a bulkhead in the registry; nil for one removed
// meanwhile, so that a late event cannot bring its series back.
func (c *collector) add(k key) *histograms {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := *c.series.Load()
	if h := cur[k]; h != nil {
		return h
	}
	c.r.mu.Lock()
	_, live := c.r.entries[k]
	c.r.mu.Unlock()
	if !live {
		return nil
	}
	kind := k.kind.String()
	h := &histograms{
		permitted: c.wait.WithLabelValues(k.name, kind, "permitted"),
		rejected:  c.wait.WithLabelValues(k.name, kind, "rejected"),
		cancelled: c.wait.WithLabelValues(k.name, kind, "cancelled"),
		run:       c.run.WithLabelValues(k.name, kind),
	}
	next := make(map[key]*histograms, len(cur)+1)
	for k2, v := range cur {
		next[k2] = v
	}
	next[k] = h
	c.series.Store(&next)
	return h
}

// removed deletes the series of a removed bulkhead.
func (c *collector) removed(ev EntryEvent) {
	if ev.Type != EntryRemoved {
		return
	}
	k := key{ev.Kind, ev.Name}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := *c.series.Load()
	if _, ok := cur[k]; !ok {
		return
	}
	next := make(map[key]*histograms, len(cur))
	for k2, v := range cur {
		if k2 != k {
			next[k2] = v
		}
	}
	c.series.Store(&next)
	kind := k.kind.String()
	for _, o := range []string{"permitted", "rejected", "cancelled"} {
		c.wait.DeleteLabelValues(k.name, kind, o)
	}
	c.run.DeleteLabelValues(k.name, kind)
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, ds := range [][]metricDesc{c.gauges, c.pool} {
		for _, d := range ds {
			ch <- d.desc
		}
	}
	if c.wait != nil {
		c.wait.Describe(ch)
		c.run.Describe(ch)
	}
}

// Collect implements prometheus.Collector: it reads every bulkhead's Stats,
// and sends the histograms' series.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range c.r.snapshot() {
		s := e.b.Stats()
		kind := e.kind.String()
		for _, d := range c.gauges {
			ch <- constMetric(d, s, e.name, kind)
		}
		if e.kind == bulkhead.Pool {
			for _, d := range c.pool {
				ch <- constMetric(d, s, e.name, kind)
			}
		}
	}
	if c.wait != nil {
		c.wait.Collect(ch)
		c.run.Collect(ch)
	}
}

// constMetric is prometheus.MustNewConstMetric without the panic: a label
// value it refuses makes the scrape report an error for that series only.
func constMetric(d metricDesc, s bulkhead.Stats, labels ...string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d.desc, d.typ, d.val(s), labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d.desc, err)
	}
	return m
}

// RegisterMetrics registers a prometheus.Collector over r on reg: every
// bulkhead's gauges and counters, read at scrape time (bulkheads created
// later appear, removed ones disappear), and with opts.Histograms the wait
// and run histograms. The returned function unregisters it and stops the
// histograms. docs/metrics.md lists every metric.
func (r *Registry) RegisterMetrics(reg prometheus.Registerer, opts MetricsOptions) (unregister func(), err error) {
	c, err := newCollector(r, opts)
	if err != nil {
		return nil, err
	}
	stop := func() {}
	if c.wait != nil {
		// Entry events first, so that a removal is seen before anything.
		unEntries := r.SubscribeEntries(c.removed)
		unCalls := r.Subscribe(c.observe)
		stop = func() { unCalls(); unEntries() }
	}
	if err := reg.Register(c); err != nil {
		stop()
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			reg.Unregister(c)
			stop()
		})
	}, nil
}
