package bulkheadotel_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/bulkheadotel"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/registry"
	"github.com/bulkhead-go/bulkhead/semaphore"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"
)

// ants starts goroutines of its own when the pool package loads.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

// A registry is a Source as it is.
var _ bulkheadotel.Source = (*registry.Registry)(nil)

func newReader(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	return r, mp
}

// collect returns the metrics of bulkheadotel's scope by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	ms := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != bulkheadotel.ScopeName {
			t.Fatalf("scope %q, want %q", sm.Scope.Name, bulkheadotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			ms[m.Name] = m
		}
	}
	return ms
}

func attrs(name, kind string, result ...string) attribute.Set {
	kv := []attribute.KeyValue{attribute.String("bulkhead.name", name), attribute.String("bulkhead.kind", kind)}
	if len(result) > 0 {
		kv = append(kv, attribute.String("bulkhead.result", result[0]))
	}
	return attribute.NewSet(kv...)
}

// value returns the int64 point of metric name with attributes set, and
// whether there is one.
func value(t *testing.T, ms map[string]metricdata.Metrics, name string, set attribute.Set) (int64, bool) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0, false
	}
	var dps []metricdata.DataPoint[int64]
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		dps = d.DataPoints
	case metricdata.Gauge[int64]:
		dps = d.DataPoints
	default:
		t.Fatalf("%s: data %T, want metricdata.Sum[int64] or Gauge[int64]", name, m.Data)
	}
	for _, p := range dps {
		if p.Attributes.Equals(&set) {
			return p.Value, true
		}
	}
	return 0, false
}

func check(t *testing.T, ms map[string]metricdata.Metrics, name string, set attribute.Set, want int64) {
	t.Helper()
	got, ok := value(t, ms, name, set)
	if !ok {
		t.Errorf("%s{%s}: no point", name, set.Encoded(attribute.DefaultEncoder()))
	} else if got != want {
		t.Errorf("%s{%s}: got %d, want %d", name, set.Encoded(attribute.DefaultEncoder()), got, want)
	}
}

// points counts the points of our scope's metrics.
func points(ms map[string]metricdata.Metrics) int {
	n := 0
	for _, m := range ms {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			n += len(d.DataPoints)
		case metricdata.Gauge[int64]:
			n += len(d.DataPoints)
		case metricdata.Histogram[float64]:
			n += len(d.DataPoints)
		}
	}
	return n
}

