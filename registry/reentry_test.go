package registry

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// guard is how long a test waits for something that must happen before it
// declares a deadlock. It is never a pass criterion.
const guard = 10 * time.Second

// TestReconfigureSubscriberCallsRegistry: growing a pool publishes its
// limit-changed event inside Reconfigure, on the Reconfigure goroutine (the
// queued task's permitted event is published by its worker). A subscriber
// that calls the registry must not deadlock.
func TestReconfigureSubscriberCallsRegistry(t *testing.T) {
	r, err := New(mustLoad(t, "thread-pool-bulkhead:\n  instances:\n    emails: {maxWorkers: 1, queueCapacity: 5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	next := mustLoad(t, "thread-pool-bulkhead:\n  instances:\n    emails: {maxWorkers: 2, queueCapacity: 5}\n")
	em, _ := r.Pool("emails")
	release := make(chan struct{})
	started := make(chan struct{})
	ctx := context.Background()
	f1, err := em.TryGo(ctx, func(context.Context) error { close(started); <-release; return nil })
	if err != nil {
		t.Fatal(err)
	}
	<-started
	f2, err := em.TryGo(ctx, func(context.Context) error { <-release; return nil }) // queued
	if err != nil {
		t.Fatal(err)
	}
	var calledBack atomic.Int32
	cancel := r.Subscribe(func(e bulkhead.Event) {
		if e.Type != bulkhead.EventLimitChanged {
			return
		}
		// What a logger or an adaptive limiter might do.
		r.Find(e.Kind, e.Name)
		r.Instances()
		getStatus(t, r.Handler(), "/")
		_, _ = r.Semaphore("side")
		// An adaptive limiter might even reconfigure.
		if err := r.Reconfigure(next); err != nil {
			t.Error(err)
		}
		calledBack.Add(1)
	})
	done := make(chan error, 1)
	go func() { done <- r.Reconfigure(next) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Reconfigure: %v", err)
		}
	case <-time.After(guard):
		close(release)
		t.Fatal("Reconfigure deadlocked with a subscriber that calls the registry")
	}
	if calledBack.Load() != 1 {
		t.Errorf("the subscriber ran %d times during Reconfigure, want 1 (the limit change)", calledBack.Load())
	}
	close(release)
	_, _ = f1.Wait(ctx)
	_, _ = f2.Wait(ctx)
	cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestEntrySubscriberCallsRegistry: an entry subscriber may change the
// registry; its own changes are delivered after the event it is handling.
func TestEntrySubscriberCallsRegistry(t *testing.T) {
	r := newTestRegistry(t, "")
	var got []string // only ever appended on the delivering goroutine
	defer r.SubscribeEntries(func(e EntryEvent) {
		got = append(got, e.Type.String()+":"+e.Name)
		if e.Type == EntryAdded && e.Name == "a" {
			r.Remove(bulkhead.Semaphore, "a")
			if _, err := r.Semaphore("b"); err != nil {
				t.Error(err)
			}
			if err := r.Reconfigure(Config{Semaphores: map[string]SemaphoreSpec{"b": {MaxConcurrentCalls: new(3)}}}); err != nil {
				t.Error(err)
			}
		}
	})()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := r.Semaphore("a"); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatal("an entry subscriber that calls the registry deadlocked it")
	}
	want := []string{"added:a", "removed:a", "added:b", "reconfigured:b"}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// TestEntryEventsInOrder: while one goroutine is delivering entry events, a
// change made on another goroutine is delivered after them, never before
// the event of the entry's creation.
func TestEntryEventsInOrder(t *testing.T) {
	r := newTestRegistry(t, testYAML)
	var mu sync.Mutex
	var got []string
	first := true
	blocked, release := make(chan struct{}), make(chan struct{})
	defer r.SubscribeEntries(func(e EntryEvent) {
		mu.Lock()
		got = append(got, e.Type.String()+":"+e.Name)
		block := first
		first = false
		mu.Unlock()
		if block {
			close(blocked)
			<-release
		}
	})()
	next := mustLoad(t, testYAML)
	next.Semaphores["fraud"] = SemaphoreSpec{MaxConcurrentCalls: new(1)}
	next.Semaphores["payment"] = SemaphoreSpec{MaxConcurrentCalls: new(3)}
	done := make(chan error, 1)
	go func() { done <- r.Reconfigure(next) }() // creates fraud, changes payment
	select {
	case <-blocked:
	case <-time.After(guard):
		t.Fatal("no entry event")
	}
	if _, ok := r.Remove(bulkhead.Semaphore, "fraud"); !ok {
		t.Fatal("fraud was not created")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	added, removed := -1, -1
	for i, g := range got {
		switch g {
		case "added:fraud":
			added = i
		case "removed:fraud":
			removed = i
		}
	}
	if added < 0 || removed < 0 || removed < added {
		t.Fatalf("events %v: want added:fraud, then removed:fraud", got)
	}
}

// TestReconfigureSkipsClosedPool: a pool its user closed cannot take new
// limits; Reconfigure skips it and applies everything else, without error.
func TestReconfigureSkipsClosedPool(t *testing.T) {
	r := newTestRegistry(t, "bulkhead:\n  instances:\n    a: {maxConcurrentCalls: 1}\nthread-pool-bulkhead:\n  instances:\n    p: {maxWorkers: 1}\n")
	p, _ := r.Pool("p")
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Reconfigure(mustLoad(t, "bulkhead:\n  instances:\n    a: {maxConcurrentCalls: 9}\nthread-pool-bulkhead:\n  instances:\n    p: {maxWorkers: 3}\n")); err != nil {
		t.Fatalf("Reconfigure = %v, want nil: a closed pool is skipped", err)
	}
	a, _ := r.Semaphore("a")
	if got := a.Config().MaxConcurrentCalls; got != 9 {
		t.Errorf("a has %d, want 9", got)
	}
	if got := p.Config().MaxWorkers; got != 1 {
		t.Errorf("the closed pool has %d workers, want its last 1", got)
	}
}

// TestReconfigureRefusedChangesNothing: a config refused for any reason
// leaves the configuration, the bulkheads and the entries as they were.
func TestReconfigureRefusedChangesNothing(t *testing.T) {
	r := newTestRegistry(t, testYAML)
	var events atomic.Int32
	defer r.SubscribeEntries(func(EntryEvent) { events.Add(1) })()
	before := r.res.Config()
	bad := []Config{
		{Semaphores: map[string]SemaphoreSpec{"payment": {MaxConcurrentCalls: new(-1)}, "new": {}}},
		{Pools: map[string]PoolSpec{"payment": {BaseConfig: "missing"}}, Semaphores: map[string]SemaphoreSpec{"new": {}}},
		{Semaphores: map[string]SemaphoreSpec{"bad\xffname": {}}},
	}
	for _, cfg := range bad {
		if err := r.Reconfigure(cfg); err == nil {
			t.Fatalf("Reconfigure(%+v) accepted", cfg)
		}
	}
	if _, ok := r.Find(bulkhead.Semaphore, "new"); ok {
		t.Error("a refused config created an instance")
	}
	pay, _ := r.Semaphore("payment")
	if pay.Config().MaxConcurrentCalls != 2 || events.Load() != 0 || len(r.res.Config().Semaphores) != len(before.Semaphores) {
		t.Errorf("a refused Reconfigure changed things: %+v, %d events", pay.Config(), events.Load())
	}
}

// TestConcurrentReconfigureLastWins: however concurrent Reconfigure calls
// interleave, every bulkhead ends with the limits of the configuration
// installed last.
func TestConcurrentReconfigureLastWins(t *testing.T) {
	r := newTestRegistry(t, testYAML)
	pay, _ := r.Semaphore("payment")
	em, _ := r.Pool("emails")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 20 {
				n := 1 + (i*20+j)%7
				cfg := Config{
					Semaphores: map[string]SemaphoreSpec{"payment": {MaxConcurrentCalls: new(n)}},
					Pools:      map[string]PoolSpec{"emails": {MaxWorkers: new(n), QueueCapacity: new(n)}},
				}
				if err := r.Reconfigure(cfg); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	r.mu.Lock()
	last := r.res.Config()
	r.mu.Unlock()
	if got, want := pay.Config().MaxConcurrentCalls, *last.Semaphores["payment"].MaxConcurrentCalls; got != want {
		t.Errorf("payment has %d, the last configuration says %d", got, want)
	}
	if got, want := em.Config().MaxWorkers, *last.Pools["emails"].MaxWorkers; got != want {
		t.Errorf("emails has %d workers, the last configuration says %d", got, want)
	}
	for _, k := range []key{{bulkhead.Semaphore, "inventory"}, {bulkhead.Pool, "emails"}, {bulkhead.Semaphore, "payment"}} {
		if _, ok := r.Find(k.kind, k.name); !ok {
			t.Errorf("%s lost", k.name)
		}
	}
}

// TestNamesMustBeUTF8: a name Prometheus and JSON cannot carry is refused
// by Validate and by get-or-create.
func TestNamesMustBeUTF8(t *testing.T) {
	r := newTestRegistry(t, "")
	if _, err := r.Semaphore("bad\xffname"); err == nil {
		t.Error("Semaphore accepted a name that is not UTF-8")
	}
	if _, err := r.Pool("bad\xffname"); err == nil {
		t.Error("Pool accepted a name that is not UTF-8")
	}
	err := Config{Pools: map[string]PoolSpec{"bad\xffname": {}}}.Validate()
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Msg != `pool instance "bad\xffname": a name must be valid UTF-8` {
		t.Errorf("Validate = %v", err)
	}
	if len(r.Instances()) != 0 {
		t.Error("a refused name left an instance")
	}
}

// TestEntrySubscriberGoexit: an entry subscriber that ends its goroutine
// (runtime.Goexit, as t.FailNow does) leaves the registry's delivery state
// consistent: later changes are delivered, none is lost or stuck, and the
// queue does not grow.
func TestEntrySubscriberGoexit(t *testing.T) {
	r := newTestRegistry(t, "")
	var got []string
	var mu sync.Mutex
	exitOn := "b"
	defer r.SubscribeEntries(func(e EntryEvent) {
		mu.Lock()
		got = append(got, e.Type.String()+":"+e.Name)
		exit := e.Name == exitOn
		mu.Unlock()
		if exit {
			runtime.Goexit()
		}
	})()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.Semaphore("a")
		_, _ = r.Semaphore("b") // the subscriber ends this goroutine here
		t.Error("Goexit did not end the goroutine")
	}()
	<-done
	r.mu.Lock()
	delivering, pending := r.delivering, len(r.pending)
	r.mu.Unlock()
	if delivering || pending != 0 {
		t.Fatalf("after the Goexit: delivering=%v, %d pending", delivering, pending)
	}
	for i := range 100 {
		if _, err := r.Semaphore(fmt.Sprint("c", i)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 102 || got[1] != "added:b" || got[101] != "added:c99" {
		t.Fatalf("%d events after the Goexit (%v ...), want every one", len(got), got[:3])
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.delivering || len(r.pending) != 0 {
		t.Fatalf("delivering=%v, %d pending", r.delivering, len(r.pending))
	}
}

// TestEntrySubscriberGoexitMidBatch: when a subscriber Goexits while
// events queued by others wait behind the one it was given, those events
// are kept, in order, and delivered with the next change.
func TestEntrySubscriberGoexitMidBatch(t *testing.T) {
	r := newTestRegistry(t, "")
	var got []string
	var mu sync.Mutex
	inB, goOn := make(chan struct{}), make(chan struct{})
	defer r.SubscribeEntries(func(e EntryEvent) {
		mu.Lock()
		got = append(got, e.Name)
		mu.Unlock()
		if e.Name == "b" {
			close(inB)
			<-goOn // meanwhile, c and d queue behind b
			runtime.Goexit()
		}
	})()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.Semaphore("b")
	}()
	<-inB
	_, _ = r.Semaphore("c") // queued: b's goroutine is delivering
	_, _ = r.Semaphore("d")
	close(goOn)
	<-done
	r.mu.Lock()
	delivering, pending := r.delivering, len(r.pending)
	r.mu.Unlock()
	if delivering || pending != 2 {
		t.Fatalf("after the Goexit: delivering=%v, %d pending, want c and d kept", delivering, pending)
	}
	_, _ = r.Semaphore("e")
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"b", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// TestReconfigureSameConfigIsQuiet: a Reconfigure with a configuration equal
// to the running one (its pointers, CoDel, Priorities and Shadow, to equal
// values) changes nothing and reports no EntryReconfigured.
func TestReconfigureSameConfigIsQuiet(t *testing.T) {
	y := "bulkhead:\n  instances:\n    s: {maxConcurrentCalls: 4, maxWaitDuration: 1s, priorities: {ceilings: {sheddable: 0.5}}, shadow: {maxConcurrentCalls: 2}}\n" +
		"thread-pool-bulkhead:\n  instances:\n    p: {maxThreadPoolSize: 4, queueCapacity: 8, priorities: {ceilings: {sheddable: 0.5}}, shadow: {maxThreadPoolSize: 2}}\n"
	r, err := New(mustLoad(t, y))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	var events []string
	defer r.SubscribeEntries(func(e EntryEvent) { events = append(events, e.Type.String()+" "+e.Name) })()
	if err := r.Reconfigure(mustLoad(t, y)); err != nil {
		t.Fatal(err)
	}
	if len(events) != 0 {
		t.Fatalf("Reconfigure with the same configuration reported %v", events)
	}
}
