package registry

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const metricsYAML = `
bulkhead:
  instances:
    payment: {maxConcurrentCalls: 2}
thread-pool-bulkhead:
  instances:
    emails: {maxWorkers: 2, queueCapacity: 5}
`

// exercise leaves payment with 2 permitted, 1 rejected, 2 finished (1
// failed) and one permit held.
func exercise(t *testing.T, r *Registry) (release func()) {
	t.Helper()
	pay, err := r.Semaphore("payment")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_ = pay.Do(ctx, func(context.Context) error { return nil })
	_ = pay.Do(ctx, func(context.Context) error { return errors.New("boom") })
	if !pay.TryAcquire() || !pay.TryAcquire() {
		t.Fatal("no permit")
	}
	if pay.TryAcquire() {
		t.Fatal("a third permit")
	}
	pay.Release()
	return pay.Release
}

const wantDefault = `
# HELP bulkhead_available_concurrent_calls Calls that may start now: max allowed minus in flight, never below 0.
# TYPE bulkhead_available_concurrent_calls gauge
bulkhead_available_concurrent_calls{kind="pool",name="emails"} 2
bulkhead_available_concurrent_calls{kind="semaphore",name="payment"} 1
# HELP bulkhead_calls_failed_total Finished calls that returned an error or panicked.
# TYPE bulkhead_calls_failed_total counter
bulkhead_calls_failed_total{kind="pool",name="emails"} 0
bulkhead_calls_failed_total{kind="semaphore",name="payment"} 1
# HELP bulkhead_calls_finished_total Permitted calls that completed, whatever their result.
# TYPE bulkhead_calls_finished_total counter
bulkhead_calls_finished_total{kind="pool",name="emails"} 0
bulkhead_calls_finished_total{kind="semaphore",name="payment"} 3
# HELP bulkhead_calls_permitted_total Calls that got a permit or a worker and ran.
# TYPE bulkhead_calls_permitted_total counter
bulkhead_calls_permitted_total{kind="pool",name="emails"} 0
bulkhead_calls_permitted_total{kind="semaphore",name="payment"} 4
# HELP bulkhead_calls_rejected_total Calls refused because the bulkhead was full, at once or after waiting the maximum wait.
# TYPE bulkhead_calls_rejected_total counter
bulkhead_calls_rejected_total{kind="pool",name="emails"} 0
bulkhead_calls_rejected_total{kind="semaphore",name="payment"} 1
# HELP bulkhead_in_flight_calls Calls running now (pool: tasks on a worker).
# TYPE bulkhead_in_flight_calls gauge
bulkhead_in_flight_calls{kind="pool",name="emails"} 0
bulkhead_in_flight_calls{kind="semaphore",name="payment"} 1
# HELP bulkhead_max_allowed_concurrent_calls The limit in force: permits (semaphore) or workers (pool).
# TYPE bulkhead_max_allowed_concurrent_calls gauge
bulkhead_max_allowed_concurrent_calls{kind="pool",name="emails"} 2
bulkhead_max_allowed_concurrent_calls{kind="semaphore",name="payment"} 2
# HELP bulkhead_queue_capacity The queue's capacity (pool); 0 for a semaphore.
# TYPE bulkhead_queue_capacity gauge
bulkhead_queue_capacity{kind="pool",name="emails"} 5
bulkhead_queue_capacity{kind="semaphore",name="payment"} 0
`