// Every instrument, its kind and unit: the names docs/metrics.md lists.
func TestInstruments(t *testing.T) {
	r, mp := newReader(t)
	b, _ := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 2})
	keyed, _ := semaphore.NewKeyed[string]("tenants", semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: 1}})
	shadowed, err := semaphore.New("checkout", semaphore.Config{MaxConcurrentCalls: 2, Shadow: &semaphore.Shadow{MaxConcurrentCalls: 1}})
	if err != nil {
		t.Fatal(err)
	}
	shadowedPool, err := pool.New("mail", pool.Config{MaxWorkers: 2, Shadow: &pool.Shadow{MaxWorkers: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer shadowedPool.Close(context.Background())
	unregister, err := bulkheadotel.Register(mp, bulkheadotel.Bulkheads(b, keyed, shadowed, shadowedPool), bulkheadotel.Options{Histograms: true})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	b.Do(context.Background(), func(context.Context) error { return nil })
	ms := collect(t, r)
	want := map[string]string{ // name: kind unit
		"bulkhead.limit":              "updown {call}",
		"bulkhead.available_calls":    "updown {call}",
		"bulkhead.active_calls":       "updown {call}",
		"bulkhead.waiting_calls":      "updown {call}",
		"bulkhead.queued_calls":       "updown {call}",
		"bulkhead.queue.limit":        "updown {call}",
		"bulkhead.calls":              "counter {call}",
		"bulkhead.finished_calls":     "counter {call}",
		"bulkhead.failed_calls":       "counter {call}",
		"bulkhead.rejections":         "counter {call}",
		"bulkhead.codel.overloaded":   "gauge 1",
		"bulkhead.queue.lifo":         "gauge 1",
		"bulkhead.call.time_in_queue": "histogram s",
		"bulkhead.call.duration":      "histogram s",
		// keyed bulkheads
		"bulkhead.active_keys":  "updown {key}",
		"bulkhead.idle_keys":    "updown {key}",
		"bulkhead.evicted_keys": "counter {key}",
		// shadowed and observe-only bulkheads (the queue's: pools)
		"bulkhead.shadow.limit":          "updown {call}",
		"bulkhead.shadow.active_calls":   "updown {call}",
		"bulkhead.shadow.observe":        "gauge 1",
		"bulkhead.shadow.would_reject":   "counter {call}",
		"bulkhead.shadow.would_wait":     "counter {call}",
		"bulkhead.shadow.would_time_out": "counter {call}",
		"bulkhead.shadow.queued_calls":   "updown {call}",
		"bulkhead.shadow.queue.limit":    "updown {call}",
	}
	for name, m := range ms {
		var kind string
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			kind = "updown"
			if d.IsMonotonic {
				kind = "counter"
			}
		case metricdata.Gauge[int64]:
			kind = "gauge"
		case metricdata.Histogram[float64]:
			kind = "histogram"
		}
		if got := kind + " " + m.Unit; got != want[name] {
			t.Errorf("%s: got %q, want %q", name, got, want[name])
		}
		if m.Description == "" {
			t.Errorf("%s: no description", name)
		}
	}
	if len(ms) != len(want) {
		t.Errorf("got %d instruments, want %d", len(ms), len(want))
	}
}

// The values are those of Stats, for both kinds, under the attributes
// bulkhead.name and bulkhead.kind.
func TestReportsStats(t *testing.T) {
	r, mp := newReader(t)
	sem, _ := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 2, MaxWaitDuration: time.Hour})
	pl, err := pool.New("lookups", pool.Config{MaxWorkers: 1, QueueCapacity: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close(context.Background())
	unregister, err := bulkheadotel.Register(mp, bulkheadotel.Bulkheads(sem, pl), bulkheadotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()

	// Semaphore: one success, one failure, one call running, one waiting,
	// one cancelled while waiting.
	ctx := context.Background()
	sem.Do(ctx, func(context.Context) error { return nil })
	sem.Do(ctx, func(context.Context) error { return errors.New("boom") })
	p1, _ := sem.AcquirePermit(ctx)
	p2, _ := sem.AcquirePermit(ctx)
	cctx, cancel := context.WithCancel(ctx)
	waiting := make(chan error)
	go func() { waiting <- sem.Acquire(cctx) }()
	for sem.Stats().Waiting == 0 {
		time.Sleep(time.Millisecond) // until the caller waits; not a pass criterion
	}
	ms := collect(t, r)
	s := attrs("payment", "semaphore")
	check(t, ms, "bulkhead.limit", s, 2)
	check(t, ms, "bulkhead.available_calls", s, 0)
	check(t, ms, "bulkhead.active_calls", s, 2)
	check(t, ms, "bulkhead.waiting_calls", s, 1)
	check(t, ms, "bulkhead.queued_calls", s, 0)
	check(t, ms, "bulkhead.queue.limit", s, 0)
	check(t, ms, "bulkhead.calls", attrs("payment", "semaphore", "permitted"), 4)
	check(t, ms, "bulkhead.finished_calls", s, 2)
	check(t, ms, "bulkhead.failed_calls", s, 1)
	cancel()
	if err := <-waiting; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	p1.Release(nil)
	p2.Release(nil)
	if sem.TryAcquire() {
		sem.Release()
	}

	// Pool: one task running, two queued.
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		f, err := pl.TryGo(ctx, func(context.Context) error { <-release; return nil })
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { f.Wait(ctx) })
	}
	for pl.Stats().InFlight != 1 {
		time.Sleep(time.Millisecond) // until the first task runs; not a pass criterion
	}
	ms = collect(t, r)
	p := attrs("lookups", "pool")
	check(t, ms, "bulkhead.limit", p, 1)
	check(t, ms, "bulkhead.active_calls", p, 1)
	check(t, ms, "bulkhead.queued_calls", p, 2)
	check(t, ms, "bulkhead.queue.limit", p, 3)
	check(t, ms, "bulkhead.calls", attrs("lookups", "pool", "permitted"), 1)
	close(release)
	wg.Wait()

	ms = collect(t, r)
	check(t, ms, "bulkhead.calls", attrs("payment", "semaphore", "permitted"), 5)
	check(t, ms, "bulkhead.calls", attrs("payment", "semaphore", "rejected"), 0)
	check(t, ms, "bulkhead.calls", attrs("payment", "semaphore", "cancelled"), 1)
	check(t, ms, "bulkhead.finished_calls", s, 5)
	check(t, ms, "bulkhead.active_calls", s, 0)
	check(t, ms, "bulkhead.calls", attrs("lookups", "pool", "permitted"), 3)
	check(t, ms, "bulkhead.finished_calls", p, 3)
	check(t, ms, "bulkhead.failed_calls", p, 0)
}

