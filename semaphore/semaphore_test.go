package semaphore_test

import (
	"context"
	"errors"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/internal/semtest"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustNew(t testing.TB, max int, wait time.Duration) *semaphore.Bulkhead {
	t.Helper()
	b, err := semaphore.New("test", semaphore.Config{MaxConcurrentCalls: max, MaxWaitDuration: wait})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitFor polls cond; the deadline only guards against a hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

func TestDefaultConfig(t *testing.T) {
	if got, want := semaphore.DefaultConfig(), (semaphore.Config{MaxConcurrentCalls: 25}); got != want {
		t.Fatalf("DefaultConfig() = %+v, want %+v", got, want)
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	cases := []struct {
		name string
		cfg  semaphore.Config
		want []string
	}{
		{"", semaphore.DefaultConfig(), []string{"name must not be empty"}},
		{"x\xff", semaphore.DefaultConfig(), []string{`name "x\xff" is not valid UTF-8`}},
		{"x", semaphore.Config{MaxConcurrentCalls: 0}, []string{"maxConcurrentCalls must be >= 1, got 0"}},
		{"x", semaphore.Config{MaxConcurrentCalls: -1}, []string{"maxConcurrentCalls must be >= 1, got -1"}},
		{"x", semaphore.Config{MaxConcurrentCalls: semaphore.MaxLimit + 1}, []string{"maxConcurrentCalls must be <=", "got 1048577"}},
		{"x", semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: -time.Millisecond}, []string{"maxWaitDuration must be >= 0, got -1ms"}},
	}
	for _, c := range cases {
		b, err := semaphore.New(c.name, c.cfg)
		if err == nil || b != nil {
			t.Fatalf("New(%q, %+v) = %v, %v; want an error", c.name, c.cfg, b, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("New(%q, %+v) error %q does not contain %q", c.name, c.cfg, err, w)
			}
		}
		if c.name != "x" {
			continue // a bad name, not a bad configuration
		}
		good := mustNew(t, 3, 0)
		if err := good.Reconfigure(c.cfg); err == nil || !strings.Contains(err.Error(), c.want[0]) {
			t.Errorf("Reconfigure(%+v) = %v, want error containing %q", c.cfg, err, c.want[0])
		}
		if got := good.Config(); got != (semaphore.Config{MaxConcurrentCalls: 3}) {
			t.Errorf("a rejected Reconfigure changed the config to %+v", got)
		}
	}
}

func TestDoRunsOnCallerGoroutineAndStartsNone(t *testing.T) {
	b := mustNew(t, 2, time.Millisecond)
	// Count goroutines created (not alive: other tests' goroutines may be
	// exiting) across a granted call and a call that waits and times out.
	created := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(created)
	before := created[0].Value.Uint64()
	err := b.Do(context.Background(), func(context.Context) error { return nil })
	b.TryAcquire()
	b.TryAcquire()
	waited := b.Do(context.Background(), func(context.Context) error { return nil })
	metrics.Read(created)
	if n := created[0].Value.Uint64() - before; err != nil || !errors.Is(waited, bulkhead.ErrBulkheadFull) || n != 0 {
		t.Fatalf("Do: err %v, after a wait %v; %d goroutines created, want 0", err, waited, n)
	}
	b.Release()
	b.Release()
	// A Goexit in fn ends the caller's own goroutine: proof that fn ran on it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Do(context.Background(), func(context.Context) error { runtime.Goexit(); return nil })
		t.Error("Do returned after runtime.Goexit in fn")
	}()
	<-done
	semtest.AtRest(t, b, 4, 1, 0, 1) // the Goexit counts as a failure
}

