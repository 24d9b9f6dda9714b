package registry

import (
	"fmt"

	"github.com/bulkhead-go/bulkhead"
	"github.com/prometheus/client_golang/prometheus"
)

// KeyedCollector returns a prometheus.Collector over keyed bulkheads (such
// as semaphore.Keyed) made in code, read at scrape time: the gauges and
// counters that RegisterMetrics exports for every bulkhead, of their totals
// over all keys, and the key counts: bulkhead_active_keys,
// bulkhead_idle_keys, bulkhead_keys_evicted_total and
// bulkhead_keyed_rejections_total with a reason label ("key", "total",
// "keys"). No series has a key label: keys are often user ids. Register it
// beside RegisterMetrics' collector on one prometheus.Registry; names must
// differ from the registry's bulkheads'. Histograms are not offered for
// keyed bulkheads: opts.Histograms is an error.
func KeyedCollector(opts MetricsOptions, ks ...bulkhead.KeyedInstance) (prometheus.Collector, error) {
	if opts.Histograms {
		return nil, fmt.Errorf("registry: KeyedCollector: MetricsOptions.Histograms is not supported for keyed bulkheads")
	}
	c, err := newCollector(nil, opts)
	if err != nil {
		return nil, err
	}
	for i, k := range ks {
		if k == nil {
			return nil, fmt.Errorf("registry: KeyedCollector: keyed bulkhead %d is nil", i)
		}
	}
	prefix := "bulkhead_"
	if opts.Resilience4jNames {
		prefix = "resilience4j_bulkhead_"
	}
	d := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc(prefix+name, help, append([]string{"name", "kind"}, extra...), nil)
	}
	return &keyedCollector{c: c, ks: ks,
		active:   d("active_keys", "Keys of a keyed bulkhead that hold or wait for capacity now."),
		idle:     d("idle_keys", "Entries of idle keys a keyed bulkhead keeps for reuse."),
		evicted:  d("keys_evicted_total", "Entries of idle keys a keyed bulkhead removed from its cache."),
		rejected: d("keyed_rejections_total", "Calls a keyed bulkhead refused, by reason: key (its key's limit), total (the shared total) or keys (MaxActiveKeys).", "reason"),
	}, nil
}

type keyedCollector struct {
	c                               *collector
	ks                              []bulkhead.KeyedInstance
	active, idle, evicted, rejected *prometheus.Desc
}

// Describe sends nothing: the collector is unchecked, so that its series
// may share names with RegisterMetrics' on one prometheus.Registry.
func (kc *keyedCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (kc *keyedCollector) Collect(ch chan<- prometheus.Metric) {
	for _, k := range kc.ks {
		s, ks := k.Stats(), k.KeyStats()
		name, kind := s.Name, s.Kind.String()
		for _, d := range kc.c.gauges {
			ch <- constMetric(d, s, name, kind)
		}
		ch <- prometheus.MustNewConstMetric(kc.active, prometheus.GaugeValue, float64(ks.ActiveKeys), name, kind)
		ch <- prometheus.MustNewConstMetric(kc.idle, prometheus.GaugeValue, float64(ks.IdleKeys), name, kind)
		ch <- prometheus.MustNewConstMetric(kc.evicted, prometheus.CounterValue, float64(ks.Evicted), name, kind)
		for _, r := range []struct {
			reason bulkhead.Reason
			n      uint64
		}{{bulkhead.ReasonKey, ks.RejectedKey}, {bulkhead.ReasonTotal, ks.RejectedTotal}, {bulkhead.ReasonKeys, ks.RejectedKeys}} {
			ch <- prometheus.MustNewConstMetric(kc.rejected, prometheus.CounterValue, float64(r.n), name, kind, r.reason.String())
		}
	}
}