// source is a Source whose bulkheads the test changes, like a registry's.
type source struct {
	mu sync.Mutex
	bs []bulkheadotel.Observable
}

func (s *source) Instances() []bulkhead.Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bulkheadotel.Bulkheads(s.bs...).Instances()
}

func (s *source) Subscribe(fn func(bulkhead.Event)) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bulkheadotel.Bulkheads(s.bs...).Subscribe(fn)
}

func (s *source) remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bs = slices.DeleteFunc(s.bs, func(b bulkheadotel.Observable) bool { return b.Name() == name })
}

// A bulkhead removed from its source stops being reported at the next
// collection; the others go on. The same name in both kinds is two series.
func TestRemovedInstanceStopsBeingReported(t *testing.T) {
	r, mp := newReader(t)
	a, _ := semaphore.New("a", semaphore.Config{MaxConcurrentCalls: 1})
	b, _ := semaphore.New("b", semaphore.Config{MaxConcurrentCalls: 3})
	bp, err := pool.New("b", pool.Config{MaxWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer bp.Close(context.Background())
	src := &source{bs: []bulkheadotel.Observable{a, b, bp}}
	unregister, err := bulkheadotel.Register(mp, src, bulkheadotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()

	ms := collect(t, r)
	check(t, ms, "bulkhead.limit", attrs("a", "semaphore"), 1)
	check(t, ms, "bulkhead.limit", attrs("b", "semaphore"), 3)
	check(t, ms, "bulkhead.limit", attrs("b", "pool"), 2)

	src.remove("a")
	ms = collect(t, r)
	for name := range ms {
		if _, ok := value(t, ms, name, attrs("a", "semaphore")); ok {
			t.Errorf("%s: the removed bulkhead is still reported", name)
		}
	}
	check(t, ms, "bulkhead.limit", attrs("b", "semaphore"), 3)
	check(t, ms, "bulkhead.limit", attrs("b", "pool"), 2)
}

// Unregistering stops the reporting and the subscription.
func TestUnregisterStopsReporting(t *testing.T) {
	r, mp := newReader(t)
	b, _ := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 2})
	subscribed := 0
	src := &countingSource{Source: bulkheadotel.Bulkheads(b), subscribed: &subscribed}
	unregister, err := bulkheadotel.Register(mp, src, bulkheadotel.Options{Histograms: true})
	if err != nil {
		t.Fatal(err)
	}
	b.Do(context.Background(), func(context.Context) error { return nil })
	if n := points(collect(t, r)); n == 0 {
		t.Fatal("nothing reported while registered")
	}
	if subscribed != 1 {
		t.Fatalf("subscriptions: got %d, want 1", subscribed)
	}
	if err := unregister(); err != nil {
		t.Fatal(err)
	}
	if err := unregister(); err != nil {
		t.Fatalf("second unregister: %v", err)
	}
	if subscribed != 0 {
		t.Fatalf("subscriptions after unregister: got %d, want 0", subscribed)
	}
	ms := collect(t, r)
	for _, name := range []string{"bulkhead.limit", "bulkhead.calls", "bulkhead.active_calls"} {
		if _, ok := value(t, ms, name, attrs("payment", "semaphore")); ok {
			t.Errorf("%s: still reported after unregister", name)
		}
	}
}

type countingSource struct {
	bulkheadotel.Source
	subscribed *int
}

func (s *countingSource) Subscribe(fn func(bulkhead.Event)) func() {
	*s.subscribed++
	cancel := s.Source.Subscribe(fn)
	return func() { *s.subscribed--; cancel() }
}

// The histograms record wait and run times from events, like the
// Prometheus collector's: a call refused at once did not wait.
func TestHistograms(t *testing.T) {
	r, mp := newReader(t)
	b, _ := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 1})
	unregister, err := bulkheadotel.Register(mp, bulkheadotel.Bulkheads(b), bulkheadotel.Options{Histograms: true, Buckets: []float64{1}})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	ctx := context.Background()
	for range 3 {
		b.Do(ctx, func(context.Context) error { return nil })
	}
	p, _ := b.AcquirePermit(ctx)
	if err := b.Do(ctx, func(context.Context) error { return nil }); !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("got %v, want a rejection", err)
	}
	p.Release(nil)

	ms := collect(t, r)
	hist := func(name string, set attribute.Set) metricdata.HistogramDataPoint[float64] {
		t.Helper()
		for _, dp := range ms[name].Data.(metricdata.Histogram[float64]).DataPoints {
			if dp.Attributes.Equals(&set) {
				return dp
			}
		}
		t.Fatalf("%s{%s}: no point", name, set.Encoded(attribute.DefaultEncoder()))
		return metricdata.HistogramDataPoint[float64]{}
	}
	if dp := hist("bulkhead.call.time_in_queue", attrs("payment", "semaphore", "permitted")); dp.Count != 4 || !slices.Equal(dp.Bounds, []float64{1}) {
		t.Errorf("time in queue, permitted: got count %d bounds %v, want 4 [1]", dp.Count, dp.Bounds)
	}
	if dp := hist("bulkhead.call.duration", attrs("payment", "semaphore")); dp.Count != 4 {
		t.Errorf("duration: got count %d, want 4 (3 Do and 1 permit)", dp.Count)
	}
	for _, dp := range ms["bulkhead.call.time_in_queue"].Data.(metricdata.Histogram[float64]).DataPoints {
		if v, _ := dp.Attributes.Value("bulkhead.result"); v.AsString() == "rejected" {
			t.Errorf("a call refused at once was recorded as waiting: %v", dp)
		}
	}
}

