package pool

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// A newcomer never passes a queued task that has aged to its class, even
// if the aging tick's callback is late: here the tick is stopped, as if
// its callback had not run yet, and a Critical newcomer arriving after the
// step finds the step due and starts the aged Sheddable task first.
func TestPoolPriorityNewcomerServesDueAgingStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := New("due", Config{MaxWorkers: 2, QueueCapacity: 4, Priorities: &bulkhead.Priorities{Aging: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		hold := make(chan struct{})
		defer func() {
			close(hold)
			if err := b.Close(context.Background()); err != nil {
				t.Error(err)
			}
		}()
		low := bulkhead.WithPriority(context.Background(), bulkhead.Sheddable)
		started := make(chan string, 3)
		task := func(name string) func(context.Context) (int, error) {
			return func(context.Context) (int, error) { started <- name; <-hold; return 0, nil }
		}
		if _, err := Submit(low, b, task("first")); err != nil {
			t.Fatal(err)
		}
		if _, err := Submit(low, b, task("aged")); err != nil { // queued: Sheddable's ceiling is 1 of 2 workers
			t.Fatal(err)
		}
		b.mu.Lock()
		armed := b.keys.prio.at != 0 && b.keys.prio.tick.Stop()
		b.mu.Unlock()
		if !armed {
			t.Fatal("no aging tick armed for the task held back beside a free worker")
		}
		time.Sleep(time.Second) // the step: SheddablePlus, ceiling 2; the tick is late
		synctest.Wait()
		if s := b.Stats(); s.InFlight != 1 || s.QueueDepth != 1 {
			t.Fatalf("before the newcomer: %+v", s)
		}
		if _, err := Submit(bulkhead.WithPriority(context.Background(), bulkhead.Critical), b, task("newcomer")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if first, second := <-started, <-started; first != "first" || second != "aged" {
			t.Errorf("started %q then %q, want the aged task on the free worker, ahead of the newcomer", first, second)
		}
		if s := b.Stats(); s.InFlight != 2 || s.QueueDepth != 1 {
			t.Errorf("after the newcomer: %+v, want 2 running, the newcomer queued", s)
		}
	})
}
