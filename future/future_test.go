package future_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkhead-go/bulkhead/future"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// guard bounds a wait that must end; it is never a pass criterion.
const guard = 10 * time.Second

func guardCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(cancel)
	return ctx
}

func TestPromiseCompletesOnce(t *testing.T) {
	p := future.NewPromise[int](nil)
	f := p.Future()
	if _, err := f.Result(); !errors.Is(err, future.ErrNotDone) {
		t.Fatalf("Result before completion: err = %v, want ErrNotDone", err)
	}
	select {
	case <-f.Done():
		t.Fatal("Done closed before completion")
	default:
	}
	if !p.Complete(7, nil) {
		t.Fatal("first Complete returned false")
	}
	if p.Complete(8, errors.New("late")) {
		t.Fatal("second Complete returned true")
	}
	f.Cancel() // no effect once complete
	if v, err := f.Wait(context.Background()); v != 7 || err != nil {
		t.Fatalf("Wait = %d, %v; want 7, nil", v, err)
	}
	if v, err := f.Result(); v != 7 || err != nil {
		t.Fatalf("Result = %d, %v; want 7, nil", v, err)
	}
	<-f.Done()
}

func TestManyWaiters(t *testing.T) {
	p := future.NewPromise[string](nil)
	ctx := guardCtx(t)
	const n = 64
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	ready.Add(n)
	got := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			v, err := p.Future().Wait(ctx)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
			}
			got[i] = v
		}()
	}
	ready.Wait()
	p.Complete("ok", nil)
	wg.Wait()
	for i, v := range got {
		if v != "ok" {
			t.Fatalf("waiter %d got %q", i, v)
		}
	}
}

// TestWaitRacesComplete: a Wait whose context cannot end parks without a
// mutex (parkLock); a completion between its check and its sleep must still
// wake it. A lost wake-up hangs a waiter: the guard fails the test.
func TestWaitRacesComplete(t *testing.T) {
	ctx := guardCtx(t)
	for range 20000 {
		p := future.NewPromise[int](nil)
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if v, err := p.Future().Wait(context.Background()); v != 1 || err != nil {
					t.Errorf("Wait = %d, %v; want 1, nil", v, err)
				}
			}()
		}
		go p.Complete(1, nil)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatal("a Wait missed the completion")
		}
	}
}

func TestCompleteRacesCancel(t *testing.T) {
	for range 200 {
		p := future.NewPromise[int](nil)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					p.Future().Cancel()
				} else if p.Complete(i, nil) {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		v, err := p.Future().Result()
		switch {
		case errors.Is(err, context.Canceled):
			if wins.Load() != 0 {
				t.Fatalf("cancelled, yet %d Complete calls won", wins.Load())
			}
		case err == nil:
			if wins.Load() != 1 || v%2 != 1 {
				t.Fatalf("value %d with %d winners", v, wins.Load())
			}
		default:
			t.Fatalf("unexpected result %d, %v", v, err)
		}
	}
}

func TestWaitContextEndsWaitNotWork(t *testing.T) {
	p := future.NewPromise[int](nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Future().Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with ended ctx: %v", err)
	}
	if _, err := p.Future().Result(); !errors.Is(err, future.ErrNotDone) {
		t.Fatalf("the future was completed by the waiter's ctx: %v", err)
	}
	p.Complete(1, nil)
	// Both ready: the result wins.
	if v, err := p.Future().Wait(ctx); v != 1 || err != nil {
		t.Fatalf("Wait = %d, %v; want 1, nil", v, err)
	}
}

func TestWaitDoesNotAllocate(t *testing.T) {
	done := future.Completed(3, nil)
	pending := future.NewPromise[int](nil).Future()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	ended.Done() // make the context's channel now, not in the measurement
	bg := context.Background()
	if a := testing.AllocsPerRun(100, func() { _, _ = done.Wait(bg) }); a != 0 {
		t.Errorf("Wait on a completed future: %v allocs", a)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = pending.Wait(ended) }); a != 0 {
		t.Errorf("Wait until ctx ends: %v allocs", a)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = done.Result() }); a != 0 {
		t.Errorf("Result: %v allocs", a)
	}
}

func TestPromiseCosts(t *testing.T) {
	a := testing.AllocsPerRun(100, func() {
		p := future.NewPromise[int](nil)
		p.Complete(1, nil)
	})
	if a > 2 {
		t.Errorf("NewPromise+Complete: %v allocs, want <= 2", a)
	}
}

