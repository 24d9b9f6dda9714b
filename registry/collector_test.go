package registry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/semaphore"
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
	if want := 2 * (13 + 10); n != want { // 8 gauges + 5 counters + a rejection counter per reason, per instance
		t.Fatalf("%d series, want %d", n, want)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP bulkhead_waiting_calls Callers waiting: for a permit (semaphore) or for room in the queue (pool Go callers).
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
	r.Remove(bulkhead.Semaphore, "late")
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
resilience4j_bulkhead_available_concurrent_calls{kind="semaphore",name="payment"} 1
# HELP resilience4j_bulkhead_max_allowed_concurrent_calls The limit in force: permits (semaphore) or workers (pool).
# TYPE resilience4j_bulkhead_max_allowed_concurrent_calls gauge
resilience4j_bulkhead_max_allowed_concurrent_calls{kind="semaphore",name="payment"} 2
# HELP resilience4j_bulkhead_queue_capacity The queue's capacity (pool); 0 for a semaphore.
# TYPE resilience4j_bulkhead_queue_capacity gauge
resilience4j_bulkhead_queue_capacity{kind="pool",name="emails"} 5
# HELP resilience4j_bulkhead_queue_depth Tasks waiting in the queue for a worker (pool).
# TYPE resilience4j_bulkhead_queue_depth gauge
resilience4j_bulkhead_queue_depth{kind="pool",name="emails"} 0
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
	f, _ := em.TryGo(ctx, func(context.Context) error { return nil })
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
			counts[mf.GetName()+"/"+name] += m.GetHistogram().GetSampleCount()
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

// seriesOf counts the histogram series of bulkhead name, empty ones too.
func seriesOf(t *testing.T, reg prometheus.Gatherer, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if mf.GetType().String() == "HISTOGRAM" && l.GetName() == "name" && l.GetValue() == name {
					n++
				}
			}
		}
	}
	return n
}

// histSeries counts the histogram series of bulkhead name, by metric and
// outcome.
func histSeries(t *testing.T, reg prometheus.Gatherer, name string) map[string]uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetType().String() != "HISTOGRAM" {
			continue
		}
		for _, m := range mf.GetMetric() {
			n, outcome := "", ""
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "name":
					n = l.GetValue()
				case "outcome":
					outcome = l.GetValue()
				}
			}
			if n == name && m.GetHistogram().GetSampleCount() > 0 {
				out[mf.GetName()+"/"+outcome] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	return out
}

func TestHistogramSeriesDeletedOnRemove(t *testing.T) {
	r := newTestRegistry(t, metricsYAML)
	reg := prometheus.NewPedanticRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{Histograms: true})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	pay, _ := r.Semaphore("payment")
	_ = pay.Do(context.Background(), func(context.Context) error { return nil })
	if got := histSeries(t, reg, "payment"); len(got) != 2 {
		t.Fatalf("payment's histogram series %v, want wait and run", got)
	}
	r.Remove(bulkhead.Semaphore, "payment")
	if got := seriesOf(t, reg, "payment"); got != 0 {
		t.Fatalf("after Remove: %v, want none", got)
	}
	// A new bulkhead of the same name starts from zero.
	pay2, _ := r.Semaphore("payment")
	_ = pay2.Do(context.Background(), func(context.Context) error { return nil })
	if got := histSeries(t, reg, "payment")["bulkhead_wait_duration_seconds/permitted"]; got != 1 {
		t.Fatalf("new payment: %d wait samples, want 1", got)
	}
}

// TestHistogramNotResurrectedAfterRemove: an event of a removed bulkhead
// that was already being delivered when Remove ran must not bring its
// series back.
func TestHistogramNotResurrectedAfterRemove(t *testing.T) {
	r := newTestRegistry(t, "")
	s, _ := r.Semaphore("x")
	inFn, goOn := make(chan struct{}), make(chan struct{})
	var once sync.Once
	// Subscribed before the collector, so it sees each event first.
	defer r.Subscribe(func(e bulkhead.Event) {
		if e.Type == bulkhead.EventPermitted {
			once.Do(func() { close(inFn); <-goOn })
		}
	})()
	reg := prometheus.NewPedanticRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{Histograms: true})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Do(context.Background(), func(context.Context) error { return nil })
	}()
	<-inFn
	r.Remove(bulkhead.Semaphore, "x")
	close(goOn)
	<-done
	if got := seriesOf(t, reg, "x"); got != 0 {
		t.Fatalf("x was removed, yet %d of its series are exported", got)
	}
}

