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
	"time"

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

// The join trap, face 2: a task that submits to its own saturated pool and
// waits for the result waits for a worker that only it could free. Here it
// ends because the inner Wait has a deadline; without one the pool would be
// stuck for good.
func TestJoinTrapNestedSubmitDeadlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 1})
		if err != nil {
			t.Fatal(err)
		}
		var innerRan atomic.Bool
		var stuck bulkhead.Stats
		outer := mustSubmit(t, b, func(ctx context.Context) (int, error) {
			inner, err := pool.Submit(ctx, b, func(context.Context) (int, error) {
				innerRan.Store(true)
				return 1, nil
			})
			if err != nil {
				return 0, err
			}
			// The guard: without this deadline, the Wait below never returns.
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			v, err := inner.Wait(wctx)
			stuck = b.Stats()
			inner.Cancel() // clean up: the inner task leaves the queue, never runs
			return v, err
		})
		_, err = outer.Wait(context.Background())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("outer: %v, want the guard's DeadlineExceeded", err)
		}
		if stuck.InFlight != 1 || stuck.QueueDepth != 1 {
			t.Fatalf("while stuck: %+v, want the outer task running and the inner one queued", stuck)
		}
		if innerRan.Load() {
			t.Fatal("the inner task ran")
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		s := atRest(t, b)
		if s.Permitted != 1 || s.Cancelled != 1 {
			t.Fatalf("Stats %+v", s)
		}
	})
}

// The way out of face 2 is to collect from outside the pool: fan out, then
// wait on the caller's goroutine.
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