type countCanceler struct{ n atomic.Int32 }

func (c *countCanceler) Cancel() { c.n.Add(1) }

func TestCancelCallsCancelerOnce(t *testing.T) {
	c := &countCanceler{}
	p := future.NewPromise[int](c)
	f := p.Future()
	f.Cancel()
	f.Cancel()
	if n := c.n.Load(); n != 1 {
		t.Fatalf("canceler called %d times, want 1", n)
	}
	if _, err := f.Result(); !errors.Is(err, future.ErrNotDone) {
		t.Fatalf("a future with a Canceler completes when the work says so, got %v", err)
	}
	p.Complete(0, context.Canceled)
	if _, err := f.Wait(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v", err)
	}
}

func TestCancelWithoutCanceler(t *testing.T) {
	p := future.NewPromise[int](nil)
	p.Future().Cancel()
	if _, err := p.Future().Wait(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v, want context.Canceled", err)
	}
	if p.Complete(1, nil) {
		t.Fatal("Complete after Cancel returned true")
	}
}

func TestPromiseMisuse(t *testing.T) {
	mustPanic(t, "Init twice", func() {
		var p future.Promise[int]
		p.Init(nil)
		p.Init(nil)
	})
	mustPanic(t, "Complete before Init", func() {
		var p future.Promise[int]
		p.Complete(1, nil)
	})
}

func mustPanic(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	fn()
}

func TestCompleted(t *testing.T) {
	boom := errors.New("boom")
	f := future.Completed(0, boom)
	<-f.Done()
	if _, err := f.Result(); err != boom {
		t.Fatalf("Result err = %v", err)
	}
	f.Cancel()
	if _, err := f.Wait(context.Background()); err != boom {
		t.Fatalf("Wait err = %v", err)
	}
}

func TestAll(t *testing.T) {
	ctx := guardCtx(t)
	ps := []*future.Promise[int]{future.NewPromise[int](nil), future.NewPromise[int](nil), future.NewPromise[int](nil)}
	fs := []*future.Future[int]{ps[0].Future(), ps[1].Future(), ps[2].Future()}
	// Complete out of order; All keeps argument order.
	ps[2].Complete(3, nil)
	ps[0].Complete(1, nil)
	go ps[1].Complete(2, nil)
	vals, err := future.All(ctx, fs...)
	if err != nil || len(vals) != 3 || vals[0] != 1 || vals[1] != 2 || vals[2] != 3 {
		t.Fatalf("All = %v, %v", vals, err)
	}
	if vals, err := future.All[int](ctx); err != nil || len(vals) != 0 {
		t.Fatalf("All() = %v, %v", vals, err)
	}
}

func TestAllFirstErrorInArgumentOrder(t *testing.T) {
	e1, e2 := errors.New("one"), errors.New("two")
	fs := []*future.Future[int]{future.Completed(0, nil), future.Completed(0, e1), future.Completed(0, e2)}
	_, err := future.All(context.Background(), fs...)
	var te *future.TaskError
	if !errors.As(err, &te) || te.Index != 1 || !errors.Is(err, e1) {
		t.Fatalf("err = %v, want a TaskError for index 1 wrapping %v", err, e1)
	}
	if want := "future 1 failed: one"; err.Error() != want {
		t.Fatalf("err = %q, want %q", err, want)
	}
}

func TestAllContext(t *testing.T) {
	p := future.NewPromise[int](nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	vals, err := future.All(ctx, future.Completed(1, nil), p.Future())
	if err != context.Canceled || len(vals) != 2 || vals[0] != 1 {
		t.Fatalf("All = %v, %v; want [1 0] and ctx's own error", vals, err)
	}
	// The caller's context ending is told apart from a future that was
	// cancelled: that one is a TaskError.
	c := future.NewPromise[int](nil)
	c.Future().Cancel()
	_, err = future.All(context.Background(), c.Future())
	var te *future.TaskError
	if !errors.As(err, &te) || te.Index != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("All with a cancelled future = %v, want a TaskError", err)
	}
	if p.Future().Cancel(); !errors.Is(func() error { _, e := p.Future().Result(); return e }(), context.Canceled) {
		t.Fatal("cleanup")
	}
}

