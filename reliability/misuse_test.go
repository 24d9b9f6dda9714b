package reliability

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/internal/semtest"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// recovered runs f and returns what it panicked with, as text ("" if it did
// not panic).
func recovered(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = "panic: "
			switch v := r.(type) {
			case string:
				msg += v
			case error:
				msg += v.Error()
			default:
				msg += "?"
			}
		}
	}()
	f()
	return ""
}

func newPool(t testing.TB, cfg pool.Config) *pool.Bulkhead {
	t.Helper()
	b, err := pool.New("misuse", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

func TestMisuseReleaseWithoutAcquire(t *testing.T) {
	b := newSem(t, 2, 0)
	if msg := recovered(b.Release); !strings.Contains(msg, "semaphore: Release called without a held permit") {
		t.Fatalf("Release without Acquire: %q, want a panic that says so", msg)
	}
	// The panic leaves the bulkhead as it was: both permits still there.
	if !b.TryAcquire() || !b.TryAcquire() || b.TryAcquire() {
		t.Fatal("a wrong Release changed the number of permits")
	}
	b.Release()
	b.Release()
	if msg := recovered(b.Release); msg == "" {
		t.Fatal("a third Release after two permits did not panic")
	}
	semtest.AtRest(t, b, 2, 1, 0, 0)
}

// TestMisuseNilFunction: a nil function is a programming error. The pool
// panics at once, before counting anything, with a message that names it;
// the semaphore must do the same, whether or not a permit is free.
func TestMisuseNilFunction(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, pool.Config{MaxWorkers: 1})
	if msg := recovered(func() { pool.Submit[int](ctx, p, nil) }); !strings.Contains(msg, "nil function") {
		t.Errorf("pool.Submit(nil fn): %q, want a panic naming the nil function", msg)
	}
	if msg := recovered(func() { p.TryGo(ctx, nil) }); !strings.Contains(msg, "nil function") {
		t.Errorf("pool.TryGo(nil fn): %q, want a panic naming the nil function", msg)
	}
	if s := p.Stats(); s.Permitted+s.Rejected+s.Cancelled != 0 {
		t.Errorf("pool counted a nil function: %+v", s)
	}

	b := newSem(t, 1, 0)
	for _, full := range []bool{false, true} {
		if full && !b.TryAcquire() {
			t.Fatal("TryAcquire")
		}
		before := b.Stats()
		msg := recovered(func() { b.Do(ctx, nil) })
		if !strings.Contains(msg, "nil function") {
			t.Errorf("semaphore Do(nil fn) with full=%v: %q, want a panic naming the nil function, as the pool does", full, msg)
		}
		msg = recovered(func() { semaphore.Execute[int](ctx, b, nil) })
		if !strings.Contains(msg, "nil function") {
			t.Errorf("semaphore.Execute(nil fn) with full=%v: %q, want a panic naming the nil function", full, msg)
		}
		if after := b.Stats(); after != before {
			t.Errorf("a nil function was counted (full=%v):\nbefore %+v\nafter  %+v", full, before, after)
		}
		if full {
			b.Release()
		}
	}
}

// TestMisuseNilContext: a nil context is a programming error too. Both
// kinds panic at once, before counting anything, with a message that says so.
func TestMisuseNilContext(t *testing.T) {
	fn := func(context.Context) error { return nil }
	b := newSem(t, 1, 0)
	for name, call := range map[string]func(){
		"semaphore.Acquire": func() { b.Acquire(nil) },
		"semaphore.Do":      func() { b.Do(nil, fn) },
	} {
		if msg := recovered(call); !strings.Contains(msg, "nil Context") {
			t.Errorf("%s(nil ctx): %q, want a panic naming the nil Context", name, msg)
		}
	}
	semtest.AtRest(t, b, 0, 0, 0, 0)

	p := newPool(t, pool.Config{MaxWorkers: 1})
	if msg := recovered(func() { p.TryGo(nil, fn) }); !strings.Contains(msg, "nil Context") {
		t.Errorf("pool.TryGo(nil ctx): %q, want a panic naming the nil Context", msg)
	}
	if s := p.Stats(); s.Permitted+s.Rejected+s.Cancelled != 0 || s.InFlight+s.QueueDepth != 0 {
		t.Errorf("pool counted a nil context: %+v", s)
	}
}

func TestMisuseSubmitAfterCloseAndCloseTwice(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1})
	f, err := p.TryGo(ctx, func(context.Context) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := f.Wait(ctx); err != nil {
		t.Fatalf("a task accepted before Close: %v", err)
	}
	if f2, err := p.TryGo(ctx, func(context.Context) error { t.Error("ran after Close"); return nil }); err != bulkhead.ErrClosed || f2 != nil {
		t.Fatalf("Go after Close = %v, %v; want nil, ErrClosed", f2, err)
	}
	if _, err := pool.Submit(ctx, p, func(context.Context) (int, error) { return 1, nil }); err != bulkhead.ErrClosed {
		t.Fatalf("Submit after Close = %v, want ErrClosed", err)
	}
	if err := p.Reconfigure(pool.Config{MaxWorkers: 2}); err != bulkhead.ErrClosed {
		t.Fatalf("Reconfigure after Close = %v, want ErrClosed", err)
	}
	// ErrClosed on submission is counted nowhere.
	if s := p.Stats(); s.Permitted != 1 || s.Finished != 1 || s.Rejected+s.Cancelled != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestMisuseWaitOnCancelledFuture(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1})
	gate := make(chan struct{})
	running, err := p.TryGo(ctx, func(ctx context.Context) error { <-gate; return nil })
	if err != nil {
		t.Fatal(err)
	}
	queued, err := pool.Submit(ctx, p, func(context.Context) (int, error) { t.Error("a cancelled task ran"); return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	queued.Cancel()
	queued.Cancel() // harmless twice
	if _, err := queued.Wait(ctx); err != context.Canceled {
		t.Fatalf("Wait on a cancelled queued future = %v, want context.Canceled", err)
	}
	if _, err := queued.Wait(ctx); err != context.Canceled {
		t.Fatalf("second Wait = %v", err)
	}
	close(gate)
	if _, err := running.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	running.Cancel() // after completion: nothing happens
	if _, err := running.Wait(ctx); err != nil {
		t.Fatalf("Cancel after completion changed the result: %v", err)
	}
	// A Wait whose own context ends returns that error and leaves the task alone.
	gate2 := make(chan struct{})
	slow, err := p.TryGo(ctx, func(context.Context) error { <-gate2; return nil })
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := slow.Wait(wctx); err != context.Canceled {
		t.Fatalf("Wait with an ended context = %v", err)
	}
	close(gate2)
	if _, err := slow.Wait(ctx); err != nil {
		t.Fatalf("the task was disturbed by its waiter's context: %v", err)
	}
	if s := p.Stats(); s.Permitted != 2 || s.Cancelled != 1 || s.Finished != 2 || s.InFlight+s.QueueDepth != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestMisuseBadConfigIsAnErrorNotAPanic(t *testing.T) {
	for _, cfg := range []semaphore.Config{{}, {MaxConcurrentCalls: -1}, {MaxConcurrentCalls: 1 << 40}, {MaxConcurrentCalls: 1, MaxWaitDuration: -1}} {
		if b, err := semaphore.New("x", cfg); err == nil || b != nil || !strings.Contains(err.Error(), "must be") {
			t.Errorf("semaphore.New(%+v) = %v, %v", cfg, b, err)
		}
	}
	for _, cfg := range []pool.Config{{}, {MaxWorkers: 1 << 40}, {MaxWorkers: 1, QueueCapacity: -1}, {MaxWorkers: 1, QueueCapacity: 1 << 40},
		{MaxWorkers: 1, QueueTimeout: -1}, {MaxWorkers: 1, KeepAlive: -1}} {
		if b, err := pool.New("x", cfg); err == nil || b != nil || !strings.Contains(err.Error(), "must be") {
			t.Errorf("pool.New(%+v) = %v, %v", cfg, b, err)
		}
	}
	if _, err := semaphore.New("", semaphore.DefaultConfig()); err == nil {
		t.Error("semaphore.New with an empty name succeeded")
	}
	if _, err := pool.New("", pool.DefaultConfig()); err == nil || errors.Is(err, bulkhead.ErrClosed) {
		t.Error("pool.New with an empty name succeeded")
	}
}