// TestWaitHistogramOutcomes: the wait histogram also observes calls
// rejected after waiting and calls cancelled while waiting, apart from the
// permitted ones; a call refused at once did not wait and is not observed.
func TestWaitHistogramOutcomes(t *testing.T) {
	r := newTestRegistry(t, "bulkhead:\n  instances:\n    a: {maxConcurrentCalls: 1, maxWaitDuration: 1ms}\n    b: {maxConcurrentCalls: 1, maxWaitDuration: 1h}\n")
	reg := prometheus.NewPedanticRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{Histograms: true})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	ctx := context.Background()
	a, _ := r.Semaphore("a")
	_ = a.Do(ctx, func(context.Context) error { return nil }) // permitted
	if !a.TryAcquire() {                                      // permitted
		t.Fatal("no permit")
	}
	a.TryAcquire() // refused at once: not a wait
	if err := a.Acquire(ctx); !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("Acquire = %v, want a rejection after waiting", err)
	}
	a.Release()

	b, _ := r.Semaphore("b")
	if !b.TryAcquire() {
		t.Fatal("no permit")
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Acquire(cctx) }()
	for b.Stats().Waiting == 0 { // until the caller waits; the test's timeout guards it
		runtime.Gosched()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire = %v, want context.Canceled", err)
	}
	b.Release()

	if got, want := histSeries(t, reg, "a"), map[string]uint64{
		"bulkhead_wait_duration_seconds/permitted": 2, "bulkhead_wait_duration_seconds/rejected": 1,
		"bulkhead_run_duration_seconds/": 1,
	}; !maps.Equal(got, want) {
		t.Errorf("a: %v, want %v", got, want)
	}
	if got, want := histSeries(t, reg, "b"), map[string]uint64{
		"bulkhead_wait_duration_seconds/permitted": 1, "bulkhead_wait_duration_seconds/cancelled": 1,
	}; !maps.Equal(got, want) {
		t.Errorf("b: %v, want %v", got, want)
	}
}

// TestUnregisterReleasesSubscription: unregistering (or Collector.Close)
// stops the histograms' subscription, so that the bulkheads stop building
// events.
func TestUnregisterReleasesSubscription(t *testing.T) {
	r := newTestRegistry(t, metricsYAML)
	pay, _ := r.Semaphore("payment")
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	listening := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.listeners > 0 || r.entries[key{bulkhead.Semaphore, "payment"}].unsub != nil || r.calls.Active()
	}
	reg := prometheus.NewPedanticRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{Histograms: true})
	if err != nil {
		t.Fatal(err)
	}
	if !listening() {
		t.Fatal("histograms on, but the registry does not listen")
	}
	unregister()
	if listening() {
		t.Fatal("still listening after unregister")
	}
	if a := testing.AllocsPerRun(100, func() { _ = pay.Do(ctx, fn) }); a != 0 {
		t.Errorf("%v allocations per call after unregister, want 0", a)
	}
	if n, _ := testutil.GatherAndCount(reg); n != 0 {
		t.Errorf("%d series after unregister", n)
	}

	unregister() // harmless
}

// TestObserveAllocatesNothing: the histograms' per-event path (on every
// guarded call) takes no lock and allocates nothing once a bulkhead's
// series exist.
func TestObserveAllocatesNothing(t *testing.T) {
	r := newTestRegistry(t, metricsYAML)
	c, err := newCollector(r, MetricsOptions{Histograms: true})
	if err != nil {
		t.Fatal(err)
	}
	events := []bulkhead.Event{
		{Name: "payment", Kind: bulkhead.Semaphore, Type: bulkhead.EventPermitted, Wait: 1},
		{Name: "payment", Kind: bulkhead.Semaphore, Type: bulkhead.EventFinished, Run: 2},
		{Name: "payment", Kind: bulkhead.Semaphore, Type: bulkhead.EventCancelled, Wait: 3},
	}
	r.mu.Lock()
	e := r.entries[key{bulkhead.Semaphore, "payment"}]
	c.watch(e)
	s := c.sinks[e]
	r.mu.Unlock()
	for i := range events {
		s.observe(e, &events[i])
	}
	if a := testing.AllocsPerRun(100, func() {
		for i := range events {
			s.observe(e, &events[i])
		}
	}); a != 0 {
		t.Errorf("%v allocations per event batch, want 0", a)
	}
}