func TestCollectorExposition(t *testing.T) {
	r := newTestRegistry(t, metricsYAML)
	defer exercise(t, r)()
	reg := prometheus.NewPedanticRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	names := []string{
		"bulkhead_available_concurrent_calls", "bulkhead_calls_failed_total", "bulkhead_calls_finished_total",
		"bulkhead_calls_permitted_total", "bulkhead_calls_rejected_total", "bulkhead_in_flight_calls",
		"bulkhead_max_allowed_concurrent_calls", "bulkhead_queue_capacity",
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantDefault), names...); err != nil {
		t.Fatal(err)
	}
	// Every metric family is there, and none is a histogram by default.
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * 11; n != want { // 6 gauges + 5 counters per instance
		t.Fatalf("%d series, want %d", n, want)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP bulkhead_waiting_calls Callers waiting for a permit (semaphore).
# TYPE bulkhead_waiting_calls gauge
bulkhead_waiting_calls{kind="pool",name="emails"} 0
bulkhead_waiting_calls{kind="semaphore",name="payment"} 0
# HELP bulkhead_queue_depth Tasks waiting in the queue for a worker (pool).
# TYPE bulkhead_queue_depth gauge
bulkhead_queue_depth{kind="pool",name="emails"} 0
bulkhead_queue_depth{kind="semaphore",name="payment"} 0
# HELP bulkhead_calls_cancelled_total Calls that gave up while waiting or queued: context ended, future cancelled or pool closed.
# TYPE bulkhead_calls_cancelled_total counter
bulkhead_calls_cancelled_total{kind="pool",name="emails"} 0
bulkhead_calls_cancelled_total{kind="semaphore",name="payment"} 0
`), "bulkhead_waiting_calls", "bulkhead_queue_depth", "bulkhead_calls_cancelled_total"); err != nil {
		t.Fatal(err)
	}
}

func TestCollectorFollowsRegistry(t *testing.T) {
	r := newTestRegistry(t, "")
	reg := prometheus.NewRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	count := func() int {
		n, err := testutil.GatherAndCount(reg, "bulkhead_max_allowed_concurrent_calls")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("%d series with no instance", n)
	}
	if _, err := r.Semaphore("late"); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d series after adding one, want 1", n)
	}
	r.Remove("late")
	if n := count(); n != 0 {
		t.Fatalf("%d series after Remove, want 0", n)
	}
	// Registering twice on one registry is refused; nothing went global.
	if _, err := r.RegisterMetrics(reg, MetricsOptions{}); err == nil {
		t.Error("registered twice")
	}
	if mfs, _ := prometheus.DefaultGatherer.Gather(); len(mfs) > 0 {
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), "bulkhead_") {
				t.Errorf("%s registered globally", mf.GetName())
			}
		}
	}
}

func TestCollectorResilience4jNames(t *testing.T) {
	r := newTestRegistry(t, metricsYAML)
	defer exercise(t, r)()
	reg := prometheus.NewPedanticRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{Resilience4jNames: true})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	want := `
# HELP resilience4j_bulkhead_available_concurrent_calls Calls that may start now: max allowed minus in flight, never below 0.
# TYPE resilience4j_bulkhead_available_concurrent_calls gauge
resilience4j_bulkhead_available_concurrent_calls{kind="pool",name="emails"} 2
resilience4j_bulkhead_available_concurrent_calls{kind="semaphore",name="payment"} 1
# HELP resilience4j_bulkhead_max_allowed_concurrent_calls The limit in force: permits (semaphore) or workers (pool).
# TYPE resilience4j_bulkhead_max_allowed_concurrent_calls gauge
resilience4j_bulkhead_max_allowed_concurrent_calls{kind="pool",name="emails"} 2
resilience4j_bulkhead_max_allowed_concurrent_calls{kind="semaphore",name="payment"} 2
# HELP resilience4j_bulkhead_queue_capacity The queue's capacity (pool); 0 for a semaphore.
# TYPE resilience4j_bulkhead_queue_capacity gauge
resilience4j_bulkhead_queue_capacity{kind="pool",name="emails"} 5
resilience4j_bulkhead_queue_capacity{kind="semaphore",name="payment"} 0
# HELP resilience4j_bulkhead_queue_depth Tasks waiting in the queue for a worker (pool).
# TYPE resilience4j_bulkhead_queue_depth gauge
resilience4j_bulkhead_queue_depth{kind="pool",name="emails"} 0
resilience4j_bulkhead_queue_depth{kind="semaphore",name="payment"} 0
# HELP resilience4j_bulkhead_max_thread_pool_size Pool only, for Resilience4j dashboards: MaxWorkers.
# TYPE resilience4j_bulkhead_max_thread_pool_size gauge
resilience4j_bulkhead_max_thread_pool_size{kind="pool",name="emails"} 2
# HELP resilience4j_bulkhead_available_thread_count Pool only, for Resilience4j dashboards: workers free now.
# TYPE resilience4j_bulkhead_available_thread_count gauge
resilience4j_bulkhead_available_thread_count{kind="pool",name="emails"} 2
# HELP resilience4j_bulkhead_calls_rejected_total Calls refused because the bulkhead was full, at once or after waiting the maximum wait.
# TYPE resilience4j_bulkhead_calls_rejected_total counter
resilience4j_bulkhead_calls_rejected_total{kind="pool",name="emails"} 0
resilience4j_bulkhead_calls_rejected_total{kind="semaphore",name="payment"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"resilience4j_bulkhead_available_concurrent_calls", "resilience4j_bulkhead_max_allowed_concurrent_calls",
		"resilience4j_bulkhead_queue_capacity", "resilience4j_bulkhead_queue_depth",
		"resilience4j_bulkhead_max_thread_pool_size", "resilience4j_bulkhead_available_thread_count",
		"resilience4j_bulkhead_calls_rejected_total"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"thread_pool_size", "core_thread_pool_size", "active_thread_count"} {
		if n, err := testutil.GatherAndCount(reg, "resilience4j_bulkhead_"+name); err != nil || n != 1 {
			t.Errorf("resilience4j_bulkhead_%s: %d series, %v; want 1 (pools only)", name, n, err)
		}
	}
	if n, _ := testutil.GatherAndCount(reg, "bulkhead_available_concurrent_calls"); n != 0 {
		t.Error("default names emitted too")
	}
}

func TestCollectorHistograms(t *testing.T) {
	r := newTestRegistry(t, metricsYAML)
	reg := prometheus.NewPedanticRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{Histograms: true, Buckets: []float64{0.001, 1}})
	if err != nil {
		t.Fatal(err)
	}
	pay, _ := r.Semaphore("payment")
	ctx := context.Background()
	for range 3 {
		_ = pay.Do(ctx, func(context.Context) error { return nil })
	}
	pay.TryAcquire() // permitted, but no run time: nobody timed it
	pay.Release()
	em, _ := r.Pool("emails")
	f, _ := em.Go(ctx, func(context.Context) error { return nil })
	if _, err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// The pool publishes its finished event after completing the future;
	// closing the registry waits for the worker.
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetType().String() != "HISTOGRAM" {
			continue
		}
		for _, m := range mf.GetMetric() {
			name := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" {
					name = l.GetValue()
				}
			}
			counts[mf.GetName()+"/"+name] = m.GetHistogram().GetSampleCount()
		}
	}
	want := map[string]uint64{
		"bulkhead_wait_duration_seconds/payment": 4, "bulkhead_run_duration_seconds/payment": 3,
		"bulkhead_wait_duration_seconds/emails": 1, "bulkhead_run_duration_seconds/emails": 1,
	}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("%s: %d samples, want %d (all: %v)", k, counts[k], v, counts)
		}
	}
	unregister()
}
