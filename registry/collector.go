package registry

import (
	"sync"

	"github.com/bulkhead-go/bulkhead"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// MetricsOptions chooses what a [Collector] exports. The zero value exports
// the gauges and counters under the bulkhead_ prefix, without histograms.
type MetricsOptions struct {
	// Resilience4jNames uses the prefix resilience4j_bulkhead_ instead of
	// bulkhead_, and adds Resilience4j's thread-pool gauges for pools, so
	// that dashboards built for Resilience4j's Micrometer metrics keep
	// working. See docs/metrics.md.
	Resilience4jNames bool
	// Histograms adds histograms of the time calls waited for a permit or
	// a worker (with an outcome label: permitted, rejected after waiting,
	// cancelled while waiting) and of the time they ran, fed by the
	// bulkheads' events.
	// Off by default: with it on, every call builds an event and reads the
	// clock.
	Histograms bool
	// Buckets are the histograms' upper bounds in seconds; nil means
	// prometheus.DefBuckets.
	Buckets []float64
}

// Collector is a prometheus.Collector over a [Registry]. It reads every
// bulkhead's Stats at scrape time, so bulkheads added later appear and
// removed ones disappear, and the gauges and counters cost nothing per call.
// Register it on a prometheus.Registerer of your choice; it registers
// nothing by itself.
type Collector struct {
	r      *Registry
	prefix string
	r4j    bool

	gauges   []gaugeDesc
	counters []counterDesc
	pool     []gaugeDesc // Resilience4j's thread-pool gauges

	wait, run *prometheus.HistogramVec
	stop      func()
	stopOnce  sync.Once
}

type gaugeDesc struct {
	desc *prometheus.Desc
	val  func(s bulkhead.Stats) int
}

type counterDesc struct {
	desc *prometheus.Desc
	val  func(s bulkhead.Stats) uint64
}

var labels = []string{"name", "kind"}

// NewCollector returns a collector over r. With opts.Histograms it
// subscribes to r's events until [Collector.Close].
func NewCollector(r *Registry, opts MetricsOptions) *Collector {
	c := &Collector{r: r, prefix: "bulkhead_", r4j: opts.Resilience4jNames, stop: func() {}}
	if opts.Resilience4jNames {
		c.prefix = "resilience4j_bulkhead_"
	}
	g := func(name, help string, val func(s bulkhead.Stats) int) gaugeDesc {
		return gaugeDesc{prometheus.NewDesc(c.prefix+name, help, labels, nil), val}
	}
	k := func(name, help string, val func(s bulkhead.Stats) uint64) counterDesc {
		return counterDesc{prometheus.NewDesc(c.prefix+name, help, labels, nil), val}
	}
	c.gauges = []gaugeDesc{
		g("available_concurrent_calls", "Calls that may start now: max allowed minus in flight, never below 0.",
			func(s bulkhead.Stats) int { return s.AvailableConcurrentCalls }),
		g("max_allowed_concurrent_calls", "The limit in force: permits (semaphore) or workers (pool).",
			func(s bulkhead.Stats) int { return s.MaxConcurrentCalls }),
		g("in_flight_calls", "Calls running now (pool: tasks on a worker).",
			func(s bulkhead.Stats) int { return s.InFlight }),
		g("waiting_calls", "Callers waiting for a permit (semaphore).",
			func(s bulkhead.Stats) int { return s.Waiting }),
		g("queue_depth", "Tasks waiting in the queue for a worker (pool).",
			func(s bulkhead.Stats) int { return s.QueueDepth }),
		g("queue_capacity", "The queue's capacity (pool); 0 for a semaphore.",
			func(s bulkhead.Stats) int { return s.QueueCapacity }),
	}
	c.counters = []counterDesc{
		k("calls_permitted_total", "Calls that got a permit or a worker and ran.",
			func(s bulkhead.Stats) uint64 { return s.Permitted }),
		k("calls_rejected_total", "Calls refused because the bulkhead was full, at once or after waiting the maximum wait.",
			func(s bulkhead.Stats) uint64 { return s.Rejected }),
		k("calls_cancelled_total", "Calls that gave up while waiting or queued: context ended, future cancelled or pool closed.",
			func(s bulkhead.Stats) uint64 { return s.Cancelled }),
		k("calls_finished_total", "Permitted calls that completed, whatever their result.",
			func(s bulkhead.Stats) uint64 { return s.Finished }),
		k("calls_failed_total", "Finished calls that returned an error or panicked.",
			func(s bulkhead.Stats) uint64 { return s.Failed }),
	}
	if c.r4j {
		c.pool = []gaugeDesc{
			g("thread_pool_size", "Pool only, for Resilience4j dashboards: the number of workers allowed (a Go pool has no core/max growth).",
				func(s bulkhead.Stats) int { return s.MaxConcurrentCalls }),
			g("max_thread_pool_size", "Pool only, for Resilience4j dashboards: MaxWorkers.",
				func(s bulkhead.Stats) int { return s.MaxConcurrentCalls }),
			g("core_thread_pool_size", "Pool only, for Resilience4j dashboards: MaxWorkers (a Go pool has no core size).",
				func(s bulkhead.Stats) int { return s.MaxConcurrentCalls }),
			g("active_thread_count", "Pool only, for Resilience4j dashboards: tasks running now.",
				func(s bulkhead.Stats) int { return s.InFlight }),
			g("available_thread_count", "Pool only, for Resilience4j dashboards: workers free now.",
				func(s bulkhead.Stats) int { return s.AvailableConcurrentCalls }),
		}
	}
	if opts.Histograms {
		buckets := opts.Buckets
		if buckets == nil {
			buckets = prometheus.DefBuckets
		}
		c.wait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: c.prefix + "wait_duration_seconds",
			Help: "How long calls waited for a permit (semaphore) or in the queue (pool), by outcome: " +
				"permitted, rejected (after waiting the maximum wait) or cancelled (gave up while waiting).",
			Buckets: buckets,
		}, waitLabels)
		c.run = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    c.prefix + "run_duration_seconds",
			Help:    "How long finished calls ran, for calls the bulkhead ran itself (Do, Execute, Transport, pool tasks).",
			Buckets: buckets,
		}, labels)
		// Removed bulkheads' series are deleted by Collect, which keeps
		// only those of the bulkheads in the registry: deleting them on
		// EntryRemoved would let an event still in flight bring them back.
		c.stop = r.Subscribe(c.observe)
	}
	return c
}

