package pool_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// Wait(ctx) on a Then stage of a pool task, with the context that task
// was submitted with, parks on the *source task's* context (node.Signal via
// chainSource). Cancelling the Then stage completes it at once ("a Then
// future fails at once, its source running on"), but the Wait does not
// return: it stays blocked until the source task ends or ctx ends.
func TestWaitOnACancelledThenStageOfATaskWithItsContextReturns(t *testing.T) {
	for _, queued := range []bool{false, true} {
		name := "source running"
		if queued {
			name = "source queued"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, err := pool.New("reviewE3", pool.Config{MaxWorkers: 1, QueueCapacity: 2})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close(context.Background())
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				release := make(chan struct{})
				blocker, err := pool.Submit(ctx, b, func(context.Context) (int, error) { <-release; return 0, nil })
				if err != nil {
					t.Fatal(err)
				}
				src := blocker
				if queued {
					if src, err = pool.Submit(ctx, b, func(context.Context) (int, error) { return 1, nil }); err != nil {
						t.Fatal(err)
					}
				}
				g := future.Then(src, func(v int) (int, error) { return v + 1, nil })
				type result struct {
					v   int
					err error
				}
				got := make(chan result, 1)
				go func() {
					v, err := g.Wait(ctx)
					got <- result{v, err}
				}()
				synctest.Wait() // the Wait is parked
				g.Cancel()      // g fails at once; src runs on
				if _, err := g.Result(); !errors.Is(err, context.Canceled) {
					t.Fatalf("g.Result after Cancel = %v", err)
				}
				synctest.Wait()
				select {
				case r := <-got:
					if !errors.Is(r.err, context.Canceled) {
						t.Fatalf("Wait = %v, %v; want context.Canceled", r.v, r.err)
					}
				default:
					t.Error("Wait on a completed (cancelled) Then stage still blocks: it waits for the source task")
					close(release)
					<-got
					return
				}
				close(release)
			})
		})
	}
}
