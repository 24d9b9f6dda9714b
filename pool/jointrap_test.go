package pool_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// goid returns the current goroutine's id, for showing which goroutine runs
// what. Tests only.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// The join trap, face 1: Submit then Wait straight away runs the task on
// another goroutine (a hand-off) while the caller sits blocked for the whole
// task, so the caller gains nothing over running the call itself under a
// semaphore. BenchmarkSubmitWait measures the cost of the hand-off.
//
// synctest makes "the caller is still blocked" a fact rather than a guess:
// once every goroutine of the bubble is blocked, the task is parked on
// release and the caller must be parked in Wait, not past it.
func TestJoinTrapSubmitThenWaitHoldsTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("test", pool.Config{MaxWorkers: 1})
		if err != nil {
			t.Fatal(err)
		}
		caller := make(chan uint64, 1)
		taskG := make(chan uint64, 1)
		release := make(chan struct{})
		resumed := make(chan struct{})
		go func() {
			defer close(resumed)
			caller <- goid()
			f, err := pool.Submit(context.Background(), b, func(context.Context) (int, error) {
				taskG <- goid()
				<-release
				return 1, nil
			})
			if err != nil {
				t.Error(err)
				return
			}
			if v, err := f.Wait(context.Background()); v != 1 || err != nil {
				t.Errorf("Wait: %v, %v", v, err)
			}
		}()
		synctest.Wait()
		if len(taskG) != 1 {
			t.Fatal("the task has not started")
		}
		select {
		case <-resumed:
			t.Fatal("the caller went on while the task was still running")
		default:
		}
		close(release)
		<-resumed
		if c, w := <-caller, <-taskG; c == w {
			t.Fatalf("the task ran on the caller's goroutine %d", c)
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// The join trap, face 2, used to deadlock: a task that submits to its own
// saturated pool and waits for the result waited for a worker that only it
// could free. Now Wait, given the task's context, sees that the task it
// waits for is still queued in the same pool and starts it at once in its
// own slot. A chain of nested submit-and-wait, depth levels deep, completes
// on a pool of one worker, with one level executing at a time (each waits
// for the next), and the counters and events count each level once.
func TestNestedSubmitAndWaitHelps(t *testing.T) {
	const depth = 200
	b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1})
	var permitted, finished atomic.Int64
	b.Subscribe(func(e bulkhead.Event) {
		switch e.Type {
		case bulkhead.EventPermitted:
			permitted.Add(1)
		case bulkhead.EventFinished:
			finished.Add(1)
		}
	})
	var executing, maxExecuting atomic.Int64 // levels not blocked in Wait
	enter := func() {
		if c := executing.Add(1); c > maxExecuting.Load() {
			maxExecuting.Store(c)
		}
	}
	var peak atomic.Int64
	var level func(ctx context.Context, d int) (int, error)
	level = func(ctx context.Context, d int) (int, error) {
		enter()
		defer executing.Add(-1)
		if s := b.Stats(); int64(s.InFlight) > peak.Load() {
			peak.Store(int64(s.InFlight))
			if s.Permitted-s.Finished != uint64(s.InFlight) {
				t.Errorf("inconsistent Stats while helping: %+v", s)
			}
		}
		if d == depth {
			return d, nil
		}
		f, err := pool.Submit(ctx, b, func(ctx context.Context) (int, error) { return level(ctx, d+1) })
		if err != nil {
			return 0, err
		}
		executing.Add(-1)
		v, err := f.Wait(ctx) // no deadline: before helping, this never returned
		enter()
		return v, err
	}
	f := mustSubmit(t, b, func(ctx context.Context) (int, error) { return level(ctx, 1) })
	v, err := f.Wait(guardCtx(t))
	if v != depth || err != nil {
		t.Fatalf("outer = %d, %v; want %d", v, err, depth)
	}
	if m := maxExecuting.Load(); m != 1 {
		t.Fatalf("%d levels executed at once on a pool of one worker, want 1", m)
	}
	s := atRest(t, b)
	if s.Permitted != depth || s.Finished != depth || s.Failed != 0 || s.Cancelled != 0 || s.Rejected != 0 {
		t.Fatalf("Stats %+v, want %d permitted and finished", s, depth)
	}
	if peak.Load() != depth {
		t.Fatalf("peak InFlight %d, want %d (each helped task counts beside its waiter)", peak.Load(), depth)
	}
	// The finished event follows the future's completion; Close waits for
	// the worker to be done with it.
	if err := b.Close(guardCtx(t)); err != nil {
		t.Fatal(err)
	}
	if permitted.Load() != depth || finished.Load() != depth {
		t.Fatalf("events: %d permitted, %d finished; want %d each", permitted.Load(), finished.Load(), depth)
	}
}

// A task whose Wait cannot help (the task waited for is already running on
// another worker) waits as before; so does a Wait outside the pool, and a
// Wait on a task of another pool.
func TestWaitHelpsOnlyQueuedTasksOfItsPool(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 2, QueueCapacity: 2})
	other, err := pool.New("other", pool.Config{MaxWorkers: 1, QueueCapacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(guardCtx(t))
	g := newGate()
	busy := mustSubmit(t, other, g.task(0)) // other's worker is busy
	<-g.started
	running := make(chan struct{})
	release := make(chan struct{})
	outer := mustSubmit(t, b, func(ctx context.Context) (int, error) {
		inner, err := pool.Submit(ctx, b, func(context.Context) (int, error) {
			close(running)
			<-release
			return 2, nil
		})
		if err != nil {
			return 0, err
		}
		<-running // on b's second worker
		queuedElsewhere, err := pool.Submit(ctx, other, func(context.Context) (int, error) { return 3, nil })
		if err != nil {
			return 0, err
		}
		wctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := queuedElsewhere.Wait(wctx); err != context.Canceled {
			t.Errorf("Wait on another pool's queued task: %v, want to wait (and see the context end)", err)
		}
		close(g.open) // other's worker is free now
		close(release)
		v, err := inner.Wait(ctx)
		w, err2 := queuedElsewhere.Wait(guardCtx(t))
		return v + w, errors.Join(err, err2)
	})
	if v, err := outer.Wait(guardCtx(t)); v != 5 || err != nil {
		t.Fatalf("outer = %d, %v", v, err)
	}
	if _, err := busy.Wait(guardCtx(t)); err != nil {
		t.Fatal(err)
	}
	if s := atRest(t, b); s.Permitted != 2 || s.Finished != 2 {
		t.Fatalf("Stats %+v", s)
	}
}

// Fanning out and collecting from outside the pool stays the plain way.
func TestFanOutFromOutsideDoesNotDeadlock(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 8})
	var fs []*future.Future[int]
	for i := range 8 {
		fs = append(fs, mustSubmit(t, b, func(context.Context) (int, error) { return i, nil }))
	}
	vals, err := future.All(guardCtx(t), fs...)
	if err != nil || len(vals) != 8 || vals[7] != 7 {
		t.Fatalf("%v, %v", vals, err)
	}
}