func TestTryAcquireSequenceAndEvents(t *testing.T) {
	b := mustNew(t, 2, 0)
	var got []bulkhead.EventType
	var mu sync.Mutex
	cancel := b.Subscribe(func(e bulkhead.Event) {
		if e.Name != "test" || e.Kind != bulkhead.Semaphore || e.Time.IsZero() {
			t.Errorf("bad event %+v", e)
		}
		if e.Type == bulkhead.EventRejected && !errors.Is(e.Err, bulkhead.ErrBulkheadFull) {
			t.Errorf("rejected event carries %v", e.Err)
		}
		mu.Lock()
		got = append(got, e.Type)
		mu.Unlock()
	})
	steps := []struct {
		op    func() bool
		avail int
	}{
		{b.TryAcquire, 1}, {b.TryAcquire, 0}, {func() bool { return !b.TryAcquire() }, 0},
		{func() bool { b.Release(); return true }, 1}, {func() bool { b.Release(); return true }, 2},
		{b.TryAcquire, 1},
	}
	for i, s := range steps {
		if !s.op() {
			t.Fatalf("step %d failed", i)
		}
		if a := b.Stats().AvailableConcurrentCalls; a != s.avail {
			t.Fatalf("step %d: available %d, want %d", i, a, s.avail)
		}
	}
	b.Release()
	cancel()
	cancel() // harmless twice
	b.TryAcquire()
	b.Release()
	want := []bulkhead.EventType{bulkhead.EventPermitted, bulkhead.EventPermitted, bulkhead.EventRejected,
		bulkhead.EventFinished, bulkhead.EventFinished, bulkhead.EventPermitted, bulkhead.EventFinished}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	semtest.AtRest(t, b, 4, 1, 0, 0)
}

// A subscriber's panic is not the bulkhead's to hide (see the callback
// contract): it reaches the caller of Do, here on EventPermitted, before fn
// runs. No permit is lost and the counters stay exact, with more such calls
// than permits.
func TestPanickingSubscriberDoesNotBreakBulkhead(t *testing.T) {
	b := mustNew(t, 1, 0)
	b.Subscribe(func(bulkhead.Event) { panic("listener bug") })
	for range 3 {
		func() {
			defer func() {
				if r := recover(); r != "listener bug" {
					t.Errorf("recovered %v, want the subscriber's panic", r)
				}
			}()
			b.Do(context.Background(), func(context.Context) error { return nil })
		}()
	}
	if s := b.Stats(); s.InFlight != 0 || s.Permitted != 3 || s.Finished != 3 || s.Failed != 0 || s.Rejected != 0 {
		t.Fatalf("after three calls: %+v", s)
	}
}

func TestReleaseWithoutPermitPanics(t *testing.T) {
	b := mustNew(t, 1, 0)
	defer func() {
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, "Release called without a held permit") {
			t.Fatalf("recovered %v", r)
		}
		semtest.AtRest(t, b, 0, 0, 0, 0)
	}()
	b.Release()
}

func TestAcquireWithDoneContextTakesNothing(t *testing.T) {
	b := mustNew(t, 1, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Acquire(ctx); err != context.Canceled {
		t.Fatalf("Acquire = %v, want context.Canceled", err)
	}
	called := false
	if err := b.Do(ctx, func(context.Context) error { called = true; return nil }); err != context.Canceled || called {
		t.Fatalf("Do = %v, called %v", err, called)
	}
	semtest.AtRest(t, b, 0, 0, 0, 0)
}

func TestFullFailsAtOnceWithoutWait(t *testing.T) {
	b := mustNew(t, 1, 0)
	if err := b.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := b.Acquire(context.Background())
	var fe *bulkhead.FullError
	if !errors.Is(err, bulkhead.ErrBulkheadFull) || !errors.As(err, &fe) || fe.Waited || fe.Name != "test" || fe.MaxConcurrentCalls != 1 {
		t.Fatalf("Acquire on a full bulkhead = %#v", err)
	}
	if err2 := b.Acquire(context.Background()); err2 != err {
		t.Fatalf("rejections should share one prebuilt error value")
	}
	b.Release()
	semtest.AtRest(t, b, 1, 2, 0, 0)
}

func TestWaitTimesOutAsRejection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1, 50*time.Millisecond)
		b.Acquire(context.Background())
		start := time.Now()
		err := b.Acquire(context.Background())
		var fe *bulkhead.FullError
		if !errors.As(err, &fe) || !fe.Waited || fe.MaxWaitDuration != 50*time.Millisecond {
			t.Fatalf("Acquire = %v, want a FullError after waiting", err)
		}
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Fatalf("rejected after %v, want exactly MaxWaitDuration", d)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatal("a rejection must not look like a timeout")
		}
		b.Release()
		semtest.AtRest(t, b, 1, 1, 0, 0)
	})
}

func TestContextEndingFirstIsCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1, time.Hour)
		var events []bulkhead.Event
		b.Subscribe(func(e bulkhead.Event) { events = append(events, e) })
		b.Acquire(context.Background())

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		err := b.Acquire(ctx)
		if err != context.DeadlineExceeded || errors.Is(err, bulkhead.ErrBulkheadFull) {
			t.Fatalf("Acquire = %v, want context.DeadlineExceeded as is", err)
		}
		ctx2, cancel2 := context.WithCancel(context.Background())
		go func() {
			synctest.Wait() // the caller below is blocked waiting
			cancel2()
		}()
		if err := b.Acquire(ctx2); err != context.Canceled {
			t.Fatalf("Acquire = %v, want context.Canceled", err)
		}
		b.Release()
		semtest.AtRest(t, b, 1, 0, 2, 0)
		last := events[len(events)-2]
		if last.Type != bulkhead.EventCancelled || last.Err != context.Canceled {
			t.Fatalf("event %+v, want a cancelled event", last)
		}
		if c := events[1]; c.Type != bulkhead.EventCancelled || c.Wait != 20*time.Millisecond {
			t.Fatalf("event %+v, want cancelled after waiting 20ms", c)
		}
	})
}

func TestWaitersAreServedFIFOWithoutBarging(t *testing.T) {
	b := mustNew(t, 1, time.Hour)
	b.Acquire(context.Background())
	const n = 8
	order := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Acquire(context.Background()); err != nil {
				t.Error(err)
				return
			}
			order <- i
		}()
		// Let waiter i join the line before waiter i+1 starts.
		waitFor(t, "waiter to queue", func() bool { return b.Stats().Waiting == i+1 })
	}
	for i := range n {
		// While someone waits, newcomers do not get in ahead of them.
		if b.TryAcquire() {
			t.Fatal("TryAcquire barged ahead of waiters")
		}
		b.Release() // hands the permit to the oldest waiter
		if got := <-order; got != i {
			t.Fatalf("permit %d went to waiter %d", i, got)
		}
		if s := b.Stats(); s.InFlight != 1 {
			t.Fatalf("in flight %d after hand-off, want 1", s.InFlight)
		}
	}
	wg.Wait()
	b.Release()
	semtest.AtRest(t, b, n+1, n, 0, 0)
}

func TestDoReleasesOnEveryPath(t *testing.T) {
	b := mustNew(t, 1, 0)
	ctx := context.Background()
	sentinel := errors.New("boom")

	if err := b.Do(ctx, func(context.Context) error { return sentinel }); err != sentinel {
		t.Fatalf("Do returned %v, want the function's error unchanged", err)
	}
	v, err := semaphore.Execute(ctx, b, func(context.Context) (string, error) { return "ok", nil })
	if v != "ok" || err != nil {
		t.Fatalf("Execute = %q, %v", v, err)
	}
	if _, err := semaphore.Execute(ctx, b, func(context.Context) (int, error) { return 0, sentinel }); err != sentinel {
		t.Fatalf("Execute returned %v", err)
	}
	var events []bulkhead.Event
	cancel := b.Subscribe(func(e bulkhead.Event) { events = append(events, e) })
	func() {
		defer func() {
			if r := recover(); r != "kaboom" {
				t.Fatalf("recovered %v, want the original panic value", r)
			}
		}()
		b.Do(ctx, func(context.Context) error { panic("kaboom") })
	}()
	cancel()
	var pe *bulkhead.PanicError
	if f := events[len(events)-1]; f.Type != bulkhead.EventFinished || !errors.As(f.Err, &pe) || pe.Value != "kaboom" || len(pe.Stack) == 0 {
		t.Fatalf("finished event after panic: %+v", f)
	}
	func() {
		defer func() { recover() }()
		semaphore.Execute(ctx, b, func(context.Context) (int, error) { panic(sentinel) })
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		semaphore.Execute(ctx, b, func(context.Context) (int, error) { runtime.Goexit(); return 0, nil })
	}()
	<-done
	// 6 calls, of which the error, the error of Execute, two panics and the
	// Goexit failed.
	semtest.AtRest(t, b, 6, 0, 0, 5)
}

