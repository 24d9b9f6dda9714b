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
// on.
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
	})
}
