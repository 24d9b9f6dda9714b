package registry

import (
	"net/http/httptest"
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
	// bulkhead_rejections_total has the same reasons, so that it adds up to
	// calls_rejected_total for keyed bulkheads too.
	got := map[string]float64{}
	mfs0, _ := reg.Gather()
	for _, mf := range mfs0 {
		for _, m := range mf.GetMetric() {
			if mf.GetName() != "bulkhead_rejections_total" || m.GetLabel()[1].GetValue() != "tenants" {
				continue
			}
			got[m.GetLabel()[2].GetValue()] = m.GetCounter().GetValue()
		}
	}
	if got["key"] != 1 || got["total"] != 1 || got["keys"] != 1 || got["full"] != 0 || len(got) != len(bulkhead.Reasons) {
		t.Fatalf("bulkhead_rejections_total for tenants: %v", got)
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

const keyedYAML = `resilience4j.bulkhead:
  configs:
    default: {maxWaitDuration: 0}
  instances:
    tenants: {maxConcurrentCallsPerKey: 1, maxConcurrentCalls: 2, max-active-keys: 5}
    plain: {maxConcurrentCalls: 3}
`

// A semaphore instance with maxConcurrentCallsPerKey is keyed: its
// maxConcurrentCalls is the total, and Semaphore and KeyedSemaphore each
// refuse the other form, saying which it is.
func TestKeyedSemaphoreFromYAML(t *testing.T) {
	r := newTestRegistry(t, keyedYAML)
	k, err := r.KeyedSemaphore("tenants")
	if err != nil {
		t.Fatal(err)
	}
	if c := k.Config(); c.PerKey.MaxConcurrentCalls != 1 || c.MaxConcurrentCalls != 2 || c.MaxActiveKeys != 5 || c.PerKey.MaxWaitDuration != 0 {
		t.Fatalf("config %+v", c)
	}
	a, ok := k.TryAcquire("secret-a")
	if !ok {
		t.Fatal("first call of a key refused")
	}
	if _, ok := k.TryAcquire("secret-a"); ok {
		t.Fatal("a key went over its limit")
	}
	b, ok := k.TryAcquire("secret-b")
	if !ok {
		t.Fatal("another key refused")
	}
	if _, ok := k.TryAcquire("secret-c"); ok {
		t.Fatal("the total was exceeded")
	}
	if _, err := r.Semaphore("tenants"); err == nil || !strings.Contains(err.Error(), `semaphore "tenants" is keyed`) {
		t.Errorf("Semaphore on a keyed one: %v", err)
	}
	if _, err := r.KeyedSemaphore("plain"); err == nil || !strings.Contains(err.Error(), `semaphore "plain" is not keyed`) {
		t.Errorf("KeyedSemaphore on a plain one: %v", err)
	}
	if _, err := r.KeyedSemaphore("unlisted"); err == nil || r.Instances() == nil {
		t.Errorf("KeyedSemaphore on an unlisted plain one: %v", err)
	}
	if _, found := r.Find(bulkhead.Semaphore, "unlisted"); found {
		t.Error("a refused KeyedSemaphore created the instance")
	}

	// Metrics: the key counts, no key label.
	reg := prometheus.NewPedanticRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	want := `
# HELP bulkhead_active_keys Keys of a keyed bulkhead that hold or wait for capacity now.
# TYPE bulkhead_active_keys gauge
bulkhead_active_keys{kind="semaphore",name="tenants"} 2
# HELP bulkhead_keyed_rejections_total Calls a keyed bulkhead refused, by reason: key (its key's limit), total (the shared total) or keys (MaxActiveKeys).
# TYPE bulkhead_keyed_rejections_total counter
bulkhead_keyed_rejections_total{kind="semaphore",name="tenants",reason="key"} 1
bulkhead_keyed_rejections_total{kind="semaphore",name="tenants",reason="keys"} 0
bulkhead_keyed_rejections_total{kind="semaphore",name="tenants",reason="total"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "bulkhead_active_keys", "bulkhead_keyed_rejections_total"); err != nil {
		t.Fatal(err)
	}
	// The status page: counts and the config, never a key.
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/?name=tenants", nil))
	body := rec.Body.String()
	for _, w := range []string{`"maxConcurrentCallsPerKey": 1`, `"maxActiveKeys": 5`, `"active": 2`, `"rejectedTotal": 1`} {
		if !strings.Contains(body, w) {
			t.Errorf("status page lacks %s:\n%s", w, body)
		}
	}
	if strings.Contains(body, "secret-") {
		t.Errorf("a key reached the status page:\n%s", body)
	}
	a.Release(nil)
	b.Release(nil)

	// Reconfigure moves the limits, and refuses to change the form of a
	// live semaphore.
	c := mustLoad(t, strings.Replace(keyedYAML, "maxConcurrentCallsPerKey: 1", "maxConcurrentCallsPerKey: 2", 1))
	if err := r.Reconfigure(c); err != nil {
		t.Fatal(err)
	}
	if got := k.Config().PerKey.MaxConcurrentCalls; got != 2 {
		t.Errorf("per-key limit %d after Reconfigure, want 2", got)
	}
	c = mustLoad(t, strings.NewReplacer("maxConcurrentCallsPerKey: 1, ", "", ", max-active-keys: 5", "").Replace(keyedYAML))
	if err := r.Reconfigure(c); err == nil || !strings.Contains(err.Error(), `makes semaphore "tenants" plain`) {
		t.Errorf("keyed to plain: %v", err)
	}
}

func TestKeyedSemaphoreErrors(t *testing.T) {
	for in, want := range map[string]string{
		"bulkhead.instances.t: {maxConcurrentCallsPerKey: 0}\n":                               `line 1: semaphore instance "t": maxConcurrentCallsPerKey must be between 1 and 1048576, got 0`,
		"bulkhead.instances.t: {maxActiveKeys: 3}\n":                                          `semaphore instance "t": maxActiveKeys has no effect without maxConcurrentCallsPerKey`,
		"bulkhead.instances.t: {maxConcurrentCallsPerKey: 2, maxActiveKeys: -1}\n":            `maxActiveKeys must be >= 0 (0 means 65536), got -1`,
		"bulkhead.instances.t: {maxConcurrentCallsPerKey: 2, adaptive: {maxLimit: 9}}\n":      `semaphore instance "t": adaptive is not supported on a keyed semaphore`,
		"bulkhead.configs.default: {maxConcurrentCallsPerKey: 0}\nbulkhead.instances.t: {}\n": `semaphore config "default": maxConcurrentCallsPerKey must be between 1`,
		"bulkhead.instances.t: {maxConcurrentCallsPerKy: 2}\n":                                `did you mean "maxConcurrentCallsPerKey"?`,
	} {
		wantLoadErr(t, in, want)
	}
	err := Config{Semaphores: map[string]SemaphoreSpec{"t": {MaxActiveKeys: new(2)}}}.Validate()
	if err == nil || !strings.Contains(err.Error(), `(at Semaphores["t"].MaxActiveKeys)`) {
		t.Errorf("code config: %v", err)
	}
}

// A keyed semaphore's lines are plain FIFOs: YAML keys that would shape
// them, or add priorities or a shadow, are refused on a keyed instance (and
// through a shared config it inherits), naming the key, instead of being
// dropped.
func TestKeyedSemaphoreYAMLRefusesLineKeys(t *testing.T) {
	const keyed = "a keyed semaphore (one with maxConcurrentCallsPerKey)"
	for in, want := range map[string]string{
		".instances.t: {maxConcurrentCallsPerKey: 1, maxWaitDuration: 1s, maxWaitingCalls: 1}":                                            "maxWaitingCalls is not supported on " + keyed,
		".instances.t: {maxConcurrentCallsPerKey: 1, maxWaitDuration: 1s, minDeadlineSlack: 5ms}":                                         "minDeadlineSlack is not supported on " + keyed,
		".instances.t: {maxConcurrentCallsPerKey: 1, maxWaitDuration: 1s, queueOrder: lifo}":                                              "queueOrder must be fifo on " + keyed,
		".instances.t: {maxConcurrentCallsPerKey: 1, maxWaitDuration: 1s, queueOrder: adaptiveLifo, lifoThreshold: 2}":                    "queueOrder must be fifo on " + keyed,
		".instances.t: {maxConcurrentCallsPerKey: 1, maxWaitDuration: 1s, codel: {targetDelay: 5ms}}":                                     "codel is not supported on " + keyed,
		".instances.t: {maxConcurrentCallsPerKey: 1, priorities: {ceilings: {sheddable: 50}}}":                                            "priorities is not supported on " + keyed,
		".instances.t: {maxConcurrentCallsPerKey: 1, maxConcurrentCalls: 4, shadow: {maxConcurrentCalls: 2}}":                             "shadow is not supported on " + keyed,
		".instances.t: {maxConcurrentCallsPerKey: 1, observe: true}":                                                                      "observe is not supported on " + keyed,
		": {configs: {slow: {maxWaitDuration: 1s, maxWaitingCalls: 3}}, instances: {t: {baseConfig: slow, maxConcurrentCallsPerKey: 1}}}": "maxWaitingCalls is not supported on " + keyed + ", whose lines are first in, first out, bounded by maxWaitDuration only, got 3",
	} {
		if _, err := Load(strings.NewReader("resilience4j.bulkhead" + in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	for _, in := range []string{ // what a keyed semaphore does: accepted
		".instances.t: {maxConcurrentCallsPerKey: 1, maxWaitDuration: 1s, queueOrder: fifo, maxWaitingCalls: 0}",
		": {configs: {slow: {maxWaitDuration: 1s, maxWaitingCalls: 3}}, instances: {t: {maxConcurrentCallsPerKey: 1, maxWaitingCalls: 0, baseConfig: slow}, p: {baseConfig: slow}}}",
	} {
		if _, err := Load(strings.NewReader("resilience4j.bulkhead" + in)); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
}