func TestRegisterNil(t *testing.T) {
	_, mp := newReader(t)
	if _, err := bulkheadotel.Register(nil, bulkheadotel.Bulkheads(), bulkheadotel.Options{}); err == nil {
		t.Error("nil MeterProvider: no error")
	}
	if _, err := bulkheadotel.Register(mp, nil, bulkheadotel.Options{}); err == nil {
		t.Error("nil Source: no error")
	}
}

// Two sources that both hold a semaphore "payment", registered on one
// MeterProvider with attributes of their own, are two series each (limits
// 3 and 5, not one series of 8), histograms included.
func TestAttributesTellSourcesApart(t *testing.T) {
	r, mp := newReader(t)
	orders, _ := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 3})
	billing, _ := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 5})
	for _, src := range []struct {
		name string
		b    *semaphore.Bulkhead
	}{{"orders", orders}, {"billing", billing}} {
		unregister, err := bulkheadotel.Register(mp, bulkheadotel.Bulkheads(src.b), bulkheadotel.Options{
			Histograms: true, Attributes: []attribute.KeyValue{attribute.String("registry", src.name)}})
		if err != nil {
			t.Fatal(err)
		}
		defer unregister()
	}
	orders.Do(context.Background(), func(context.Context) error { return nil })

	ms := collect(t, r)
	with := func(registry string, set attribute.Set) attribute.Set {
		return attribute.NewSet(append(set.ToSlice(), attribute.String("registry", registry))...)
	}
	check(t, ms, "bulkhead.limit", with("orders", attrs("payment", "semaphore")), 3)
	check(t, ms, "bulkhead.limit", with("billing", attrs("payment", "semaphore")), 5)
	check(t, ms, "bulkhead.calls", with("orders", attrs("payment", "semaphore", "permitted")), 1)
	check(t, ms, "bulkhead.calls", with("billing", attrs("payment", "semaphore", "permitted")), 0)
	reason := attribute.NewSet(attribute.String("bulkhead.name", "payment"), attribute.String("bulkhead.kind", "semaphore"),
		attribute.String("bulkhead.reason", "full"))
	check(t, ms, "bulkhead.rejections", with("orders", reason), 0)
	check(t, ms, "bulkhead.queue.lifo", with("billing", attrs("payment", "semaphore")), 0)
	if n := len(ms["bulkhead.limit"].Data.(metricdata.Sum[int64]).DataPoints); n != 2 {
		t.Errorf("bulkhead.limit has %d points, want 2", n)
	}
	dps := ms["bulkhead.call.duration"].Data.(metricdata.Histogram[float64]).DataPoints
	want := with("orders", attrs("payment", "semaphore"))
	if len(dps) != 1 || !dps[0].Attributes.Equals(&want) || dps[0].Count != 1 {
		t.Errorf("bulkhead.call.duration points %v, want one of count 1 with %v", dps, want.ToSlice())
	}
}