// TestConfiguredCallAllocatesNothing: a call through a bulkhead of a
// registry that records events, with the collector's histograms on and the
// status handler mounted, allocates nothing: its events go to the ring, the
// histograms and the registry's subscribers by value, with no lookup.
func TestConfiguredCallAllocatesNothing(t *testing.T) {
	cfg := mustLoad(t, metricsYAML)
	cfg.RecordEvents = true
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	reg := prometheus.NewPedanticRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{Histograms: true})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	http.NewServeMux().Handle("/bulkheads", r.Handler())
	pay, _ := r.Semaphore("payment")
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	_ = pay.Do(ctx, fn) // the first event makes the series
	const runs = 100
	if a := testing.AllocsPerRun(runs, func() { _ = pay.Do(ctx, fn) }); a != 0 {
		t.Errorf("%v allocations per call, want 0", a)
	}
	// The calls were observed and recorded all the same.
	if got := histSeries(t, reg, "payment")["bulkhead_run_duration_seconds/"]; got != runs+2 {
		t.Errorf("run histogram counted %d calls, want %d", got, runs+2)
	}
	_, body := getStatus(t, r.Handler(), "/bulkheads?name=payment")
	if n := strings.Count(body, `"outcome": "success"`); n != 50 {
		t.Errorf("status page shows %d finished calls, want 50 (the ring's 100 events)", n)
	}
}

// TestBucketsMustIncrease: buckets that do not strictly increase would
// make the histograms fail at every scrape; they are refused up front.
func TestBucketsMustIncrease(t *testing.T) {
	r := newTestRegistry(t, metricsYAML)
	for _, b := range [][]float64{{1, 1}, {0.5, 0.1}} {
		_, err := r.RegisterMetrics(prometheus.NewPedanticRegistry(), MetricsOptions{Histograms: true, Buckets: b})
		if err == nil || !strings.Contains(err.Error(), "Buckets must be strictly increasing") {
			t.Errorf("buckets %v: %v", b, err)
		}
	}
}

