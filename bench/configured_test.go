package bench

// The configuration users run in production: a bulkhead from the registry,
// with the registry's Prometheus collector registered (histograms on) and
// its status handler mounted, so every call is observed. Beside it, the
// same bulkhead bare, and with one no-op subscriber.

import (
	"context"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/registry"
)

// Each table of group 7 has the bare bulkhead as its floor.
var (
	configuredSemaphoreCases []opCase
	configuredPoolCases      []opCase
)

// newConfigured returns a registry for cfg with the Prometheus collector
// registered (histograms on) and the status handler mounted.
func newConfigured(b *testing.B, cfg registry.Config) *registry.Registry {
	r, err := registry.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close(context.Background()) })
	unregister, err := r.RegisterMetrics(prometheus.NewRegistry(), registry.MetricsOptions{Histograms: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(unregister)
	http.NewServeMux().Handle("/bulkheads", r.Handler())
	return r
}

func init() {
	configuredSemaphoreCases = append(configuredSemaphoreCases,
		opCase{floorKind, "Do", func(b *testing.B) func() { return semDo(newSemaphore(b, bigLimit)) }},
		opCase{baseKind, "Do_subscribed", func(b *testing.B) func() {
			s := newSemaphore(b, bigLimit)
			s.Subscribe(func(bulkhead.Event) {})
			return semDo(s)
		}},
		opCase{oursKind, "Do_registry", func(b *testing.B) func() {
			r := newConfigured(b, registry.Config{RecordEvents: true, Semaphores: map[string]registry.SemaphoreSpec{
				"bench": {MaxConcurrentCalls: new(bigLimit)}}})
			s, err := r.Semaphore("bench")
			if err != nil {
				b.Fatal(err)
			}
			return semDo(s)
		}},
	)
	poolJoinOp := func(p *pool.Bulkhead) func() {
		return func() {
			v, _ := poolJoin(p, answer)
			sink.Store(int64(v))
		}
	}
	configuredPoolCases = append(configuredPoolCases,
		opCase{floorKind, "Submit_Wait", func(b *testing.B) func() { return poolJoinOp(newPool(b, joinWorkers, 0)) }},
		opCase{oursKind, "Submit_Wait_registry", func(b *testing.B) func() {
			r := newConfigured(b, registry.Config{RecordEvents: true, Pools: map[string]registry.PoolSpec{
				"bench": {MaxWorkers: new(joinWorkers), QueueCapacity: new(0)}}})
			p, err := r.Pool("bench")
			if err != nil {
				b.Fatal(err)
			}
			return poolJoinOp(p)
		}},
	)
}

// BenchmarkG7_Configured guards a no-op call (semaphore `Do`, limit never
// reached) and submits one task and waits for it (pool, 64 workers) on a
// bulkhead from the registry with metrics and the status handler on; the
// floor of each table is the same bulkhead bare.
func BenchmarkG7_Configured(b *testing.B) {
	b.Run("semaphore", func(b *testing.B) { runOps(b, configuredSemaphoreCases, 0) })
	b.Run("pool", func(b *testing.B) { runOps(b, configuredPoolCases, 0) })
}