func TestAttributesMustBeValid(t *testing.T) {
	_, mp := newReader(t)
	b, _ := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 1})
	for _, c := range []struct {
		kv   []attribute.KeyValue
		want string
	}{
		{[]attribute.KeyValue{attribute.String("bulkhead.name", "x")}, `Options.Attributes[0]: key "bulkhead.name" is an instrument's own`},
		{[]attribute.KeyValue{attribute.String("registry", "a"), attribute.String("registry", "b")}, `Options.Attributes[1]: key "registry" is repeated`},
		{[]attribute.KeyValue{attribute.String("", "a")}, `Options.Attributes[0]: key "" is empty`},
	} {
		_, err := bulkheadotel.Register(mp, bulkheadotel.Bulkheads(b), bulkheadotel.Options{Attributes: c.kv})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Attributes %v: got %v, want an error with %q", c.kv, err, c.want)
		}
	}
}

// bulkhead.rejections splits the rejected calls by bulkhead.reason, and
// the line's modes have their gauges.
func TestRejectionsByReason(t *testing.T) {
	r, mp := newReader(t)
	sem, _ := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour,
		QueueOrder: bulkhead.LIFO, MinDeadlineSlack: time.Hour})
	unregister, err := bulkheadotel.Register(mp, bulkheadotel.Bulkheads(sem), bulkheadotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	sem.TryAcquire()
	sem.TryAcquire() // full
	near, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = sem.Acquire(near) // deadline
	_ = sem.Acquire(near) // deadline
	sem.Release()
	ms := collect(t, r)
	reason := func(r string) attribute.Set {
		return attribute.NewSet(attribute.String("bulkhead.name", "payment"), attribute.String("bulkhead.kind", "semaphore"),
			attribute.String("bulkhead.reason", r))
	}
	for _, rs := range bulkhead.Reasons {
		want := map[bulkhead.Reason]int64{bulkhead.ReasonFull: 1, bulkhead.ReasonDeadline: 2}[rs]
		check(t, ms, "bulkhead.rejections", reason(rs.String()), want)
	}
	check(t, ms, "bulkhead.calls", attrs("payment", "semaphore", "rejected"), 3)
	check(t, ms, "bulkhead.queue.lifo", attrs("payment", "semaphore"), 1)
	check(t, ms, "bulkhead.codel.overloaded", attrs("payment", "semaphore"), 0)
}