// TestMetricsTellKindsApart: a semaphore and a pool of one name are two
// series, told apart by the kind label.
func TestMetricsTellKindsApart(t *testing.T) {
	r := newTestRegistry(t, "bulkhead:\n  instances: {x: {maxConcurrentCalls: 3}}\nthread-pool-bulkhead:\n  instances: {x: {maxWorkers: 2}}\n")
	reg := prometheus.NewPedanticRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{Histograms: true})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	const want = `
# HELP bulkhead_max_allowed_concurrent_calls The limit in force: permits (semaphore) or workers (pool).
# TYPE bulkhead_max_allowed_concurrent_calls gauge
bulkhead_max_allowed_concurrent_calls{kind="pool",name="x"} 2
bulkhead_max_allowed_concurrent_calls{kind="semaphore",name="x"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "bulkhead_max_allowed_concurrent_calls"); err != nil {
		t.Fatal(err)
	}
	s, _ := r.Semaphore("x")
	_ = s.Do(context.Background(), func(context.Context) error { return nil })
	p, _ := r.Remove(bulkhead.Pool, "x")
	_ = p.(*pool.Bulkhead).Close(context.Background())
	if got := histSeries(t, reg, "x"); len(got) != 2 {
		t.Fatalf("removing the pool x touched the semaphore x's histograms: %v", got)
	}
}

// TestTwoRegistriesOnOnePrometheusRegistry exports two registries, each
// with a bulkhead called payment, to one prometheus.Registry: each is
// registered through prometheus.WrapRegistererWith with a label of its own,
// and their series, histograms included, stay apart. Registering the second
// as it is fails with an error that says how to do it.
func TestTwoRegistriesOnOnePrometheusRegistry(t *testing.T) {
	const y = "bulkhead: {instances: {payment: {maxConcurrentCalls: 1}}}"
	a, b := newTestRegistry(t, y), newTestRegistry(t, y)
	reg := prometheus.NewPedanticRegistry()
	unA, err := a.RegisterMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"registry": "a"}, reg), MetricsOptions{Histograms: true})
	if err != nil {
		t.Fatal(err)
	}
	defer unA()

	plain := prometheus.NewRegistry()
	unPlain, err := a.RegisterMetrics(plain, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.RegisterMetrics(plain, MetricsOptions{})
	if _, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); !ok || !strings.Contains(err.Error(), "prometheus.WrapRegistererWith") {
		t.Errorf("second registry registered as it is: err = %v, want an AlreadyRegisteredError naming WrapRegistererWith", err)
	}
	unPlain()
	unB, err := b.RegisterMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"registry": "b"}, reg), MetricsOptions{Histograms: true})
	if err != nil {
		t.Fatal(err)
	}
	defer unB()

	// a's payment runs one call, b's two.
	for i, r := range []*Registry{a, b} {
		pay, err := r.Semaphore("payment")
		if err != nil {
			t.Fatal(err)
		}
		for range i + 1 {
			if err := pay.Do(context.Background(), func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	series := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				ls := map[string]string{}
				for _, l := range m.GetLabel() {
					ls[l.GetName()] = l.GetValue()
				}
				k := mf.GetName() + "{" + ls["registry"] + "," + ls["name"] + "," + ls["outcome"] + "}"
				switch mf.GetType().String() {
				case "COUNTER":
					out[k] = m.GetCounter().GetValue()
				case "HISTOGRAM":
					out[k] = float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
		return out
	}
	got := series()
	want := map[string]float64{
		"bulkhead_calls_permitted_total{a,payment,}":          1,
		"bulkhead_calls_permitted_total{b,payment,}":          2,
		"bulkhead_run_duration_seconds{a,payment,}":           1,
		"bulkhead_run_duration_seconds{b,payment,}":           2,
		"bulkhead_wait_duration_seconds{a,payment,permitted}": 1,
		"bulkhead_wait_duration_seconds{b,payment,permitted}": 2,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	unA()
	got = series()
	for k := range got {
		if strings.Contains(k, "{a,") {
			t.Errorf("%s still exported after a's unregister", k)
		}
	}
	if got["bulkhead_calls_permitted_total{b,payment,}"] != 2 {
		t.Errorf("b's series after a's unregister: %v", got)
	}
}

// With Resilience4jNames, each of Resilience4j's names is emitted for the
// kind Micrometer emits it for, as docs/metrics.md lists them: a name in
// both sections is one series of each, not two.
func TestCollectorResilience4jNamesPerKind(t *testing.T) {
	// The table of docs/metrics.md's "Resilience4j names": name -> kinds.
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc[strings.Index(string(doc), "## Resilience4j names"):])
	section = section[:strings.Index(section, "\n## ")]
	row := regexp.MustCompile("(?m)^\\| `(resilience4j_bulkhead_[a-z_]+)` \\| ([a-z ]+) \\|")
	documented := map[string]map[string]bool{"semaphore": {}, "pool": {}}
	kinds := map[string][]string{"semaphores only": {"semaphore"}, "pools only": {"pool"}, "both kinds": {"semaphore", "pool"}}
	names := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		ks, ok := kinds[m[2]]
		if !ok {
			t.Fatalf("docs/metrics.md: %s is emitted for %q, want semaphores only, pools only or both kinds", m[1], m[2])
		}
		names[m[1]] = true
		for _, k := range ks {
			documented[k][m[1]] = true
		}
	}
	// What Resilience4j's Micrometer binders emit (TaggedBulkheadMetrics,
	// TaggedThreadPoolBulkheadMetrics): the doc must say the same.
	micrometer := map[string][]string{
		"semaphore": {"available_concurrent_calls", "max_allowed_concurrent_calls"},
		"pool": {"queue_depth", "queue_capacity", "thread_pool_size", "max_thread_pool_size",
			"core_thread_pool_size", "active_thread_count", "available_thread_count"},
	}
	for k, ns := range micrometer {
		want := map[string]bool{}
		for _, n := range ns {
			want["resilience4j_bulkhead_"+n] = true
		}
		if !maps.Equal(documented[k], want) {
			t.Errorf("docs/metrics.md lists %v for %s, Micrometer emits %v", slices.Sorted(maps.Keys(documented[k])), k, ns)
		}
	}

	r := newTestRegistry(t, `