// All cancels the futures still pending when one fails, and returns the
// values of those that had succeeded.
func TestAllCancelsTheRestAndKeepsValues(t *testing.T) {
	ok := future.Completed(7, nil)
	var cancelled atomic.Int32
	pending := future.NewPromise[int](cancelFunc(func() { cancelled.Add(1) }))
	failing := future.NewPromise[int](nil)
	boom := errors.New("boom")
	go failing.Complete(0, boom)
	vals, err := future.All(guardCtx(t), ok, pending.Future(), failing.Future())
	var te *future.TaskError
	if !errors.As(err, &te) || te.Index != 2 || te.Err != boom {
		t.Fatalf("err = %v", err)
	}
	if len(vals) != 3 || vals[0] != 7 || vals[1] != 0 {
		t.Fatalf("vals = %v, want [7 0 0]", vals)
	}
	if cancelled.Load() != 1 {
		t.Fatalf("the pending future was cancelled %d times, want 1", cancelled.Load())
	}
	pending.Complete(0, context.Canceled)
}

type cancelFunc func()

func (f cancelFunc) Cancel() { f() }

// Settle waits for every future and reports every value and error by
// index; those not done when its context ends say ErrNotDone.
func TestSettle(t *testing.T) {
	boom := errors.New("boom")
	late := future.NewPromise[int](nil)
	go late.Complete(3, nil)
	vals, errs := future.Settle(guardCtx(t), future.Completed(1, nil), future.Completed(0, boom), late.Future())
	if len(vals) != 3 || vals[0] != 1 || vals[2] != 3 || errs[0] != nil || errs[1] != boom || errs[2] != nil {
		t.Fatalf("Settle = %v, %v", vals, errs)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	never := future.NewPromise[int](nil)
	vals, errs = future.Settle(ended, future.Completed(1, nil), never.Future())
	if vals[0] != 1 || errs[0] != nil || errs[1] != future.ErrNotDone {
		t.Fatalf("Settle with an ended context = %v, %v", vals, errs)
	}
	if n := future.HookCount(never.Future()); n != 0 {
		t.Fatalf("Settle left %d hooks", n)
	}
}

// Nil and zero inputs panic with a message naming the call.
func TestFirstContactMisuse(t *testing.T) {
	var zero future.Future[int]
	ok := future.Completed(1, nil)
	for name, tc := range map[string]struct {
		fn   func()
		want string
	}{
		"Wait(nil)":       {func() { _, _ = future.NewPromise[int](nil).Future().Wait(nil) }, "future: Wait called with a nil Context"},
		"zero Wait":       {func() { _, _ = zero.Wait(context.Background()) }, "future: Wait called on a zero Future"},
		"nil in All":      {func() { _, _ = future.All(context.Background(), ok, nil) }, "future: All called with a nil *Future at index 1"},
		"nil in First":    {func() { _, _ = future.First[int](context.Background(), nil) }, "future: First called with a nil *Future at index 0"},
		"nil in Settle":   {func() { _, _ = future.Settle[int](context.Background(), nil) }, "future: Settle called with a nil *Future at index 0"},
		"zero in All":     {func() { _, _ = future.All(context.Background(), &zero) }, "future: All called on a zero Future"},
		"Then(nil, fn)":   {func() { future.Then(nil, func(int) (int, error) { return 0, nil }) }, "future: Then called with a nil *Future"},
		"Then(f, nil)":    {func() { future.Then[int, int](ok, nil) }, "future: Then called with a nil function"},
		"All(nil ctx)":    {func() { _, _ = future.All(nil, ok) }, "future: All called with a nil Context"},
		"nil Future.Wait": {func() { var f *future.Future[int]; _, _ = f.Wait(context.Background()) }, "future: Wait called on a nil *Future"},
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, tc.want) {
					t.Errorf("%s: panic %v, want %q", name, r, tc.want)
				}
			}()
			tc.fn()
		}()
	}
	if v, err := zero.Result(); err != future.ErrNotDone || v != 0 {
		t.Fatalf("zero Result = %v, %v", v, err)
	}
}