// A keyed bulkhead reports its keys' counts, and bulkhead.rejections takes
// the reasons key, total and keys from its KeyStats, so that they add up
// to bulkhead.calls rejected; no point carries a key.
func TestKeyedBulkheads(t *testing.T) {
	r, mp := newReader(t)
	k, err := semaphore.NewKeyed[string]("tenants", semaphore.KeyedConfig{
		PerKey: semaphore.Config{MaxConcurrentCalls: 2}, MaxConcurrentCalls: 3, MaxActiveKeys: 2})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := pool.NewKeyed[string]("exports", pool.KeyedConfig{Config: pool.Config{MaxWorkers: 1, QueueCapacity: 2},
		MaxRunningPerKey: 1, QueueCapacityPerKey: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer kp.Close(context.Background())
	plain, _ := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 1})
	unregister, err := bulkheadotel.Register(mp, bulkheadotel.Bulkheads(k, kp, plain), bulkheadotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()

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

	// The pool: one task of a key running, one queued, a third refused
	// because the key's lane is full.
	ctx := context.Background()
	release := make(chan struct{})
	task := func(context.Context) (int, error) { <-release; return 0, nil }
	f1, err := pool.SubmitKeyed(ctx, kp, "secret-user-a", task)
	if err != nil {
		t.Fatal(err)
	}
	for kp.Stats().InFlight != 1 {
		time.Sleep(time.Millisecond) // until the first task runs; not a pass criterion
	}
	f2, err := pool.SubmitKeyed(ctx, kp, "secret-user-a", task)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.SubmitKeyed(ctx, kp, "secret-user-a", task); !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("third task of a full lane: %v", err)
	}

	ms := collect(t, r)
	s, p := attrs("tenants", "semaphore"), attrs("exports", "pool")
	check(t, ms, "bulkhead.active_keys", s, 2)
	check(t, ms, "bulkhead.idle_keys", s, 0)
	check(t, ms, "bulkhead.evicted_keys", s, 0)
	check(t, ms, "bulkhead.active_keys", p, 1)
	check(t, ms, "bulkhead.calls", attrs("tenants", "semaphore", "rejected"), 3)
	reason := func(name, kind, r string) attribute.Set {
		return attribute.NewSet(attribute.String("bulkhead.name", name), attribute.String("bulkhead.kind", kind),
			attribute.String("bulkhead.reason", r))
	}
	for _, rs := range bulkhead.Reasons {
		want := map[bulkhead.Reason]int64{bulkhead.ReasonKey: 1, bulkhead.ReasonTotal: 1, bulkhead.ReasonKeys: 1}[rs]
		check(t, ms, "bulkhead.rejections", reason("tenants", "semaphore", rs.String()), want)
		check(t, ms, "bulkhead.rejections", reason("exports", "pool", rs.String()), map[bulkhead.Reason]int64{bulkhead.ReasonKey: 1}[rs])
	}
	if _, ok := value(t, ms, "bulkhead.active_keys", attrs("payment", "semaphore")); ok {
		t.Error("a plain semaphore has a bulkhead.active_keys point")
	}
	for name, m := range ms {
		if d, ok := m.Data.(metricdata.Sum[int64]); ok {
			for _, pt := range d.DataPoints {
				if enc := pt.Attributes.Encoded(attribute.DefaultEncoder()); strings.Contains(enc, "secret-user") {
					t.Errorf("%s: a key reached the attributes: %s", name, enc)
				}
			}
		}
	}

	// Idle keys beyond the cache are evicted.
	for _, p := range held {
		p.Release(nil)
	}
	for i := range 100 {
		if p, ok := k.TryAcquire(fmt.Sprint("churn-", i)); ok {
			p.Release(nil)
		}
	}
	close(release)
	f1.Wait(ctx)
	f2.Wait(ctx)
	ks := k.KeyStats()
	if ks.Evicted == 0 || ks.IdleKeys == 0 {
		t.Fatalf("KeyStats after the churn: %+v, want idle and evicted keys", ks)
	}
	ms = collect(t, r)
	check(t, ms, "bulkhead.active_keys", s, 0)
	check(t, ms, "bulkhead.idle_keys", s, int64(ks.IdleKeys))
	check(t, ms, "bulkhead.evicted_keys", s, int64(ks.Evicted))
	check(t, ms, "bulkhead.active_keys", p, 0)
}

