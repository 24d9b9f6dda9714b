package registry

import (
	"fmt"

	"github.com/bulkhead-go/bulkhead"
	"github.com/prometheus/client_golang/prometheus"
)

// KeyedCollector returns an unchecked prometheus.Collector over keyed
// bulkheads made in code, with the series RegisterMetrics exports for keyed
// bulkheads (no key label). Their names must differ from the registry's;
// opts.Histograms is an error.
func KeyedCollector(opts MetricsOptions, ks ...bulkhead.KeyedInstance) (prometheus.Collector, error) {
	if opts.Histograms {
		return nil, fmt.Errorf("registry: KeyedCollector: MetricsOptions.Histograms is not supported for keyed bulkheads")
	}
	c, _ := newCollector(nil, opts) // it fails only with Histograms
	for i, k := range ks {
		if k == nil {
			return nil, fmt.Errorf("registry: KeyedCollector: keyed bulkhead %d is nil", i)
		}
		c.fixed = append(c.fixed, k)
	}
	return unchecked{c}, nil
}

type unchecked struct{ *collector }

// Describe sends nothing: the collector is unchecked.
func (unchecked) Describe(chan<- *prometheus.Desc) {}
