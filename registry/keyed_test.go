package registry

import (
	"strings"
	"testing"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A keyed bulkhead's totals and key counts, beside a registry's bulkheads
// on one prometheus.Registry, with no key in any series.
func TestKeyedCollector(t *testing.T) {
	k, err := semaphore.NewKeyed[string]("tenants", semaphore.KeyedConfig{
		PerKey: semaphore.Config{MaxConcurrentCalls: 2}, MaxConcurrentCalls: 3, MaxActiveKeys: 2})
	if err != nil {
		t.Fatal(err)
	}
	var held []semaphore.KeyedPermit[string]
	for _, key := range []string{"secret-user-a", "secret-user-a", "secret-user-b"} {
		p, ok := k.TryAcquire(key)
		if !ok {
			t.Fatal(key)
		}
		held = append(held, p)
	}
	k.TryAcquire("secret-user-a") // refused: its key's limit
	k.TryAcquire("secret-user-b") // refused: the total
	k.TryAcquire("secret-user-c") // refused: two keys are active

	r := newTestRegistry(t, metricsYAML)
	reg := prometheus.NewPedanticRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	kc, err := KeyedCollector(MetricsOptions{}, k)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(kc); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP bulkhead_active_keys Keys of a keyed bulkhead that hold or wait for capacity now.
# TYPE bulkhead_active_keys gauge
bulkhead_active_keys{kind="semaphore",name="tenants"} 2
# HELP bulkhead_keyed_rejections_total Calls a keyed bulkhead refused, by reason: key (its key's limit), total (the shared total) or keys (MaxActiveKeys).
# TYPE bulkhead_keyed_rejections_total counter
bulkhead_keyed_rejections_total{kind="semaphore",name="tenants",reason="key"} 1
bulkhead_keyed_rejections_total{kind="semaphore",name="tenants",reason="keys"} 1
bulkhead_keyed_rejections_total{kind="semaphore",name="tenants",reason="total"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "bulkhead_active_keys", "bulkhead_keyed_rejections_total"); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if s := mf.String(); strings.Contains(s, "secret-user") {
			t.Fatalf("a key reached the metrics: %s", s)
		}
		if mf.GetName() == "bulkhead_in_flight_calls" && len(mf.Metric) != 3 { // the registry's two and tenants
			t.Fatalf("in-flight series: %v", mf)
		}
	}
	for _, p := range held {
		p.Release(nil)
	}
	if _, err := KeyedCollector(MetricsOptions{Histograms: true}, k); err == nil {
		t.Fatal("Histograms accepted")
	}
	if _, err := KeyedCollector(MetricsOptions{}, nil); err == nil || !strings.Contains(err.Error(), "keyed bulkhead 0 is nil") {
		t.Fatalf("nil instance: %v", err)
	}
	var _ bulkhead.KeyedInstance = k
}
