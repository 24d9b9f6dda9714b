package semaphore_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/internal/semtest"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// Wrong Releases that race each other must each panic and leave the state
// exactly as it was.
func TestConcurrentWrongReleasesLeaveStateIntact(t *testing.T) {
	b := mustNew(t, 3, 0)
	for range 2000 {
		start := make(chan struct{})
		var wg sync.WaitGroup
		panics := make(chan any, 2)
		for range 2 {
			wg.Go(func() {
				defer func() { panics <- recover() }()
				<-start
				b.Release()
			})
		}
		close(start)
		wg.Wait()
		for range 2 {
			if r := <-panics; r == nil {
				t.Fatal("a Release without a permit did not panic")
			}
		}
		if s := b.Stats(); s.InFlight != 0 || s.MaxConcurrentCalls != 3 || s.AvailableConcurrentCalls != 3 {
			t.Fatalf("state changed by wrong Releases: %+v", s)
		}
	}
	if !b.TryAcquire() {
		t.Fatal("bulkhead unusable after wrong Releases")
	}
	b.Release()
	semtest.AtRest(t, b, 1, 0, 0, 0)
}

// A listener may call back into the bulkhead: no lock is held while it runs.
func TestListenerMayCallBackIntoBulkhead(t *testing.T) {
	b := mustNew(t, 2, time.Hour)
	var seen []bulkhead.EventType
	b.Subscribe(func(e bulkhead.Event) {
		seen = append(seen, e.Type)
		_ = b.Stats()
		if e.Type == bulkhead.EventPermitted && len(seen) == 1 {
			if err := b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 3, MaxWaitDuration: time.Hour}); err != nil {
				t.Error(err)
			}
			if b.TryAcquire() { // publishes again, re-entrantly
				b.Release()
			}
		}
	})
	if err := b.Do(context.Background(), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	want := []bulkhead.EventType{bulkhead.EventPermitted, bulkhead.EventLimitChanged,
		bulkhead.EventPermitted, bulkhead.EventFinished, bulkhead.EventFinished}
	if !slices.Equal(seen, want) {
		t.Fatalf("events %v, want %v", seen, want)
	}
	semtest.AtRest(t, b, 2, 0, 0, 0)
}

// A listener that ends its goroutine while Do reports the permit must not
// strand the permit.
func TestListenerGoexitDoesNotStrandPermit(t *testing.T) {
	b := mustNew(t, 1, 0)
	cancel := b.Subscribe(func(e bulkhead.Event) {
		if e.Type == bulkhead.EventPermitted {
			runtime.Goexit()
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Do(context.Background(), func(context.Context) error {
			t.Error("fn ran after the goroutine ended")
			return nil
		})
	}()
	<-done
	cancel()
	semtest.AtRest(t, b, 1, 0, 0, 0)
}

func TestEventsCarryWaitAndRunTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1, time.Hour)
		var mu sync.Mutex
		var events []bulkhead.Event
		b.Subscribe(func(e bulkhead.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		})
		b.Acquire(context.Background())
		done := make(chan error)
		go func() {
			done <- b.Do(context.Background(), func(context.Context) error {
				time.Sleep(30 * time.Millisecond) // the call's own work, on the fake clock
				return nil
			})
		}()
		time.Sleep(20 * time.Millisecond) // the first holder keeps the permit for 20ms
		b.Release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		want := []struct {
			typ       bulkhead.EventType
			wait, run time.Duration
		}{
			{bulkhead.EventPermitted, 0, 0},
			{bulkhead.EventFinished, 0, 0},
			{bulkhead.EventPermitted, 20 * time.Millisecond, 0},
			{bulkhead.EventFinished, 0, 30 * time.Millisecond},
		}
		if len(events) != len(want) {
			t.Fatalf("events %v", events)
		}
		for i, w := range want {
			if e := events[i]; e.Type != w.typ || e.Wait != w.wait || e.Run != w.run {
				t.Errorf("event %d: %v wait %v run %v; want %v wait %v run %v", i, e.Type, e.Wait, e.Run, w.typ, w.wait, w.run)
			}
		}
	})
}

// cancelCtx is a Context cancelled by closing done: made before a
// measurement, so that cancelling allocates nothing during it.
type cancelCtx struct {
	context.Context
	done chan struct{}
}

func (c *cancelCtx) Done() <-chan struct{} { return c.done }

