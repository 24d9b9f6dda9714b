package future_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead/future"
)

// chainLength is the length of the Then chains below: 50,000 by default,
// 3,000,000 (the length that killed the process before) with
// BULKHEAD_LONG_CHAIN=1.
func chainLength() int {
	if os.Getenv("BULKHEAD_LONG_CHAIN") != "" {
		return 3_000_000
	}
	return 50_000
}

// Completing or cancelling a long Then chain takes constant stack. The stack
// limit is set far below what one frame per stage needs (recursion would be
// a fatal stack overflow, which nothing can recover), so this fails loudly
// without the loop in runHooks.
func TestLongThenChainDoesNotRecurse(t *testing.T) {
	n := chainLength()
	defer debug.SetMaxStack(debug.SetMaxStack(2 << 20))
	build := func() (*future.Promise[int], *future.Future[int]) {
		p := future.NewPromise[int](nil)
		last := p.Future()
		for range n {
			last = future.Then(last, func(v int) (int, error) { return v + 1, nil })
		}
		return p, last
	}
	t.Run("complete", func(t *testing.T) {
		p, last := build()
		p.Complete(0, nil)
		if v, err := last.Result(); v != n || err != nil {
			t.Fatalf("last stage = %d, %v; want %d", v, err, n)
		}
	})
	t.Run("cancel source", func(t *testing.T) {
		p, last := build()
		p.Future().Cancel()
		if _, err := last.Result(); !errors.Is(err, context.Canceled) {
			t.Fatalf("last stage = %v, want context.Canceled", err)
		}
	})
	t.Run("cancel last", func(t *testing.T) {
		p, last := build()
		last.Cancel()
		if _, err := last.Result(); !errors.Is(err, context.Canceled) {
			t.Fatalf("last stage = %v", err)
		}
		if _, err := p.Future().Result(); err != future.ErrNotDone {
			t.Fatalf("source = %v, want still pending", err)
		}
		p.Complete(0, nil)
	})
}

// A completed future keeps its value, not the work behind it: the
// canceler (for a pool, the task with its function, context and bulkhead)
// is dropped on completion, also for a Then stage's function and source.
func TestCompletedFutureDropsItsCanceler(t *testing.T) {
	collected := make(chan string, 2)
	var p *future.Promise[int]
	var g *future.Future[int]
	func() {
		big := &struct{ b [1 << 16]byte }{}
		runtime.AddCleanup(big, func(s string) { collected <- s }, "canceler")
		p = future.NewPromise[int](cancelFunc(func() { _ = big.b[0] }))
		src := &struct{ b [1 << 16]byte }{}
		runtime.AddCleanup(src, func(s string) { collected <- s }, "then function")
		g = future.Then(p.Future(), func(v int) (int, error) { return v + int(src.b[0]), nil })
	}()
	p.Complete(1, nil)
	f := p.Future()
	deadline := time.Now().Add(guard)
	for got := 0; got < 2; {
		runtime.GC()
		select {
		case <-collected:
			got++
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatalf("only %d of 2 were collected while the futures are held", got)
			}
		}
	}
	if v, err := f.Result(); v != 1 || err != nil {
		t.Fatal(v, err)
	}
	if v, err := g.Result(); v != 1 || err != nil {
		t.Fatal(v, err)
	}
}
