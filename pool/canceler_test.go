package pool_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// A Promise whose Canceler is a pool task's future (cancelling the promise
// cancels the task) is its own future: Wait ends when the promise is
// completed, not when the task behind the Canceler ends (review finding: a
// Future matched the Then chain's source method and Wait waited on the task).
func TestWaitOnPromiseWithPoolFutureCanceler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("canceler", pool.Config{MaxWorkers: 1, QueueCapacity: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		release := make(chan struct{})
		defer close(release)
		g, err := pool.Submit(ctx, b, func(context.Context) (int, error) { <-release; return 0, nil })
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []future.Canceler{g, struct{ *future.Future[int] }{g}} {
			p := future.NewPromise[int](c)
			done := make(chan struct{})
			go func() {
				defer close(done)
				if v, err := p.Future().Wait(ctx); v != 1 || err != nil {
					t.Errorf("Wait = %d, %v; want 1, nil", v, err)
				}
			}()
			synctest.Wait()
			p.Complete(1, nil)
			synctest.Wait()
			select {
			case <-done:
			default:
				t.Fatalf("Wait on a promise with Canceler %T still blocked after Complete", c)
			}
		}
	})
}

// A task's context keeps its Done channel after the task returns: as the
// context contract says, successive calls of Done return the same value
// (review finding: a dropped task's context returned another, closed one).
func TestTaskContextDoneStableAfterReturn(t *testing.T) {
	b, err := pool.New("done", pool.Config{MaxWorkers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, parent := range []context.Context{context.Background(), cancellable} {
		var tctx context.Context
		var before <-chan struct{}
		f, err := pool.Submit(parent, b, func(ctx context.Context) (int, error) {
			tctx, before = ctx, ctx.Done()
			return 0, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if after := tctx.Done(); after != before {
			t.Errorf("parent %v: Done changed after the task returned: %p, then %p", parent, before, after)
		}
		select {
		case <-before:
		default:
			t.Errorf("parent %v: the task's Done is open after it returned", parent)
		}
	}
}