func (c *cancelCtx) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}

// A waiter that joins a line makes two allocations, its place in line and
// the channel it waits on: the line's timer is the first waiter's. (One
// timer per waiter would make it five.) Each measured Acquire queues behind
// a waiter that stays in line, and leaves when a helper cancels it.
func TestWaiterJoiningALineAllocatesTwo(t *testing.T) {
	b := mustNew(t, 1, time.Hour)
	b.Acquire(context.Background())
	first, stopFirst := context.WithCancel(context.Background())
	firstDone := make(chan error)
	go func() { firstDone <- b.Acquire(first) }()
	waitFor(t, "the first waiter", func() bool { return b.Stats().Waiting == 1 })

	const runs = 100
	ctxs := make(chan *cancelCtx, runs+1) // AllocsPerRun runs once more to warm up
	for range runs + 1 {
		ctxs <- &cancelCtx{Context: context.Background(), done: make(chan struct{})}
	}
	next := make(chan *cancelCtx)
	helperDone := make(chan struct{})
	go func() { // cancels each measured waiter once it is in line
		defer close(helperDone)
		for c := range next {
			for b.Stats().Waiting != 2 {
				runtime.Gosched()
			}
			close(c.done)
		}
	}()
	n := testing.AllocsPerRun(runs, func() {
		c := <-ctxs
		next <- c
		if err := b.Acquire(c); err != context.Canceled {
			t.Fatalf("Acquire: %v, want context.Canceled", err)
		}
	})
	close(next)
	<-helperDone
	stopFirst()
	if err := <-firstDone; err != context.Canceled {
		t.Fatalf("first waiter: %v, want context.Canceled", err)
	}
	b.Release()
	semtest.AtRest(t, b, 1, 0, runs+2, 0)
	if n != 2 {
		t.Fatalf("a waiter joining a line allocates %v times, want 2", n)
	}
}

// TestZeroBulkheadPanicsNamingNew: a Bulkhead that New did not make (a
// zero value, say a struct field never set) has no limit; the first call
// it refuses panics with a message that says so, not a nil dereference.
func TestZeroBulkheadPanicsNamingNew(t *testing.T) {
	ctx := context.Background()
	var zero semaphore.Bulkhead
	for _, call := range []func(){
		func() { _ = zero.Do(ctx, func(context.Context) error { return nil }) },
		func() { _ = zero.Acquire(ctx) },
		func() { zero.TryAcquire() },
		func() { zero.Config() },
	} {
		func() {
			defer func() {
				if r := recover(); r != "semaphore: Bulkhead used without New" {
					t.Errorf("panic %v, want %q", r, "semaphore: Bulkhead used without New")
				}
			}()
			call()
		}()
	}
}

// TestSubscribeNilPanics: a nil subscriber is a bug in the caller.
func TestSubscribeNilPanics(t *testing.T) {
	defer func() {
		if r := recover(); r != "semaphore: Subscribe called with a nil function" {
			t.Errorf("panic %v", r)
		}
	}()
	mustNew(t, 1, 0).Subscribe(nil)
}

// TestNilArgumentsPanicNamingTheCall: a nil Context or function is a bug in
// the caller; the panic names the call that got it, and nothing is counted.
func TestNilArgumentsPanicNamingTheCall(t *testing.T) {
	b := mustNew(t, 1, 0)
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	for want, call := range map[string]func(){
		"semaphore: Acquire called with a nil Context":       func() { _ = b.Acquire(nil) },
		"semaphore: AcquirePermit called with a nil Context": func() { _, _ = b.AcquirePermit(nil) },
		"semaphore: Do called with a nil Context":            func() { _ = b.Do(nil, fn) },
		"semaphore: Do called with a nil function":           func() { _ = b.Do(ctx, nil) },
		"semaphore: Execute called with a nil Context": func() {
			_, _ = semaphore.Execute(nil, b, func(context.Context) (int, error) { return 0, nil })
		},
		"semaphore: Execute called with a nil function": func() { _, _ = semaphore.Execute[int](ctx, b, nil) },
	} {
		func() {
			defer func() {
				if r := recover(); r != want {
					t.Errorf("panic %v, want %q", r, want)
				}
			}()
			call()
		}()
	}
	semtest.AtRest(t, b, 0, 0, 0, 0)
}
