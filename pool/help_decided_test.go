package pool_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// All inside a task: B fails fast, C is queued. A decided All should start
// nothing more; C should be cancelled in the queue (never permitted).
func TestDecidedAllStartsNothingMoreInTheSlot(t *testing.T) {
	started := 0
	for i := range 300 {
		b, err := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 10})
		if err != nil {
			t.Fatal(err)
		}
		var cRan atomic.Bool
		parent := mustSubmit(t, b, func(ctx context.Context) (int, error) {
			fb, _ := pool.Submit(ctx, b, func(context.Context) (int, error) { return 0, errors.New("B") })
			fc, _ := pool.Submit(ctx, b, func(context.Context) (int, error) { cRan.Store(true); return 1, nil })
			if i%2 == 1 { // a quick callback registered before All's hook
				fb.OnComplete(func(int, error) {
					for range 100 {
						runtime.Gosched()
					}
				})
			}
			_, err := future.All(ctx, fb, fc)
			return 0, err
		})
		wait(t, parent)
		if err := b.Close(guardCtx(t)); err != nil {
			t.Fatal(err)
		}
		if cRan.Load() {
			started++
			if started == 1 {
				t.Logf("iteration %d: C ran after All decided; Stats %+v", i, b.Stats())
			}
		}
	}
	if started > 0 {
		t.Errorf("C started by a decided All in %d of 300 runs", started)
	}
}

// First inside a task: B is quick, C queued: C should not start in the
// parent's slot while the parent still runs.
func TestDecidedFirstStartsNothingMoreInTheSlot(t *testing.T) {
	started := 0
	for range 300 {
		b, err := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 10})
		if err != nil {
			t.Fatal(err)
		}
		var parentRunning, cDuringParent atomic.Bool
		parent := mustSubmit(t, b, func(ctx context.Context) (int, error) {
			parentRunning.Store(true)
			defer parentRunning.Store(false)
			fb, _ := pool.Submit(ctx, b, func(context.Context) (int, error) { return 1, nil })
			fc, _ := pool.Submit(ctx, b, func(context.Context) (int, error) {
				cDuringParent.Store(parentRunning.Load())
				return 2, nil
			})
			return future.First(ctx, fb, fc)
		})
		wait(t, parent)
		if err := b.Close(guardCtx(t)); err != nil {
			t.Fatal(err)
		}
		if cDuringParent.Load() {
			started++
		}
	}
	if started > 0 {
		t.Errorf("C started in the parent's slot after First was decided in %d of 300 runs", started)
	}
}

// After a decided All returns, the task runs on; a task started in its
// slot meanwhile makes two run at once on a pool of one worker.
func TestDecidedAllOfThenFuturesStaysWithinTheLimit(t *testing.T) {
	over := 0
	for range 100 {
		b, err := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 10})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var inflight int
		parent := mustSubmit(t, b, func(ctx context.Context) (int, error) {
			fb, _ := pool.Submit(ctx, b, func(context.Context) (int, error) { return 0, errors.New("B") })
			fc, _ := pool.Submit(ctx, b, func(context.Context) (int, error) { <-release; return 1, nil })
			id := func(v int) (int, error) { return v, nil }
			future.All(ctx, future.Then(fb, id), future.Then(fc, id))
			inflight = b.Stats().InFlight // the task runs on, not waiting
			return 0, nil
		})
		wait(t, parent)
		close(release)
		if err := b.Close(guardCtx(t)); err != nil {
			t.Fatal(err)
		}
		if inflight > 1 {
			over++
		}
	}
	if over > 0 {
		t.Errorf("after All returned, InFlight 2 on MaxWorkers 1 with the task running on, in %d of 100 runs", over)
	}
}

// The same, step by step: a callback of B's future, registered before All's
// hook, holds B's completion open. While it does, the slot B was lent must
// not come back to the task (else All, not yet told of B's failure, would
// start C in it); once it returns, All is decided and C is cancelled in the
// queue, never permitted.
func TestDecidedAllStartsNothingWhileTheDecidingCallbackRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 10})
		latch := make(chan struct{})
		var cRan atomic.Bool
		parent := mustSubmit(t, b, func(ctx context.Context) (int, error) {
			fb, _ := pool.Submit(ctx, b, func(context.Context) (int, error) { return 0, errors.New("B") })
			fc, _ := pool.Submit(ctx, b, func(context.Context) (int, error) { cRan.Store(true); return 1, nil })
			fb.OnComplete(func(int, error) { <-latch })
			_, err := future.All(ctx, fb, fc)
			return 0, err
		})
		synctest.Wait() // B has failed; its callback holds its completion open
		if cRan.Load() || b.Stats().Permitted != 2 {
			t.Fatalf("while B's callback runs: C ran %v, stats %+v; want only the task and B permitted", cRan.Load(), b.Stats())
		}
		close(latch)
		if _, err := wait(t, parent); err == nil {
			t.Fatal("All succeeded although B failed")
		}
		synctest.Wait()
		if cRan.Load() || b.Stats().Permitted != 2 {
			t.Fatalf("after All decided: C ran %v, stats %+v", cRan.Load(), b.Stats())
		}
	})
}
