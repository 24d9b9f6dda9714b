package registry

import (
	"fmt"

	"github.com/bulkhead-go/bulkhead"
	"github.com/prometheus/client_golang/prometheus"
)

// KeyedCollector returns a prometheus.Collector over keyed bulkheads made in
// code (semaphore.Keyed, pool.Keyed), read at scrape time: the series that
// RegisterMetrics exports for every bulkhead, of their totals over all keys,
// and the key counts that it exports for the registry's keyed bulkheads:
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
