package registry

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bulkhead-go/bulkhead/pool"
)

// The pool's shadow block, inherited from a shared configuration whole,
// its series and the status page's mark.
func TestPoolShadowFromYAML(t *testing.T) {
	r := newTestRegistry(t, `
resilience4j:
  thread-pool-bulkhead:
    configs:
      default: {maxThreadPoolSize: 4, queueCapacity: 4, maxWaitDuration: 1s}
      tried: {shadow: {maxThreadPoolSize: 1, queueCapacity: 1, maxWaitDuration: 50ms}}
    instances:
      mail:
        baseConfig: tried
        maxThreadPoolSize: 4
        queueCapacity: 4
      pdf:
        shadow: {maxWorkers: 2, queueTimeout: 100ms}
      plain: {}
`)
	for name, want := range map[string]*pool.Shadow{
		"mail":  {MaxWorkers: 1, QueueCapacity: 1, QueueTimeout: 50 * time.Millisecond},
		"pdf":   {MaxWorkers: 2, QueueTimeout: 100 * time.Millisecond},
		"plain": nil,
	} {
		b, err := r.Pool(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.Config().Shadow; (got == nil) != (want == nil) || got != nil && *got != *want {
			t.Errorf("%s: shadow %+v, want %+v", name, got, want)
		}
	}
	mail, _ := r.Pool("mail")
	hold := make(chan struct{})
	var fs []interface {
		Wait(context.Context) (struct{}, error)
	}
	for range 3 { // the shadow's worker, its queue slot, and one it would reject
		f, err := mail.TryGo(context.Background(), func(context.Context) error { <-hold; return nil })
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	reg := prometheus.NewPedanticRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	want := `
# HELP bulkhead_shadow_in_flight_calls Shadow permits (a pool's: shadow workers) held now: calls the shadow would have let run that are still running.
# TYPE bulkhead_shadow_in_flight_calls gauge
bulkhead_shadow_in_flight_calls{kind="pool",name="mail"} 1
bulkhead_shadow_in_flight_calls{kind="pool",name="pdf"} 0
# HELP bulkhead_shadow_queue_depth A pool's shadow queue slots held now: tasks the shadow would have kept queued.
# TYPE bulkhead_shadow_queue_depth gauge
bulkhead_shadow_queue_depth{kind="pool",name="mail"} 1
bulkhead_shadow_queue_depth{kind="pool",name="pdf"} 0
# HELP bulkhead_shadow_queue_capacity A pool's shadow queue capacity.
# TYPE bulkhead_shadow_queue_capacity gauge
bulkhead_shadow_queue_capacity{kind="pool",name="mail"} 1
bulkhead_shadow_queue_capacity{kind="pool",name="pdf"} 4
# HELP bulkhead_shadow_would_reject_total Calls that found the shadow full and would have been refused at once (a shadow without waiting).
# TYPE bulkhead_shadow_would_reject_total counter
bulkhead_shadow_would_reject_total{kind="pool",name="mail"} 1
bulkhead_shadow_would_reject_total{kind="pool",name="pdf"} 0
# HELP bulkhead_shadow_would_wait_total Calls that found the shadow full and would have had to wait for it.
# TYPE bulkhead_shadow_would_wait_total counter
bulkhead_shadow_would_wait_total{kind="pool",name="mail"} 1
bulkhead_shadow_would_wait_total{kind="pool",name="pdf"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "bulkhead_shadow_in_flight_calls", "bulkhead_shadow_queue_depth",
		"bulkhead_shadow_queue_capacity", "bulkhead_shadow_would_reject_total", "bulkhead_shadow_would_wait_total"); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	var st struct {
		Instances []struct {
			Name   string
			Shadow *struct {
				Limit, InUse, QueueDepth, QueueCapacity int
				WouldReject, WouldWait                  uint64
			}
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	marked := map[string]string{}
	for _, is := range st.Instances {
		if is.Shadow != nil {
			marked[is.Name] = strings.Trim(strings.ReplaceAll(jsonString(t, is.Shadow), `"`, ""), "{}")
		}
	}
	if len(marked) != 2 || marked["mail"] != "Limit:1,InUse:1,QueueDepth:1,QueueCapacity:1,WouldReject:1,WouldWait:1" || marked["pdf"] == "" {
		t.Fatalf("status page marks %v, want mail and pdf shadowed:\n%s", marked, rec.Body)
	}
	close(hold)
	for _, f := range fs {
		if _, err := f.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPoolShadowYAMLErrors(t *testing.T) {
	for in, want := range map[string]string{
		"{maxThreadPoolSize: 2, shadow: {maxThreadPoolSize: 3}}":                      "shadow.maxWorkers must be from 0 (maxWorkers) to maxWorkers 2, got 3",
		"{maxThreadPoolSize: 2, queueCapacity: 2, shadow: {queueCapacity: 5}}":        "shadow.queueCapacity must be from 0 (queueCapacity) to queueCapacity 2, got 5",
		"{maxWaitDuration: 1s, shadow: {queueTimeout: 2s}}":                           "shadow.queueTimeout must be from 0 (queueTimeout) to queueTimeout 1s, got 2s",
		"{shadow: {maxThreadPoolSize: many}}":                                         "shadow.maxThreadPoolSize",
		"{shadow: {maxWaitDuration: soon}}":                                           "shadow.maxWaitDuration",
		"{shadow: {queueSize: 1}}":                                                    "shadow.queueSize",
		"{shadow: {}}":                                                                "is the enforced pool itself",
		"{maxThreadPoolSize: 4, shadow: {maxThreadPoolSize: 2}, adaptive: {}}":        "shadow is not supported beside adaptive",
		"{maxThreadPoolSize: 4, maxRunningPerKey: 1, shadow: {maxThreadPoolSize: 2}}": "shadow is not supported on a keyed pool",
	} {
		if _, err := Load(strings.NewReader("resilience4j.thread-pool-bulkhead.instances.p: " + in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}