func TestFirst(t *testing.T) {
	ctx := guardCtx(t)
	a, b := future.NewPromise[string](nil), future.NewPromise[string](nil)
	go b.Complete("b", nil)
	v, err := future.First(ctx, a.Future(), b.Future())
	if v != "b" || err != nil {
		t.Fatalf("First = %q, %v", v, err)
	}
	a.Complete("a", nil)
	// Both complete: the earliest in argument order wins.
	if v, _ := future.First(ctx, a.Future(), b.Future()); v != "a" {
		t.Fatalf("First = %q, want a", v)
	}
	// A failure counts as completion.
	boom := errors.New("boom")
	c := future.NewPromise[string](nil)
	go c.Complete("", boom)
	if _, err := future.First(ctx, future.NewPromise[string](nil).Future(), c.Future()); err != boom {
		t.Fatalf("First err = %v", err)
	}
	if _, err := future.First[string](ctx); err == nil {
		t.Fatal("First() returned no error")
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := future.First(ended, future.NewPromise[string](nil).Future()); !errors.Is(err, context.Canceled) {
		t.Fatalf("First with ended ctx: %v", err)
	}
}

func TestThen(t *testing.T) {
	ctx := guardCtx(t)
	p := future.NewPromise[int](nil)
	g := future.Then(p.Future(), func(v int) (string, error) {
		return string(rune('a' + v)), nil
	})
	if _, err := g.Result(); !errors.Is(err, future.ErrNotDone) {
		t.Fatalf("Then future done before its source: %v", err)
	}
	go p.Complete(2, nil)
	if v, err := g.Wait(ctx); v != "c" || err != nil {
		t.Fatalf("Then = %q, %v", v, err)
	}
	// Already complete: fn runs at once.
	h := future.Then(g, func(s string) (int, error) { return len(s), nil })
	if v, err := h.Result(); v != 1 || err != nil {
		t.Fatalf("Then on a completed future = %d, %v", v, err)
	}
}

func TestThenError(t *testing.T) {
	boom := errors.New("boom")
	called := false
	g := future.Then(future.Completed(1, boom), func(int) (int, error) {
		called = true
		return 0, nil
	})
	if _, err := g.Result(); err != boom || called {
		t.Fatalf("err = %v, fn called = %v", err, called)
	}
	h := future.Then(future.Completed(1, nil), func(int) (int, error) { return 0, boom })
	if _, err := h.Result(); err != boom {
		t.Fatalf("fn's error: %v", err)
	}
}

// A Then function's panic is not recovered: it goes on up the goroutine
// (here the caller of Then, since the source is complete), and the new
// future has failed first, saying so.
func TestThenPanicGoesUp(t *testing.T) {
	var g *future.Future[int]
	src := future.NewPromise[int](nil)
	func() {
		defer func() {
			if r := recover(); r != "oops" {
				t.Fatalf("recover() = %v, want the Then function's panic", r)
			}
		}()
		g = future.Then(src.Future(), func(int) (int, error) { panic("oops") })
		future.Then(g, func(v int) (int, error) { return v, nil }) // fails with g
		src.Complete(1, nil)
	}()
	_, err := g.Result()
	if err == nil || !strings.Contains(err.Error(), "panicked or called runtime.Goexit") {
		t.Fatalf("Then future: %v, want the error saying its function did not return", err)
	}
}

// Cancelling a future made by Then cancels only that derivation: the source
// and its other Then chains run on.
func TestThenCancelLeavesSource(t *testing.T) {
	p := future.NewPromise[int](nil)
	called := false
	a := future.Then(p.Future(), func(v int) (int, error) { called = true; return v, nil })
	b := future.Then(p.Future(), func(v int) (int, error) { return v + 1, nil })
	a.Cancel()
	if _, err := a.Result(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Then future: %v, want context.Canceled", err)
	}
	if _, err := p.Future().Result(); err != future.ErrNotDone {
		t.Fatalf("source: %v, want still pending", err)
	}
	if n := future.HookCount(p.Future()); n != 1 {
		t.Fatalf("%d hooks on the source, want 1 (b's)", n)
	}
	p.Complete(1, nil)
	if v, err := b.Result(); v != 2 || err != nil || called {
		t.Fatalf("sibling = %v, %v; cancelled fn called = %v", v, err, called)
	}
}

// Done racing with completion must always hand out a channel that closes.
func TestDoneRacesComplete(t *testing.T) {
	for range 2000 {
		p := future.NewPromise[int](nil)
		var wg sync.WaitGroup
		chans := make([]<-chan struct{}, 4)
		for i := range chans {
			wg.Add(1)
			go func() { defer wg.Done(); chans[i] = p.Future().Done() }()
		}
		p.Complete(1, nil)
		wg.Wait()
		for _, c := range chans {
			select {
			case <-c:
			case <-time.After(guard):
				t.Fatal("a Done channel never closed")
			}
		}
	}
}
