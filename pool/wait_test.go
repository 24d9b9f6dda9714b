package pool_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
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

// Queued tasks share one timer. After Reconfigure changes QueueTimeout,
// each task keeps the deadline it was queued with, even where the new
// deadlines come before the old ones: each is dropped at its own time.
func TestQueueTimeoutReconfigured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := pool.Config{MaxWorkers: 1, QueueCapacity: 10, QueueTimeout: 10 * time.Second}
		b, err := pool.New("test", cfg)
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		running := mustSubmit(t, b, func(context.Context) (int, error) { <-release; return 0, nil })
		task := func(context.Context) (int, error) { return 1, nil }
		long1 := mustSubmit(t, b, task) // deadline 10s
		long2 := mustSubmit(t, b, task) // deadline 10s
		cfg.QueueTimeout = time.Second
		if err := b.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		short := mustSubmit(t, b, task) // deadline 1s, behind two later deadlines
		cfg.QueueTimeout = 0
		if err := b.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		never := mustSubmit(t, b, task) // no deadline
		cfg.QueueTimeout = 5 * time.Second
		if err := b.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		mid := mustSubmit(t, b, task) // deadline 5s

		start := time.Now()
		droppedAt(t, "short", short, time.Second)
		droppedAt(t, "mid", mid, 5*time.Second-time.Since(start))
		if _, err := long1.Result(); err != future.ErrNotDone {
			t.Fatalf("long1: %v", err)
		}
		time.Sleep(10*time.Second - time.Since(start))
		synctest.Wait()
		for i, f := range []*future.Future[int]{long1, long2} {
			if _, err := f.Result(); !errors.Is(err, bulkhead.ErrBulkheadFull) {
				t.Fatalf("long%d: %v", i+1, err)
			}
		}
		wantStats(t, b, bulkhead.Stats{MaxConcurrentCalls: 1, InFlight: 1, QueueDepth: 1, QueueCapacity: 10,
			Permitted: 1, Rejected: 4})
		time.Sleep(time.Hour)
		close(release)
		if v, err := never.Wait(context.Background()); v != 1 || err != nil {
			t.Fatalf("never: %v, %v", v, err)
		}
		running.Wait(context.Background())
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// droppedAt lets the bubble's clock run to just before d from now and
// checks that f is still pending, then to d and checks that QueueTimeout
// dropped it. name names f in a failure.
func droppedAt(t *testing.T, name string, f *future.Future[int], d time.Duration) {
	t.Helper()
	time.Sleep(d - time.Nanosecond)
	synctest.Wait()
	if _, err := f.Result(); err != future.ErrNotDone {
		t.Fatalf("%s completed before its deadline: %v", name, err)
	}
	time.Sleep(time.Nanosecond)
	synctest.Wait()
	if _, err := f.Result(); !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("%s not dropped at its deadline: %v", name, err)
	}
}

// A SubmitWait caller's task that moves into the queue when the queue's
// timer drops the task ahead of it gets a deadline of its own, and the
// timer is armed for it.
func TestQueueTimeoutRefilled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 1, QueueTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		running := mustSubmit(t, b, func(context.Context) (int, error) { <-release; return 0, nil })
		task := func(context.Context) (int, error) { return 1, nil }
		first := mustSubmit(t, b, task)
		waited := make(chan *future.Future[int])
		go func() {
			f, err := pool.Go(context.Background(), b, task)
			if err != nil {
				t.Error(err)
			}
			waited <- f
		}()
		synctest.Wait()
		time.Sleep(time.Second)
		synctest.Wait()
		if _, err := first.Result(); !errors.Is(err, bulkhead.ErrBulkheadFull) {
			t.Fatalf("first: %v", err)
		}
		droppedAt(t, "second", <-waited, time.Second)
		close(release)
		running.Wait(context.Background())
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCloseWaitsForCallbacksOfDroppedTasks: a task dropped from the queue by
// its QueueTimeout or by its submitter's context ending has its future's
// callbacks run on a goroutine of the bulkhead's (the queue's timer, the
// shared watch of that context); Close waits for them as it waits for the
// workers' callbacks.
func TestCloseWaitsForCallbacksOfDroppedTasks(t *testing.T) {
	for _, how := range []string{"QueueTimeout", "context"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, err := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 1, QueueTimeout: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				release := make(chan struct{})
				running := mustSubmit(t, b, func(context.Context) (int, error) { <-release; return 0, nil })
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				dropped, err := pool.Submit(ctx, b, func(context.Context) (int, error) { return 1, nil })
				if err != nil {
					t.Fatal(err)
				}
				inCallback, latch := make(chan struct{}), make(chan struct{})
				dropped.OnComplete(func(int, error) { close(inCallback); <-latch })
				if how == "QueueTimeout" {
					time.Sleep(time.Second)
				} else {
					cancel()
				}
				<-inCallback // the drop's callback runs, and waits for latch
				close(release)
				if _, err := running.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
				closed := make(chan error, 1)
				go func() { closed <- b.Close(context.Background()) }()
				synctest.Wait()
				select {
				case err := <-closed:
					t.Fatalf("Close returned %v while a dropped task's callback still ran", err)
				default:
				}
				close(latch)
				if err := <-closed; err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// TestEventTimesInABubble: a queued task's permitted event reports its whole
// wait in the queue and its finished event its run time, exactly, and both
// are stamped with the bubble's time (the clock is read once per event).
func TestEventTimesInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(context.Background())
		var mu sync.Mutex
		var events []bulkhead.Event
		b.Subscribe(func(e bulkhead.Event) { mu.Lock(); events = append(events, e); mu.Unlock() })
		release := make(chan struct{})
		mustSubmit(t, b, func(context.Context) (int, error) { <-release; return 0, nil })
		queuedAt := time.Now()
		queued := mustSubmit(t, b, func(context.Context) (int, error) { time.Sleep(2 * time.Second); return 1, nil })
		time.Sleep(3 * time.Second)
		close(release)
		if _, err := queued.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(events) != 4 {
			t.Fatalf("got %d events, want 4: %v", len(events), events)
		}
		// The queued task's events are the last of their types: the first
		// task's Finished and the queued task's Permitted come from two
		// workers at the same instant, in either order.
		var p, f bulkhead.Event
		for _, e := range events {
			switch e.Type {
			case bulkhead.EventPermitted:
				p = e
			case bulkhead.EventFinished:
				f = e
			}
		}
		if p.Type != bulkhead.EventPermitted || p.Wait != 3*time.Second || !p.Time.Equal(queuedAt.Add(3*time.Second)) {
			t.Errorf("permitted event of the queued task: %v (Wait %v, Time %v), want a 3s wait at %v", p.Type, p.Wait, p.Time, queuedAt.Add(3*time.Second))
		}
		if f.Type != bulkhead.EventFinished || f.Run != 2*time.Second || !f.Time.Equal(queuedAt.Add(5*time.Second)) {
			t.Errorf("finished event of the queued task: %v (Run %v, Time %v), want a 2s run at %v", f.Type, f.Run, f.Time, queuedAt.Add(5*time.Second))
		}
	})
}
