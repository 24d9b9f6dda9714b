package pool_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/pool"
)

// The bulkhead, its ants pool and their timers live inside the bubble, so
// QueueTimeout runs on the bubble's fake clock.
func TestQueueTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 2, QueueTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var events []bulkhead.Event
		b.Subscribe(func(e bulkhead.Event) {
			if e.Type == bulkhead.EventRejected {
				events = append(events, e)
			}
		})
		release := make(chan struct{})
		running := mustSubmit(t, b, func(context.Context) (int, error) { <-release; return 0, nil })
		var ran atomic.Bool
		expired := mustSubmit(t, b, func(context.Context) (int, error) { ran.Store(true); return 1, nil })

		time.Sleep(time.Second - time.Nanosecond)
		synctest.Wait()
		select {
		case <-expired.Done():
			t.Fatal("dropped before QueueTimeout")
		default:
		}
		// A task queued later has its own deadline.
		later := mustSubmit(t, b, func(context.Context) (int, error) { return 2, nil })

		time.Sleep(time.Nanosecond)
		synctest.Wait()
		_, err = expired.Result()
		var fe *bulkhead.FullError
		if !errors.As(err, &fe) || !fe.Waited || fe.MaxWaitDuration != time.Second {
			t.Fatalf("expired task: %v", err)
		}
		if len(events) != 1 || events[0].Err != err || events[0].Wait != time.Second {
			t.Fatalf("rejected events %+v", events)
		}
		wantStats(t, b, bulkhead.Stats{MaxConcurrentCalls: 1, InFlight: 1, QueueDepth: 1, QueueCapacity: 2,
			Permitted: 1, Rejected: 1})

		close(release) // "later" starts before its own second is up
		if v, err := later.Wait(context.Background()); v != 2 || err != nil {
			t.Fatalf("later: %v, %v", v, err)
		}
		running.Wait(context.Background())
		if ran.Load() {
			t.Fatal("the expired task ran")
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		s := atRest(t, b)
		if s.Permitted != 2 || s.Rejected != 1 || s.Cancelled != 0 {
			t.Fatalf("Stats %+v", s)
		}
	})
}
