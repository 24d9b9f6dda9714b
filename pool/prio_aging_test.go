package pool_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/pool"
)

// TestPoolPriorityAgingOnByReconfigure: a task queued before Reconfigure
// switches Aging on ages from the switch, not from when the pool was
// made: on a 10h-old pool, a Sheddable task held back by its class's
// ceiling (1 of 2 workers) stays queued right after Aging 1h is switched
// on, and starts one Aging later.
func TestPoolPriorityAgingOnByReconfigure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := pool.Config{MaxWorkers: 2, QueueCapacity: 4, Priorities: &bulkhead.Priorities{}} // Sheddable: 1 worker
		b, done := shedPool(t, cfg)
		defer done()
		time.Sleep(10 * time.Hour) // an old pool
		hold := make(chan struct{})
		defer close(hold)
		low := bulkhead.WithPriority(context.Background(), bulkhead.Sheddable)
		if _, err := pool.Submit(low, b, func(context.Context) (int, error) { <-hold; return 0, nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Submit(low, b, answer); err != nil { // queued: Sheddable's ceiling is 1 worker
			t.Fatal(err)
		}
		synctest.Wait()
		if s := b.Stats(); s.InFlight != 1 || s.QueueDepth != 1 {
			t.Fatalf("before: %+v", s)
		}
		cfg.Priorities = &bulkhead.Priorities{Aging: time.Hour}
		if err := b.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if s := b.Stats(); s.QueueDepth != 1 {
			t.Errorf("Aging 1h switched on: a Sheddable task queued 0s ago left the queue at once (aged by the pool's 10h): %+v", s)
		}
		time.Sleep(time.Hour) // one Aging since the switch: SheddablePlus, whose ceiling is 2 workers
		synctest.Wait()
		if s := b.Stats(); s.QueueDepth != 0 || s.InFlight != 1 || s.Finished != 1 {
			t.Errorf("one Aging after the switch the task has not started: %+v", s)
		}
	})
}

// TestPoolPriorityAgedTaskTakesIdleWorker: a queued Sheddable task held
// back by its class's worker ceiling (1 of 2) beside a free worker starts
// at the aging step that raises its class to SheddablePlus (ceiling 2),
// 1s after it was queued, without waiting for a task to finish or
// arrive; so a Critical newcomer after that finds it running, not queued.
func TestPoolPriorityAgedTaskTakesIdleWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, done := shedPool(t, pool.Config{MaxWorkers: 2, QueueCapacity: 4, Priorities: &bulkhead.Priorities{Aging: time.Second}})
		defer done()
		hold := make(chan struct{})
		defer close(hold)
		low := bulkhead.WithPriority(context.Background(), bulkhead.Sheddable)
		if _, err := pool.Submit(low, b, func(context.Context) (int, error) { <-hold; return 0, nil }); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var started time.Duration
		aged, err := pool.Submit(low, b, func(context.Context) (int, error) { started = time.Since(start); return 0, nil })
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if s := b.Stats(); s.InFlight != 1 || s.QueueDepth != 1 {
			t.Fatalf("before the first aging step: %+v, want 1 running, 1 queued", s)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		select {
		case <-aged.Done():
			if started < time.Second-time.Microsecond || started > time.Second+time.Microsecond {
				t.Errorf("the aged task started after %v, want 1s (its first aging step)", started)
			}
		default:
			t.Errorf("after 5 Agings the Sheddable task still waits beside a free worker: %+v", b.Stats())
		}
		c, err := pool.Submit(bulkhead.WithPriority(context.Background(), bulkhead.Critical), b, answer)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wait(t, c); err != nil {
			t.Fatal(err)
		}
	})
}

// TestPoolPriorityAgedWaiterTakesIdleSlot: a Sheddable submitter waiting
// for room (Go), held back by its class's queue ceiling (1 of 2 slots)
// beside a free slot, moves into the queue at its first aging step.
func TestPoolPriorityAgedWaiterTakesIdleSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 2, Priorities: &bulkhead.Priorities{Aging: time.Second}})
		defer done()
		release := hold(t, b)
		defer func() { release() }()
		low := bulkhead.WithPriority(context.Background(), bulkhead.Sheddable)
		if _, err := pool.Submit(low, b, answer); err != nil { // Sheddable's one queue slot
			t.Fatal(err)
		}
		w := goWait(b, low)
		if s := b.Stats(); w.returned() || s.Waiting != 1 || s.QueueDepth != 1 {
			t.Fatalf("before the first aging step: %+v, want 1 queued, 1 waiting", s)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if s := b.Stats(); !w.returned() || s.Waiting != 0 || s.QueueDepth != 2 {
			t.Errorf("after one Aging the waiter (SheddablePlus: 2 slots) still waits beside a free slot: %+v", s)
		}
	})
}
