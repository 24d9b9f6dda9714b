package pool_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/pool"
)

// TestPoolPriorityAgingWaiters: a Sheddable submitter waiting for room
// (Go) under a stream of CriticalPlus ones waiting too ages as a queued
// task does: with Aging 1s it reaches CriticalPlus after 3s, is then the
// oldest waiter of that class, gets the next queue slot and, keeping its
// age in the queue, the next worker. Without Aging it waits until the
// stream ends.
func TestPoolPriorityAgingWaiters(t *testing.T) {
	for _, aging := range []time.Duration{0, time.Second} {
		synctest.Test(t, func(t *testing.T) {
			b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1, Priorities: &bulkhead.Priorities{Aging: aging}})
			defer done()
			step := func(context.Context) (int, error) { time.Sleep(100 * time.Millisecond); return 0, nil }
			top := bulkhead.WithPriority(context.Background(), bulkhead.CriticalPlus)
			for range 2 { // one running, one queued: the queue is full
				if _, err := pool.Submit(top, b, step); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			var started time.Duration
			var wg sync.WaitGroup
			wg.Go(func() {
				f, err := pool.Go(bulkhead.WithPriority(context.Background(), bulkhead.Sheddable), b,
					func(context.Context) (int, error) { started = time.Since(start); return 0, nil })
				if err != nil {
					t.Error(err)
					return
				}
				wait(t, f)
			})
			synctest.Wait()
			// a stream: a CriticalPlus submitter waits for room every 100ms for 10s
			for range 100 {
				wg.Go(func() {
					if _, err := pool.Go(top, b, step); err != nil {
						t.Error(err)
					}
				})
				time.Sleep(100 * time.Millisecond)
			}
			wg.Wait()
			if aging == 0 {
				if started < 10*time.Second {
					t.Fatalf("strict priority: the waiting Sheddable task started after %v, under a stream of CriticalPlus", started)
				}
				return
			}
			if started < 3*time.Second || started > 3*time.Second+200*time.Millisecond {
				t.Fatalf("aged waiting Sheddable task started after %v, want 3s to 3.2s", started)
			}
		})
	}
}

// TestPoolPriorityAgingWaitersNoQueue: with no queue, a Sheddable
// submitter waiting for a worker (Go) under a stream of CriticalPlus ones
// waiting too is started straight from the line once it has aged to
// CriticalPlus (three Agings), not after the stream ends.
func TestPoolPriorityAgingWaitersNoQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 0, Priorities: &bulkhead.Priorities{Aging: time.Second}})
		defer done()
		step := func(context.Context) (int, error) { time.Sleep(100 * time.Millisecond); return 0, nil }
		top := bulkhead.WithPriority(context.Background(), bulkhead.CriticalPlus)
		if _, err := pool.Submit(top, b, step); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		goTop := func() {
			wg.Go(func() {
				if _, err := pool.Go(top, b, step); err != nil {
					t.Error(err)
				}
			})
		}
		goTop() // a backlog of one CriticalPlus submitter at every release
		synctest.Wait()
		start := time.Now()
		var started time.Duration
		lowDone := make(chan struct{})
		wg.Go(func() {
			defer close(lowDone)
			f, err := pool.Go(bulkhead.WithPriority(context.Background(), bulkhead.Sheddable), b,
				func(context.Context) (int, error) { started = time.Since(start); return 0, nil })
			if err != nil {
				t.Error(err)
				return
			}
			wait(t, f)
		})
		synctest.Wait()
		for range 100 { // 10s of CriticalPlus submitters, one per task's run
			goTop()
			time.Sleep(100 * time.Millisecond)
		}
		select {
		case <-lowDone:
			if started < 3*time.Second || started > 3*time.Second+200*time.Millisecond {
				t.Errorf("aged waiting Sheddable task started after %v, want 3s to 3.2s", started)
			}
		default:
			t.Errorf("Aging 1s: a Sheddable Go submitter has not started after 10s of CriticalPlus submitters")
		}
		wg.Wait()
	})
}
