package pool_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// All inside a task: B fails fast, C is queued. A decided All should start
// nothing more; C should be cancelled in the queue (never permitted).
func TestDecidedAllStartsNothingMoreInTheSlot(t *testing.T) {
	started := 0
	for i := range 300 {
		b, _ := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 10})
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
		b.Close(guardCtx(t))
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
		b, _ := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 10})
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
		b.Close(guardCtx(t))
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
		b, _ := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 10})
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
		b.Close(guardCtx(t))
		if inflight > 1 {
			over++
		}
	}
	if over > 0 {
		t.Errorf("after All returned, InFlight 2 on MaxWorkers 1 with the task running on, in %d of 100 runs", over)
	}
}