var waitLabels = []string{"name", "kind", "outcome"}

func (c *Collector) observe(e bulkhead.Event) {
	var h prometheus.Observer
	var err error
	var d float64
	switch e.Type {
	case bulkhead.EventPermitted:
		h, err = c.wait.GetMetricWithLabelValues(e.Name, e.Kind.String(), "permitted")
		d = e.Wait.Seconds()
	case bulkhead.EventRejected:
		if fe, ok := e.Err.(*bulkhead.FullError); !ok || !fe.Waited {
			return // refused at once: it did not wait
		}
		h, err = c.wait.GetMetricWithLabelValues(e.Name, e.Kind.String(), "rejected")
		d = e.Wait.Seconds()
	case bulkhead.EventCancelled:
		h, err = c.wait.GetMetricWithLabelValues(e.Name, e.Kind.String(), "cancelled")
		d = e.Wait.Seconds()
	case bulkhead.EventFinished:
		if e.Run <= 0 {
			return
		}
		h, err = c.run.GetMetricWithLabelValues(e.Name, e.Kind.String())
		d = e.Run.Seconds()
	default:
		return
	}
	if err == nil {
		h.Observe(d)
	}
}

// Close stops feeding the histograms. The collector still reports what it
// has. It is a no-op without histograms.
func (c *Collector) Close() { c.stopOnce.Do(c.stop) }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range c.gauges {
		ch <- g.desc
	}
	for _, k := range c.counters {
		ch <- k.desc
	}
	for _, g := range c.pool {
		ch <- g.desc
	}
	if c.wait != nil {
		c.wait.Describe(ch)
		c.run.Describe(ch)
	}
}

// Collect implements prometheus.Collector: it reads every bulkhead's Stats.
// Of the histograms it emits the series of the bulkheads in the registry
// now, and deletes the others (those of removed bulkheads).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	es := c.r.snapshot()
	for _, e := range es {
		s := e.instance().Stats()
		kind := e.kind.String()
		for _, g := range c.gauges {
			ch <- constMetric(g.desc, prometheus.GaugeValue, float64(g.val(s)), e.name, kind)
		}
		for _, k := range c.counters {
			ch <- constMetric(k.desc, prometheus.CounterValue, float64(k.val(s)), e.name, kind)
		}
		if e.kind == bulkhead.Pool {
			for _, g := range c.pool {
				ch <- constMetric(g.desc, prometheus.GaugeValue, float64(g.val(s)), e.name, kind)
			}
		}
	}
	if c.wait != nil {
		live := make(map[seriesKey]bool, len(es))
		for _, e := range es {
			live[seriesKey{e.name, e.kind.String()}] = true
		}
		c.collectLive(ch, live, c.wait)
		c.collectLive(ch, live, c.run)
	}
}

type seriesKey struct{ name, kind string }

// collectLive sends h's series of live bulkheads to ch and deletes the rest.
func (c *Collector) collectLive(ch chan<- prometheus.Metric, live map[seriesKey]bool, h *prometheus.HistogramVec) {
	all := make(chan prometheus.Metric)
	go func() {
		h.Collect(all)
		close(all)
	}()
	var stale []seriesKey
	for m := range all {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			ch <- prometheus.NewInvalidMetric(m.Desc(), err)
			continue
		}
		var k seriesKey
		for _, l := range d.GetLabel() {
			switch l.GetName() {
			case "name":
				k.name = l.GetValue()
			case "kind":
				k.kind = l.GetValue()
			}
		}
		if live[k] {
			ch <- m
		} else {
			stale = append(stale, k)
		}
	}
	for _, k := range stale {
		h.DeletePartialMatch(prometheus.Labels{"name": k.name, "kind": k.kind})
	}
}

// constMetric is prometheus.MustNewConstMetric without the panic: a label
// value it refuses makes the scrape report an error for that series only.
func constMetric(desc *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(desc, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	return m
}

// RegisterMetrics creates a [Collector] over r and registers it on reg. The
// returned function unregisters it and stops its histograms.
func (r *Registry) RegisterMetrics(reg prometheus.Registerer, opts MetricsOptions) (unregister func(), err error) {
	c := NewCollector(r, opts)
	if err := reg.Register(c); err != nil {
		c.Close()
		return nil, err
	}
	return func() {
		reg.Unregister(c)
		c.Close()
	}, nil
}