func TestReconfigureGrowHandsPermitsToWaiters(t *testing.T) {
	b := mustNew(t, 1, time.Hour)
	b.Acquire(context.Background())
	got := make(chan error, 2)
	for range 2 {
		go func() { got <- b.Acquire(context.Background()) }()
	}
	waitFor(t, "two waiters", func() bool { return b.Stats().Waiting == 2 })
	if err := b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 3, MaxWaitDuration: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}
	if s := b.Stats(); s.InFlight != 3 || s.Waiting != 0 || s.AvailableConcurrentCalls != 0 || s.MaxConcurrentCalls != 3 {
		t.Fatalf("after growing: %+v", s)
	}
	for range 3 {
		b.Release()
	}
	semtest.AtRest(t, b, 3, 0, 0, 0)
}

func TestReconfigureShrinkLetsInFlightFinish(t *testing.T) {
	b := mustNew(t, 4, 0)
	for range 4 {
		if !b.TryAcquire() {
			t.Fatal("TryAcquire failed below the limit")
		}
	}
	if err := b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 2}); err != nil { // must not block
		t.Fatal(err)
	}
	if s := b.Stats(); s.MaxConcurrentCalls != 2 || s.InFlight != 4 || s.AvailableConcurrentCalls != 0 {
		t.Fatalf("after shrinking: %+v", s)
	}
	b.Release()
	b.Release() // 2 in flight: still at the new limit
	if b.TryAcquire() {
		t.Fatal("admitted a call while in flight >= new limit")
	}
	b.Release() // 1 in flight
	if !b.TryAcquire() {
		t.Fatal("rejected a call while in flight < new limit")
	}
	b.Release()
	b.Release()
	semtest.AtRest(t, b, 5, 1, 0, 0)
}

func TestReconfigureShrinkWithWaiters(t *testing.T) {
	b := mustNew(t, 2, time.Hour)
	b.Acquire(context.Background())
	b.Acquire(context.Background())
	got := make(chan error, 1)
	go func() { got <- b.Acquire(context.Background()) }()
	waitFor(t, "a waiter", func() bool { return b.Stats().Waiting == 1 })
	b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour})
	b.Release() // 1 in flight, limit 1: the waiter must keep waiting
	if s := b.Stats(); s.Waiting != 1 || s.InFlight != 1 {
		t.Fatalf("waiter admitted above the new limit: %+v", s)
	}
	b.Release() // now it fits
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	b.Release()
	semtest.AtRest(t, b, 3, 0, 0, 0)
}

func TestReconfigureWaitAppliesToNewWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1, time.Hour)
		b.Acquire(context.Background())
		old := make(chan error, 1)
		go func() { old <- b.Acquire(context.Background()) }()
		synctest.Wait()
		b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: 0})
		start := time.Now()
		var fe *bulkhead.FullError
		if err := b.Acquire(context.Background()); !errors.As(err, &fe) || fe.Waited || time.Since(start) != 0 {
			t.Fatalf("new caller: %v after %v, want an immediate rejection", err, time.Since(start))
		}
		synctest.Wait()
		if s := b.Stats(); s.Waiting != 1 {
			t.Fatalf("the old waiter should still wait: %+v", s)
		}
		b.Release()
		if err := <-old; err != nil {
			t.Fatal(err)
		}
		b.Release()
		semtest.AtRest(t, b, 2, 1, 0, 0)
	})
}

