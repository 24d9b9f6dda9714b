package future_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkhead-go/bulkhead"
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
	if _, err := future.All(context.Background(), fs...); err != e1 {
		t.Fatalf("err = %v, want %v", err, e1)
	}
}

func TestAllContext(t *testing.T) {
	p := future.NewPromise[int](nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := future.All(ctx, future.Completed(1, nil), p.Future()); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
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

func TestThenPanic(t *testing.T) {
	g := future.Then(future.Completed(1, nil), func(int) (int, error) { panic("oops") })
	_, err := g.Result()
	var pe *bulkhead.PanicError
	if !errors.As(err, &pe) || pe.Value != "oops" || len(pe.Stack) == 0 {
		t.Fatalf("err = %v, want a PanicError with value and stack", err)
	}
}

func TestThenCancelCancelsSource(t *testing.T) {
	p := future.NewPromise[int](nil)
	g := future.Then(p.Future(), func(v int) (int, error) { return v, nil })
	g.Cancel()
	if _, err := p.Future().Result(); !errors.Is(err, context.Canceled) {
		t.Fatalf("source: %v, want context.Canceled", err)
	}
	if _, err := g.Result(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Then future: %v, want context.Canceled", err)
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
