package registry

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/semaphore"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

const testYAML = `
resilience4j:
  bulkhead:
    configs:
      default: {maxConcurrentCalls: 10}
    instances:
      payment:   { maxConcurrentCalls: 2, maxWaitDuration: 0 }
      inventory: { maxConcurrentCalls: 8, maxWaitDuration: 0 }
  thread-pool-bulkhead:
    configs:
      default: {maxThreadPoolSize: 3, queueCapacity: 7}
    instances:
      emails: {maxWorkers: 2, queueCapacity: 5, keepAlive: 1s}
`

// newTestRegistry loads y and builds a registry closed at the end of the test.
func newTestRegistry(t *testing.T, y string) *Registry {
	t.Helper()
	var cfg Config // "" is an empty configuration, which Load refuses
	if y != "" {
		cfg = mustLoad(t, y)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

func TestNewCreatesListedInstances(t *testing.T) {
	r := newTestRegistry(t, testYAML)
	var names []string
	for _, in := range r.Instances() {
		names = append(names, in.Name()+":"+in.Stats().Kind.String())
	}
	if got, want := names, []string{"emails:pool", "inventory:semaphore", "payment:semaphore"}; !slices.Equal(got, want) {
		t.Fatalf("Instances() = %v, want %v", got, want)
	}
	in, ok := r.Find(bulkhead.Semaphore, "payment")
	if !ok {
		t.Fatal("payment not found")
	}
	if got := in.(*semaphore.Bulkhead).Config(); got != (semaphore.Config{MaxConcurrentCalls: 2}) {
		t.Errorf("payment config %+v", got)
	}
	e, _ := r.Find(bulkhead.Pool, "emails")
	if got := e.(*pool.Bulkhead).Config(); got != (pool.Config{MaxWorkers: 2, QueueCapacity: 5, KeepAlive: time.Second}) {
		t.Errorf("emails config %+v", got)
	}
	if _, ok := r.Find(bulkhead.Semaphore, "unlisted"); ok {
		t.Error("Find created an instance")
	}
}

func TestUnlistedGetsDefault(t *testing.T) {
	r := newTestRegistry(t, testYAML)
	s, err := r.Semaphore("search")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Config(); got != (semaphore.Config{MaxConcurrentCalls: 10}) {
		t.Errorf("unlisted semaphore got %+v, want configs.default", got)
	}
	p, err := r.Pool("thumbs")
	if err != nil {
		t.Fatal(err)
	}
	want := pool.DefaultConfig()
	want.MaxWorkers, want.QueueCapacity = 3, 7
	if got := p.Config(); got != want {
		t.Errorf("unlisted pool got %+v, want %+v", got, want)
	}
	again, _ := r.Semaphore("search")
	if again != s {
		t.Error("a second Semaphore call returned another instance")
	}

	// Without a default config, the packages' defaults apply.
	r2 := newTestRegistry(t, "")
	s2, _ := r2.Semaphore("x")
	if s2.Config() != semaphore.DefaultConfig() {
		t.Errorf("got %+v, want semaphore.DefaultConfig()", s2.Config())
	}
	p2, _ := r2.Pool("y")
	if p2.Config() != pool.DefaultConfig() {
		t.Errorf("got %+v, want pool.DefaultConfig()", p2.Config())
	}
}

func TestConcurrentGetOrCreateMakesOne(t *testing.T) {
	r := newTestRegistry(t, "")
	var added atomic.Int32
	defer r.SubscribeEntries(func(e EntryEvent) {
		if e.Type == EntryAdded {
			added.Add(1)
		}
	})()
	const n = 32
	sems := make([]*semaphore.Bulkhead, n)
	pools := make([]*pool.Bulkhead, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			var err error
			if sems[i], err = r.Semaphore("s"); err != nil {
				t.Error(err)
			}
			if pools[i], err = r.Pool("p"); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if sems[i] != sems[0] || pools[i] != pools[0] {
			t.Fatalf("caller %d got another instance", i)
		}
	}
	if got := added.Load(); got != 2 {
		t.Fatalf("%d added events, want 2", got)
	}
}

// TestKindsAreNamespaces: as in Resilience4j, a semaphore and a pool may
// share a name; they never see each other, and Remove takes one.
func TestKindsAreNamespaces(t *testing.T) {
	r := newTestRegistry(t, testYAML)
	p, err := r.Pool("payment") // the semaphore payment is listed; this pool is not
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Semaphore("payment")
	if err != nil || s.Config().MaxConcurrentCalls != 2 || p.Config().MaxWorkers != 3 {
		t.Fatalf("semaphore %+v, %v; pool %+v", s.Config(), err, p.Config())
	}
	if got := len(r.Instances()); got != 4 {
		t.Fatalf("%d instances, want 4", got)
	}
	if in, ok := r.Find(bulkhead.Pool, "payment"); !ok || in != p {
		t.Fatal("Find(Pool) did not find the pool")
	}
	if _, ok := r.Remove(bulkhead.Pool, "payment"); !ok {
		t.Fatal("pool not removed")
	}
	if in, ok := r.Find(bulkhead.Semaphore, "payment"); !ok || in != s {
		t.Fatal("removing the pool removed the semaphore")
	}
	_ = p.Close(context.Background())
	if _, err := r.Semaphore(""); err == nil {
		t.Error("an empty name was accepted")
	}
}

// TestStrictLookups: with Config.Strict, a name the configuration does not
// list is an error instead of a default bulkhead.
func TestStrictLookups(t *testing.T) {
	cfg := mustLoad(t, testYAML)
	cfg.Strict = true
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	if _, err := r.Semaphore("payment"); err != nil {
		t.Fatal(err)
	}
	// One "registry:" prefix, the kind and name, and the listed name it was
	// probably meant to be.
	_, err = r.Semaphore("paymnet")
	if want := `registry: no such bulkhead in the configuration: semaphore "paymnet" (did you mean "payment"?)`; !errors.Is(err, ErrNotConfigured) || err.Error() != want {
		t.Errorf("Semaphore(paymnet) = %v, want ErrNotConfigured reading %q", err, want)
	}
	_, err = r.Pool("payment")
	if want := `registry: no such bulkhead in the configuration: pool "payment"`; !errors.Is(err, ErrNotConfigured) || err.Error() != want {
		t.Errorf("Pool(payment) = %v, want ErrNotConfigured reading %q", err, want)
	}
	if len(r.Instances()) != 3 {
		t.Errorf("%d instances, want the 3 listed", len(r.Instances()))
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	_, err := New(Config{Pools: map[string]PoolSpec{"p": {MaxWorkers: new(0)}}})
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("New = %v, want a *ConfigError", err)
	}
}

func TestRemove(t *testing.T) {
	r := newTestRegistry(t, testYAML)
	var events []EntryEvent
	defer r.SubscribeEntries(func(e EntryEvent) { events = append(events, e) })()
	old, ok := r.Remove(bulkhead.Semaphore, "payment")
	if !ok || old.Name() != "payment" {
		t.Fatalf("Remove = %v, %v", old, ok)
	}
	if _, ok := r.Find(bulkhead.Semaphore, "payment"); ok {
		t.Fatal("still found after Remove")
	}
	if _, ok := r.Remove(bulkhead.Semaphore, "payment"); ok {
		t.Fatal("removed twice")
	}
	fresh, err := r.Semaphore("payment")
	if err != nil || fresh == old {
		t.Fatalf("after Remove got %p, %v; want a new instance", fresh, err)
	}
	if fresh.Config().MaxConcurrentCalls != 2 {
		t.Errorf("new payment has %+v, want its listed config", fresh.Config())
	}
	p, ok := r.Remove(bulkhead.Pool, "emails")
	if !ok {
		t.Fatal("emails not removed")
	}
	// The caller owns a removed pool.
	if err := p.(*pool.Bulkhead).Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []EntryEventType{EntryRemoved, EntryAdded, EntryRemoved}
	if len(events) != len(want) {
		t.Fatalf("events %v", events)
	}
	for i, e := range events {
		if e.Type != want[i] {
			t.Errorf("event %d is %v, want %v", i, e.Type, want[i])
		}
	}
}

func TestReconfigure(t *testing.T) {
	r := newTestRegistry(t, testYAML)
	search, _ := r.Semaphore("search") // unlisted: configs.default (10)
	var events []string
	defer r.SubscribeEntries(func(e EntryEvent) { events = append(events, e.Type.String()+":"+e.Name) })()

	// An invalid config changes nothing.
	if err := r.Reconfigure(Config{Semaphores: map[string]SemaphoreSpec{"payment": {MaxConcurrentCalls: new(-1)}}}); err == nil {
		t.Fatal("invalid config accepted")
	}
	pay, _ := r.Semaphore("payment")
	if pay.Config().MaxConcurrentCalls != 2 || len(events) != 0 {
		t.Fatalf("a refused Reconfigure changed things: %+v %v", pay.Config(), events)
	}

	next := mustLoad(t, `
bulkhead:
  configs:
    default: {maxConcurrentCalls: 4}
  instances:
    payment: {maxConcurrentCalls: 5, maxWaitDuration: 100ms}
    inventory: {maxConcurrentCalls: 8, maxWaitDuration: 0}
    fraud: {maxConcurrentCalls: 1}
thread-pool-bulkhead:
  instances:
    emails: {maxWorkers: 4, queueCapacity: 1, keepAlive: 1s}
`)
	if err := r.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	if got := pay.Config(); got != (semaphore.Config{MaxConcurrentCalls: 5, MaxWaitDuration: 100 * time.Millisecond}) {
		t.Errorf("payment %+v", got)
	}
	if got := search.Config().MaxConcurrentCalls; got != 4 {
		t.Errorf("unlisted search has %d, want the new default 4", got)
	}
	em, _ := r.Pool("emails")
	if got := em.Config(); got.MaxWorkers != 4 || got.QueueCapacity != 1 {
		t.Errorf("emails %+v", got)
	}
	if _, ok := r.Find(bulkhead.Semaphore, "fraud"); !ok {
		t.Error("newly listed fraud not created")
	}
	want := []string{"added:fraud", "reconfigured:emails", "reconfigured:payment", "reconfigured:search"}
	if !slices.Equal(events, want) {
		t.Errorf("events %v, want %v (inventory unchanged: no event)", events, want)
	}
}

// TestReconfigureLive checks that a live semaphore's new limit admits calls
// at once, through the registry.
func TestReconfigureLive(t *testing.T) {
	r := newTestRegistry(t, testYAML)
	pay, _ := r.Semaphore("payment")
	if !pay.TryAcquire() || !pay.TryAcquire() || pay.TryAcquire() {
		t.Fatal("want exactly 2 permits")
	}
	cfg := mustLoad(t, "bulkhead:\n  instances:\n    payment: {maxConcurrentCalls: 3}\n")
	if err := r.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if !pay.TryAcquire() {
		t.Fatal("the third permit is not available after growing to 3")
	}
	for range 3 {
		pay.Release()
	}
}

func TestSubscribeForwardsCallEvents(t *testing.T) {
	r := newTestRegistry(t, testYAML)
	var mu sync.Mutex
	var got []string
	cancel := r.Subscribe(func(e bulkhead.Event) {
		mu.Lock()
		got = append(got, e.Name+":"+e.Type.String())
		mu.Unlock()
	})
	pay, _ := r.Semaphore("payment")
	later, _ := r.Semaphore("later") // created after Subscribe
	ctx := context.Background()
	_ = pay.Do(ctx, func(context.Context) error { return nil })
	_ = later.Do(ctx, func(context.Context) error { return nil })
	em, _ := r.Pool("emails")
	f, err := em.TryGo(ctx, func(context.Context) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// The pool publishes finished after completing the future; Close
	// waits for the worker, so the event is in by then.
	cancel()
	cancel() // harmless
	mu.Lock()
	n := len(got)
	mu.Unlock()
	_ = pay.Do(ctx, func(context.Context) error { return nil })
	mu.Lock()
	defer mu.Unlock()
	for _, g := range got[n:] {
		if strings.HasPrefix(g, "payment:") {
			t.Fatalf("event after cancel: %v", got[n:])
		}
	}
	want := map[string]bool{"payment:permitted": true, "payment:finished": true, "later:permitted": true, "later:finished": true, "emails:permitted": true}
	for _, g := range got {
		delete(want, g)
	}
	if len(want) != 0 {
		t.Fatalf("missing %v in %v", want, got)
	}
}

func TestCloseClosesPools(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	r, err := New(mustLoad(t, testYAML))
	if err != nil {
		t.Fatal(err)
	}
	em, _ := r.Pool("emails")
	release := make(chan struct{})
	started := make(chan struct{})
	f, err := em.TryGo(context.Background(), func(context.Context) error {
		close(started)
		<-release
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	done := make(chan error, 1)
	go func() { done <- r.Close(context.Background()) }()
	// Close waits for the running task; Pool is refused meanwhile or after.
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := f.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := em.TryGo(context.Background(), func(context.Context) error { return nil }); !errors.Is(err, bulkhead.ErrClosed) {
		t.Errorf("pool still accepts work after registry Close: %v", err)
	}
	if _, err := r.Semaphore("new"); !errors.Is(err, bulkhead.ErrClosed) {
		t.Errorf("Semaphore after Close = %v", err)
	}
	if err := r.Reconfigure(Config{}); !errors.Is(err, bulkhead.ErrClosed) {
		t.Errorf("Reconfigure after Close = %v", err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if len(r.Instances()) != 3 {
		t.Error("Close forgot the instances; their last stats should stay visible")
	}
}

func TestCloseHonoursContext(t *testing.T) {
	r, err := New(mustLoad(t, testYAML))
	if err != nil {
		t.Fatal(err)
	}
	em, _ := r.Pool("emails")
	started := make(chan struct{})
	f, err := em.TryGo(context.Background(), func(ctx context.Context) error {
		close(started)
		<-ctx.Done() // Close cancels running tasks when its ctx ends
		return ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close = %v, want context.Canceled", err)
	}
	if _, err := f.Wait(context.Background()); err == nil {
		t.Fatal("task not cancelled")
	}
	// Let the pool finish shutting down before goleak looks.
	_ = em.Close(context.Background())
}

// TestConcurrentUse mixes every registry operation on many goroutines; the
// race detector is the judge, and the registry must stay consistent.
func TestConcurrentUse(t *testing.T) {
	r := newTestRegistry(t, testYAML)
	reg := prometheus.NewRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{Histograms: true})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	h := r.Handler()
	cfg := mustLoad(t, testYAML) // here: t.Fatalf must not run on the goroutines below
	names := []string{"a", "b", "c", "payment"}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			<-start
			ctx := context.Background()
			for i := range 200 {
				name := names[(g+i)%len(names)]
				switch i % 8 {
				case 0:
					cancel := r.Subscribe(func(bulkhead.Event) {})
					defer cancel()
				case 1:
					r.Remove(bulkhead.Kind(1+i%2), name)
				case 2:
					if err := r.Reconfigure(cfg); err != nil {
						t.Error(err)
					}
				case 3:
					_, _ = reg.Gather()
				case 4:
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
				case 5:
					r.Instances()
				default:
					if s, err := r.Semaphore(name); err == nil {
						_ = s.Do(ctx, func(context.Context) error { return nil })
					}
				}
			}
		})
	}
	close(start)
	wg.Wait()
	for _, in := range r.Instances() {
		s := in.Stats()
		if s.InFlight != 0 || s.Permitted != s.Finished {
			t.Errorf("%s at rest: %+v", in.Name(), s)
		}
	}
}
