package registry

import (
	"fmt"

	"github.com/bulkhead-go/bulkhead"
	"github.com/prometheus/client_golang/prometheus"
)

// KeyedCollector returns a prometheus.Collector over keyed bulkheads made in
// code (such as semaphore.Keyed), read at scrape time: the series that
// RegisterMetrics exports for every bulkhead, of their totals over all keys,
// and the key counts that it exports for the registry's keyed semaphores:
// bulkhead_active_keys, bulkhead_idle_keys, bulkhead_keys_evicted_total and
// bulkhead_keyed_rejections_total{reason="key"|"total"|"keys"}. No series
// has a key label: keys are often user ids. It is unchecked, so that it may
// sit beside RegisterMetrics' collector on one prometheus.Registry; names
// must differ from the registry's bulkheads'. opts.Histograms is an error.
func KeyedCollector(opts MetricsOptions, ks ...bulkhead.KeyedInstance) (prometheus.Collector, error) {
	if opts.Histograms {
		return nil, fmt.Errorf("registry: KeyedCollector: MetricsOptions.Histograms is not supported for keyed bulkheads")
	}
	c, err := newCollector(nil, opts)
	for i, k := range ks {
		if k == nil {
			return nil, fmt.Errorf("registry: KeyedCollector: keyed bulkhead %d is nil", i)
		}
		c.fixed = append(c.fixed, k)
	}
	return unchecked{c}, err
}

type unchecked struct{ *collector }

// Describe sends nothing: the collector is unchecked.
func (unchecked) Describe(chan<- *prometheus.Desc) {}

// keyDescs are the series of a keyed bulkhead's key counts.
type keyDescs struct{ active, idle, evicted, rejected *prometheus.Desc }

func newKeyDescs(prefix string) keyDescs {
	d := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc(prefix+name, help, append([]string{"name", "kind"}, extra...), nil)
	}
	return keyDescs{
		active:   d("active_keys", "Keys of a keyed bulkhead that hold or wait for capacity now."),
		idle:     d("idle_keys", "Entries of idle keys a keyed bulkhead keeps for reuse."),
		evicted:  d("keys_evicted_total", "Entries of idle keys a keyed bulkhead removed from its cache."),
		rejected: d("keyed_rejections_total", "Calls a keyed bulkhead refused, by reason: key (its key's limit), total (the shared total) or keys (MaxActiveKeys).", "reason"),
	}
}

func (kd keyDescs) collect(ch chan<- prometheus.Metric, ks bulkhead.KeyStats, name, kind string) {
	ch <- prometheus.MustNewConstMetric(kd.active, prometheus.GaugeValue, float64(ks.ActiveKeys), name, kind)
	ch <- prometheus.MustNewConstMetric(kd.idle, prometheus.GaugeValue, float64(ks.IdleKeys), name, kind)
	ch <- prometheus.MustNewConstMetric(kd.evicted, prometheus.CounterValue, float64(ks.Evicted), name, kind)
	for r, n := range map[bulkhead.Reason]uint64{bulkhead.ReasonKey: ks.RejectedKey, bulkhead.ReasonTotal: ks.RejectedTotal, bulkhead.ReasonKeys: ks.RejectedKeys} {
		ch <- prometheus.MustNewConstMetric(kd.rejected, prometheus.CounterValue, float64(n), name, kind, r.String())
	}
}
