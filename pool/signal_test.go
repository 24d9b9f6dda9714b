package pool_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead/future"

	"github.com/bulkhead-go/bulkhead/pool"
)

// A Wait with the context a task was submitted with parks on the task
// context's Done channel (see node.Signal): it returns the value once the
// task ends, and ctx.Err() once ctx ends while the task runs on, also after
// the future was cancelled while the task ran on.
func TestWaitWithTheSubmittersContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("test", pool.Config{MaxWorkers: 2, QueueCapacity: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(context.Background())

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f, err := pool.Submit(ctx, b, func(ctx context.Context) (int, error) {
			<-ctx.Done() // the waiter's channel and the task's are one
			return 7, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			synctest.Wait() // the waiter is parked
			f.Cancel()      // the running task's context ends
		}()
		if v, err := waitGuarded(t, f, ctx, cancel); v != 7 || err != nil {
			t.Fatalf("Wait = %d, %v; want 7, nil", v, err)
		}

		// ctx ends while the task ignores its context: Wait returns at once.
		release := make(chan struct{})
		unblock := func() { close(release) }
		g, err := pool.Submit(ctx, b, func(context.Context) (int, error) { <-release; return 1, nil })
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			synctest.Wait()
			cancel()
		}()
		if _, err := waitGuarded(t, g, ctx, unblock); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait after ctx ended = %v; want context.Canceled", err)
		}
		unblock()
		if v, err := g.Wait(context.Background()); v != 1 || err != nil {
			t.Fatalf("the task's result = %d, %v; want 1, nil", v, err)
		}

		// Cancelled while running, the task goes on; ctx ends later.
		ctx2, cancel2 := context.WithCancel(context.Background())
		release2 := make(chan struct{})
		unblock2 := func() { close(release2) }
		h, err := pool.Submit(ctx2, b, func(context.Context) (int, error) { <-release2; return 2, nil })
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			synctest.Wait()
			h.Cancel() // wakes the waiter: no result yet, so it waits on
			synctest.Wait()
			cancel2()
		}()
		if _, err := waitGuarded(t, h, ctx2, unblock2); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v; want context.Canceled", err)
		}
		unblock2()
		if v, _ := h.Wait(context.Background()); v != 2 {
			t.Fatalf("the task's result = %d; want 2", v)
		}
	})
}

// waitGuarded is f.Wait(ctx), failing the test if it has not returned
// after an hour of the bubble's clock (which the pool's timers advance);
// then it calls unblock, to let the task end, and waits on.
func waitGuarded(t *testing.T, f *future.Future[int], ctx context.Context, unblock func()) (int, error) {
	type result struct {
		v   int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f.Wait(ctx)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-time.After(time.Hour):
		t.Error("Wait did not return")
		unblock()
		r := <-ch
		return r.v, r.err
	}
}