func TestReconfigureSameConfigIsNoop(t *testing.T) {
	b := mustNew(t, 3, time.Second)
	b.TryAcquire()
	if err := b.Reconfigure(b.Config()); err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.InFlight != 1 || s.AvailableConcurrentCalls != 2 {
		t.Fatalf("%+v", s)
	}
	b.Release()
	semtest.AtRest(t, b, 1, 0, 0, 0)
}

// TestHammer mixes every kind of call on many goroutines while the limit is
// resized, and checks the limit was never exceeded and nothing was lost.
func TestHammer(t *testing.T) {
	b := mustNew(t, 4, time.Millisecond)
	var running, peak, maxAllowed atomic.Int64
	maxAllowed.Store(4)
	var calls, oks, fulls, ctxErrs atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	body := func(context.Context) error {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		runtime.Gosched()
		running.Add(-1)
		return nil
	}
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				calls.Add(1)
				ctx := context.Background()
				var cancel context.CancelFunc = func() {}
				if (i+g)%7 == 0 {
					ctx, cancel = context.WithTimeout(ctx, 100*time.Microsecond)
				}
				var err error
				switch i % 3 {
				case 0:
					err = b.Do(ctx, body)
				case 1:
					_, err = semaphore.Execute(ctx, b, func(ctx context.Context) (int, error) { return 1, body(ctx) })
				default:
					if b.TryAcquire() {
						body(ctx)
						b.Release()
					} else {
						err = bulkhead.ErrBulkheadFull
					}
				}
				cancel()
				switch {
				case err == nil:
					oks.Add(1)
				case errors.Is(err, bulkhead.ErrBulkheadFull):
					fulls.Add(1)
				case err == context.DeadlineExceeded:
					ctxErrs.Add(1)
				default:
					t.Errorf("unexpected error %v", err)
				}
			}
		}()
	}
	resizer := make(chan struct{})
	go func() {
		defer close(resizer)
		for i := 0; ; i++ {
			select {
			case <-stop:
				b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 4, MaxWaitDuration: time.Millisecond})
				return
			default:
			}
			b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 1 + i%6, MaxWaitDuration: time.Duration(i%3) * time.Millisecond})
			runtime.Gosched()
		}
	}()
	wg.Wait()
	close(stop)
	<-resizer
	if peak.Load() > 6 {
		t.Fatalf("peak concurrency %d above the largest limit 6", peak.Load())
	}
	s := b.Stats()
	if s.InFlight != 0 || s.Waiting != 0 || s.Permitted != s.Finished || s.AvailableConcurrentCalls != 4 {
		t.Fatalf("not at rest: %+v", s)
	}
	// Every call is accounted for exactly once: a context error is either a
	// cancelled wait or a context that had ended before the call arrived,
	// which is counted nowhere.
	if s.Permitted != oks.Load() || s.Rejected != fulls.Load() || s.Cancelled > ctxErrs.Load() ||
		oks.Load()+fulls.Load()+ctxErrs.Load() != calls.Load() {
		t.Fatalf("calls %d: ok %d, full %d, ctx errors %d; stats %+v", calls.Load(), oks.Load(), fulls.Load(), ctxErrs.Load(), s)
	}
}

func TestFastPathsDoNotAllocate(t *testing.T) {
	b := mustNew(t, 1, 0)
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	cases := map[string]func(){
		"TryAcquire+Release": func() { b.TryAcquire(); b.Release() },
		"Do":                 func() { b.Do(ctx, fn) },
		"Execute":            func() { semaphore.Execute(ctx, b, func(context.Context) (int, error) { return 1, nil }) },
		"rejection": func() {
			b.TryAcquire()
			b.TryAcquire()
			b.Acquire(ctx)
			b.Do(ctx, fn)
			b.Release()
		},
	}
	for name, f := range cases {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s allocates %v times per run, want 0", name, n)
		}
	}
}