bulkhead:
  instances:
    shared: {maxConcurrentCalls: 2}
thread-pool-bulkhead:
  instances:
    shared: {maxWorkers: 3, queueCapacity: 5}
`)
	reg := prometheus.NewPedanticRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{Resilience4jNames: true})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	emitted := map[string]map[string]bool{"semaphore": {}, "pool": {}}
	for _, mf := range mfs {
		if !names[mf.GetName()] {
			continue
		}
		if n := len(mf.GetMetric()); n != 1 {
			t.Errorf("%s: %d series for the name shared, want 1", mf.GetName(), n)
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" {
					emitted[l.GetValue()][mf.GetName()] = true
				}
			}
		}
	}
	for k := range documented {
		if !maps.Equal(emitted[k], documented[k]) {
			t.Errorf("%s: emitted %v, docs/metrics.md lists %v", k,
				slices.Sorted(maps.Keys(emitted[k])), slices.Sorted(maps.Keys(documented[k])))
		}
	}
}

// bulkhead_rejections_total splits bulkhead_calls_rejected_total by reason
// (every reason has its series, and they add up to the total), and the
// line's modes have their gauges.
func TestCollectorRejectionsByReason(t *testing.T) {
	r := newTestRegistry(t, "bulkhead:\n  instances:\n    payment: {maxConcurrentCalls: 1, maxWaitDuration: 1h}\n")
	pay, err := r.Semaphore("payment")
	if err != nil {
		t.Fatal(err)
	}
	if err := pay.Reconfigure(semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour,
		MaxWaitingCalls: 1, QueueOrder: bulkhead.LIFO, MinDeadlineSlack: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pay.TryAcquire()
	pay.TryAcquire() // full
	near, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := pay.Acquire(near); !errors.Is(err, bulkhead.ErrBulkheadFull) { // deadline
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- pay.Acquire(ctx) }()
	for pay.Stats().Waiting != 1 {
		runtime.Gosched() // only until it waits
	}
	second := make(chan error, 1)
	go func() { second <- pay.Acquire(ctx) }()
	if err := <-first; !errors.Is(err, bulkhead.ErrBulkheadFull) { // the oldest, dropped for the newcomer: waiters
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	var want strings.Builder
	want.WriteString("# HELP bulkhead_rejections_total Calls refused, by reason (full, timeout, waiters, deadline, codel, key, total, keys, priority, displaced); they add up to calls_rejected_total.\n# TYPE bulkhead_rejections_total counter\n")
	for _, reason := range bulkhead.Reasons {
		n := map[bulkhead.Reason]int{bulkhead.ReasonFull: 1, bulkhead.ReasonDeadline: 1, bulkhead.ReasonWaiters: 1}[reason]
		fmt.Fprintf(&want, "bulkhead_rejections_total{kind=\"semaphore\",name=\"payment\",reason=%q} %d\n", reason, n)
	}
	want.WriteString(`# HELP bulkhead_calls_rejected_total Calls refused because the bulkhead was full, at once or after waiting the maximum wait.
# TYPE bulkhead_calls_rejected_total counter
bulkhead_calls_rejected_total{kind="semaphore",name="payment"} 3
# HELP bulkhead_queue_lifo 1 while the line of waiters serves the newest first (LIFO, or adaptive LIFO switched to it), else 0.
# TYPE bulkhead_queue_lifo gauge
bulkhead_queue_lifo{kind="semaphore",name="payment"} 1
# HELP bulkhead_codel_overloaded 1 while CoDel finds the line of waiters overloaded (its shortest wait above the target for an interval), else 0.
# TYPE bulkhead_codel_overloaded gauge
bulkhead_codel_overloaded{kind="semaphore",name="payment"} 0
`)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want.String()), "bulkhead_rejections_total",
		"bulkhead_calls_rejected_total", "bulkhead_queue_lifo", "bulkhead_codel_overloaded"); err != nil {
		t.Fatal(err)
	}
	pay.Release()
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	pay.Release()
}
