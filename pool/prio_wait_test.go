package pool_test

import (
	"context"
	"sync"
	"sync/atomic"
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

// TestPoolPriorityMaxWaitingCalls: with Priorities, a full line of
// submitters waiting for room (MaxWaitingCalls) refuses its newest waiter
// of the lowest class below the newcomer's, with ReasonDisplaced if
// Displace is on and ReasonWaiters otherwise, and the newcomer waits; a
// newcomer with nobody lower waiting is refused at once. The classes
// compared are the aged ones: a Sheddable waiter aged to Critical is not
// refused for a Critical newcomer.
func TestPoolPriorityMaxWaitingCalls(t *testing.T) {
	for _, displace := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			cfg := pool.Config{MaxWorkers: 1, QueueCapacity: 1, MaxWaitingCalls: 1, Priorities: &bulkhead.Priorities{Aging: time.Second}, Displace: displace}
			b, done := shedPool(t, cfg)
			defer done()
			release := sync.OnceFunc(hold(t, b))
			defer func() { release() }() // before done, if the test fails
			ctx := func(p bulkhead.Priority) context.Context { return bulkhead.WithPriority(context.Background(), p) }
			if _, err := pool.Submit(ctx(bulkhead.CriticalPlus), b, answer); err != nil { // the queue is full
				t.Fatal(err)
			}
			var events atomic.Int32
			defer b.Subscribe(func(e bulkhead.Event) {
				if e.Type == bulkhead.EventRejected {
					events.Add(1)
				}
			})()
			low := goWait(b, ctx(bulkhead.Sheddable))
			synctest.Wait()
			top := goWait(b, ctx(bulkhead.CriticalPlus))
			synctest.Wait()
			if top.returned() {
				t.Fatalf("CriticalPlus Go refused while only a Sheddable submitter waits: %v", top.err)
			}
			if !low.returned() {
				t.Fatalf("the Sheddable waiter still waits, the line of 1 holding 2: %+v", b.Stats())
			}
			want := bulkhead.ReasonWaiters
			if displace {
				want = bulkhead.ReasonDisplaced
			}
			wantFull(t, "the Sheddable waiter", low.err, want, true)
			if s := b.Stats(); s.Waiting != 1 || s.RejectedBy[want] != 1 || events.Load() != 1 {
				t.Fatalf("stats %+v, %d rejected events; want 1 waiting, 1 refused for %v, 1 event", s, events.Load(), want)
			}
			if _, err := pool.Go(ctx(bulkhead.CriticalPlus), b, answer); err == nil {
				t.Fatal("a CriticalPlus newcomer with nobody lower waiting was let in")
			} else {
				wantFull(t, "CriticalPlus with nobody lower waiting", err, bulkhead.ReasonWaiters, false)
			}
			release() // the line empties: the queued task starts, top moves into the queue
			if !top.returned() || top.err != nil {
				t.Fatalf("the CriticalPlus waiter: returned %v, %v", top.returned(), top.err)
			}
			// aging: a Sheddable waiter aged to Critical stays for a Critical newcomer
			release = sync.OnceFunc(hold(t, b))
			if _, err := pool.Submit(ctx(bulkhead.CriticalPlus), b, answer); err != nil { // the queue is full again
				t.Fatal(err)
			}
			aged := goWait(b, ctx(bulkhead.Sheddable))
			time.Sleep(2 * time.Second) // two Agings: Critical
			synctest.Wait()
			if mid := goWait(b, ctx(bulkhead.Critical)); !mid.returned() {
				t.Error("a Critical newcomer was let in: it refused a waiter aged to Critical")
				defer func() { release(); <-mid.done }()
			} else {
				wantFull(t, "Critical newcomer beside a waiter aged to Critical", mid.err, bulkhead.ReasonWaiters, false)
			}
			if aged.returned() {
				t.Fatalf("the aged waiter was refused: %v", aged.err)
			}
			release()
			if !aged.returned() || aged.err != nil {
				t.Fatalf("the aged waiter: returned %v, %v", aged.returned(), aged.err)
			}
		})
	}
}
