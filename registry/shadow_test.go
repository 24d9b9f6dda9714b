package registry

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// The semaphore's priorities, shadow and observe keys, inherited from a
// shared configuration as blocks; the shadow's series and the status page.
func TestShadowAndPrioritiesFromYAML(t *testing.T) {
	r := newTestRegistry(t, `
resilience4j:
  bulkhead:
    configs:
      default: {maxWaitDuration: 1s}
      prioritized: {priorities: {ceilings: {sheddable: 0.25, critical: 0.9}, aging: 500ms}}
    instances:
      checkout:
        baseConfig: prioritized
        maxConcurrentCalls: 4
        maxWaitDuration: 1s
        shadow: {maxConcurrentCalls: 1, maxWaitDuration: 50ms}
      search:
        maxConcurrentCalls: 1
        maxWaitDuration: 0
        observe: true
`)
	if _, err := Load(strings.NewReader("resilience4j.bulkhead.instances.search: {maxConcurrentCalls: 1, observe: true, priorities: {}}")); err == nil ||
		!strings.Contains(err.Error(), "observe and priorities") {
		t.Fatalf("observe with priorities: %v", err)
	}
	co, err := r.Semaphore("checkout")
	if err != nil {
		t.Fatal(err)
	}
	c := co.Config()
	if c.Priorities == nil || *c.Priorities != (bulkhead.Priorities{Sheddable: 0.25, Critical: 0.9, Aging: 500 * time.Millisecond}) ||
		c.Shadow == nil || *c.Shadow != (semaphore.Shadow{MaxConcurrentCalls: 1, MaxWaitDuration: 50 * time.Millisecond}) || c.Observe {
		t.Fatalf("checkout: %+v (priorities %v, shadow %v)", c, c.Priorities, c.Shadow)
	}
	search, _ := r.Semaphore("search")
	if c := search.Config(); !c.Observe || c.Priorities != nil {
		t.Fatalf("search: %+v: observe, and its priorities block is its own", c)
	}
	ctx := context.Background()
	hold := make(chan struct{})
	done := make(chan error, 2)
	for range 2 { // the second would be refused by the limit of 1
		in := make(chan struct{})
		go func() { done <- search.Do(ctx, func(context.Context) error { close(in); <-hold; return nil }) }()
		<-in
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
bulkhead_shadow_in_flight_calls{kind="semaphore",name="checkout"} 0
bulkhead_shadow_in_flight_calls{kind="semaphore",name="search"} 1
# HELP bulkhead_shadow_observe 1 for a bulkhead that enforces nothing and evaluates its own limit as a shadow, else 0.
# TYPE bulkhead_shadow_observe gauge
bulkhead_shadow_observe{kind="semaphore",name="checkout"} 0
bulkhead_shadow_observe{kind="semaphore",name="search"} 1
# HELP bulkhead_shadow_would_reject_total Calls that found the shadow full and would have been refused at once (a shadow without waiting).
# TYPE bulkhead_shadow_would_reject_total counter
bulkhead_shadow_would_reject_total{kind="semaphore",name="checkout"} 0
bulkhead_shadow_would_reject_total{kind="semaphore",name="search"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "bulkhead_shadow_in_flight_calls", "bulkhead_shadow_observe", "bulkhead_shadow_would_reject_total"); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	var st struct {
		Instances []struct {
			Name   string
			Shadow *struct {
				Limit, InUse int
				WouldReject  uint64
				Observe      bool
			}
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	marked := map[string]bool{}
	for _, is := range st.Instances {
		if is.Shadow != nil {
			marked[is.Name] = is.Shadow.Observe
		}
	}
	if len(marked) != 2 || marked["checkout"] || !marked["search"] {
		t.Fatalf("status page marks %v, want checkout shadowed and search observe-only:\n%s", marked, rec.Body)
	}
	close(hold)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestShadowAndPrioritiesErrors(t *testing.T) {
	wantLoadErr(t, "bulkhead:\n  instances:\n    a: {maxConcurrentCalls: 2, shadow: {maxConcurrentCalls: 3}}\n",
		"shadow.maxConcurrentCalls must be from 0")
	wantLoadErr(t, "bulkhead:\n  instances:\n    a: {observe: yes}\n", "observe", "must be true or false")
	wantLoadErr(t, "bulkhead:\n  instances:\n    a: {priorities: {ceilings: {sheddable: 0.9, critical: 0.5}}}\n",
		"sheddable (0.9) must not exceed sheddablePlus")
	wantLoadErr(t, "bulkhead:\n  instances:\n    a: {priorities: {ceilings: {criticalPlus: 1}}}\n", "criticalPlus")
	wantLoadErr(t, "bulkhead:\n  instances:\n    a: {priorities: {aging: soon}}\n", "priorities.aging", "duration")
	// An adaptive controller would move the limit below the shadow's.
	wantLoadErr(t, "bulkhead:\n  instances:\n    a: {maxConcurrentCalls: 8, shadow: {maxConcurrentCalls: 4}, adaptive: {}}\n",
		"line 3", `semaphore instance "a": shadow is not supported beside adaptive`)
}

// A reload that drops a semaphore's priorities: block applies while
// callers of several classes wait, and they keep their place: the one
// that joined first gets the next permit.
func TestReloadDropsPriorities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTestRegistry(t, `
resilience4j.bulkhead.instances.checkout: {maxConcurrentCalls: 1, maxWaitDuration: 1h, priorities: {aging: 1s}}`)
		b, err := r.Semaphore("checkout")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := make(chan bulkhead.Priority, 2)
		for _, p := range []bulkhead.Priority{bulkhead.Sheddable, bulkhead.CriticalPlus} {
			go func() {
				if err := b.Acquire(bulkhead.WithPriority(context.Background(), p)); err != nil {
					t.Errorf("%v: %v", p, err)
				}
				got <- p
			}()
			synctest.Wait()
			time.Sleep(time.Millisecond) // the next joins later
		}
		if err := r.Reconfigure(mustLoad(t, `
resilience4j.bulkhead.instances.checkout: {maxConcurrentCalls: 1, maxWaitDuration: 1h}`)); err != nil {
			t.Fatalf("reload without priorities: %v", err)
		}
		if b.Config().Priorities != nil {
			t.Fatalf("priorities still on: %+v", b.Config())
		}
		for _, want := range []bulkhead.Priority{bulkhead.Sheddable, bulkhead.CriticalPlus} {
			b.Release()
			if p := <-got; p != want {
				t.Fatalf("granted %v, want %v (the order they joined)", p, want)
			}
		}
		b.Release()
	})
}