// A shadowed and an observe-only semaphore report their ShadowStats; a
// plain one has no shadow points.
func TestShadowStats(t *testing.T) {
	r, mp := newReader(t)
	// Shadowed: 2 enforced, 1 in the shadow, which waits 1ns of the hour.
	shadowed, err := semaphore.New("checkout", semaphore.Config{MaxConcurrentCalls: 2, MaxWaitDuration: time.Hour,
		Shadow: &semaphore.Shadow{MaxConcurrentCalls: 1, MaxWaitDuration: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	observe, err := semaphore.New("search", semaphore.Config{MaxConcurrentCalls: 1, Observe: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 1})
	unregister, err := bulkheadotel.Register(mp, bulkheadotel.Bulkheads(shadowed, observe, plain), bulkheadotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()

	ctx := context.Background()
	var wg sync.WaitGroup
	// hold starts a Do on b that runs until release is closed, and returns
	// once it runs.
	hold := func(b *semaphore.Bulkhead, release chan struct{}) {
		in := make(chan struct{})
		wg.Go(func() { b.Do(ctx, func(context.Context) error { close(in); <-release; return nil }) })
		<-in
	}
	first, rest := make(chan struct{}), make(chan struct{})
	hold(shadowed, first) // takes the shadow's permit
	hold(shadowed, rest)  // finds the shadow full: would wait
	hold(observe, rest)   // takes the shadow's permit
	hold(observe, rest)   // runs (observe enforces nothing), finds the shadow full: would reject
	in := make(chan struct{})
	wg.Go(func() { shadowed.Do(ctx, func(context.Context) error { close(in); <-rest; return nil }) })
	for shadowed.Stats().Waiting != 1 {
		time.Sleep(time.Millisecond) // until the third call waits; not a pass criterion
	}

	ms := collect(t, r)
	c, s := attrs("checkout", "semaphore"), attrs("search", "semaphore")
	check(t, ms, "bulkhead.shadow.limit", c, 1)
	check(t, ms, "bulkhead.shadow.active_calls", c, 1)
	check(t, ms, "bulkhead.shadow.observe", c, 0)
	check(t, ms, "bulkhead.shadow.would_reject", c, 0)
	check(t, ms, "bulkhead.shadow.would_wait", c, 1)
	check(t, ms, "bulkhead.shadow.would_time_out", c, 0)
	check(t, ms, "bulkhead.shadow.limit", s, 1)
	check(t, ms, "bulkhead.shadow.active_calls", s, 1)
	check(t, ms, "bulkhead.shadow.observe", s, 1)
	check(t, ms, "bulkhead.shadow.would_reject", s, 1)
	check(t, ms, "bulkhead.shadow.would_wait", s, 0)
	check(t, ms, "bulkhead.active_calls", s, 2) // enforced nothing
	for name := range ms {
		if _, ok := value(t, ms, name, attrs("payment", "semaphore")); ok && strings.HasPrefix(name, "bulkhead.shadow.") {
			t.Errorf("a plain semaphore has a %s point", name)
		}
	}

	// The first call ends: the waiter gets its permit after more than the
	// shadow's 1ns wait, and the shadow's permit.
	close(first)
	<-in
	ms = collect(t, r)
	check(t, ms, "bulkhead.shadow.would_time_out", c, 1)
	check(t, ms, "bulkhead.shadow.active_calls", c, 1)
	close(rest)
	wg.Wait()
	ms = collect(t, r)
	check(t, ms, "bulkhead.shadow.active_calls", c, 0)
	check(t, ms, "bulkhead.shadow.active_calls", s, 0)
}

// A shadowed pool reports its ShadowStats, its shadow queue's too.
func TestPoolShadowStats(t *testing.T) {
	r, mp := newReader(t)
	b, err := pool.New("mail", pool.Config{MaxWorkers: 4, QueueCapacity: 4, Shadow: &pool.Shadow{MaxWorkers: 1, QueueCapacity: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	unregister, err := bulkheadotel.Register(mp, bulkheadotel.Bulkheads(b), bulkheadotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	release := make(chan struct{})
	var fs []*future.Future[struct{}]
	for range 3 { // the shadow's worker, its queue slot, one it would reject
		f, err := b.TryGo(context.Background(), func(context.Context) error { <-release; return nil })
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	ms := collect(t, r)
	p := attrs("mail", "pool")
	for name, want := range map[string]int64{"bulkhead.shadow.limit": 1, "bulkhead.shadow.active_calls": 1, "bulkhead.shadow.queued_calls": 1,
		"bulkhead.shadow.queue.limit": 1, "bulkhead.shadow.would_wait": 1, "bulkhead.shadow.would_reject": 1, "bulkhead.shadow.would_time_out": 0} {
		check(t, ms, name, p, want)
	}
	close(release)
	for _, f := range fs {
		f.Wait(context.Background())
	}
	ms = collect(t, r)
	check(t, ms, "bulkhead.shadow.active_calls", p, 0)
	check(t, ms, "bulkhead.shadow.queued_calls", p, 0)
}
