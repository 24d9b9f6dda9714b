package pool_test

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"

	"github.com/bulkhead-go/bulkhead/pool"
)

// A Group made inside a task, on a pool of one worker: its Wait, while
// another goroutine of the task calls Go, runs the task that Go queues in
// the waiting task's slot (review finding: Wait looked at the task before
// it was queued and slept for good).
func TestGroupWaitWhileAnotherGoroutineOfTheTaskGoes(t *testing.T) {
	for i := range 300 {
		synctest.Test(t, func(t *testing.T) {
			b, err := pool.New("inner", pool.Config{MaxWorkers: 1, QueueCapacity: 1})
			if err != nil {
				t.Fatal(err)
			}
			outer, err := pool.Submit(context.Background(), b, func(ctx context.Context) (int, error) {
				g := pool.NewGroup[int](ctx, b)
				g.Go(func(context.Context) (int, error) { return 1, nil }) // queued
				started, done := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(done)
					close(started)
					g.Go(func(context.Context) (int, error) { return 2, nil })
				}()
				<-started
				runtime.Gosched()
				vals, err := g.Wait()
				<-done
				return len(vals), err
			})
			if err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if n, err := outer.Result(); err != nil || n < 1 {
				t.Fatalf("iteration %d: the task = %d, %v; want it done", i, n, err) // the bubble's blocked goroutines fail the test too
			}
			b.Close(context.Background())
		})
		if t.Failed() {
			return
		}
	}
}

// A Go waiting at the group's limit returns once the group's context ends,
// though the group's tasks in the pool still run (review finding).
func TestGroupGoAtTheLimitReturnsWhenTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("limit", pool.Config{MaxWorkers: 2, QueueCapacity: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		g := pool.NewGroup[int](ctx, b)
		g.SetLimit(1)
		release := make(chan struct{})
		g.Go(func(context.Context) (int, error) { <-release; return 0, nil })
		ran := false
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			g.Go(func(context.Context) (int, error) { ran = true; return 1, nil })
		}()
		synctest.Wait()
		cancel()
		synctest.Wait()
		select {
		case <-returned:
		default:
			t.Error("a Go waiting at the limit did not return once the group's context ended")
		}
		close(release)
		<-returned
		if _, err := g.Wait(); err == nil || ran {
			t.Errorf("Wait: %v, second task ran %v; want the context's end as the error and no run", err, ran)
		}
	})
}

// The group's queued tasks leave the queue at once when the group's
// context ends, counted cancelled, though the group watches its context
// once, not once per queued task.
func TestGroupQueuedTasksLeaveWhenTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("ctx", pool.Config{MaxWorkers: 1, QueueCapacity: 4})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		g := pool.NewGroup[int](ctx, b)
		g.SetLimit(-1)
		release := make(chan struct{})
		g.Go(func(context.Context) (int, error) { <-release; return 0, nil })
		ran := 0
		for range 2 {
			g.Go(func(context.Context) (int, error) { ran++; return 1, nil })
		}
		if s := b.Stats(); s.QueueDepth != 2 {
			t.Fatalf("queue depth %d, want 2", s.QueueDepth)
		}
		cancel()
		synctest.Wait()
		if s := b.Stats(); s.QueueDepth != 0 || s.Cancelled != 2 {
			t.Errorf("after the context ended: queue depth %d, %d cancelled; want 0 and 2", s.QueueDepth, s.Cancelled)
		}
		close(release)
		if _, err := g.Wait(); err == nil || ran != 0 {
			t.Errorf("Wait: %v, %d queued tasks ran; want the context's end and none", err, ran)
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
