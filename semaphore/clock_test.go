package semaphore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// Events are stamped from the monotonic clock and an anchor (see
// Event.Time). Outside a testing/synctest bubble their times lie between
// time.Now calls around the call; inside one they are the bubble's
// time.Now exactly, and so are their Wait and Run; and the bubble's fake
// times do not leak into the events of calls outside it afterwards.
func TestEventTimesInAndOutOfBubbles(t *testing.T) {
	outside := func(t *testing.T) {
		b := mustNew(t, 1, time.Hour)
		var events []bulkhead.Event
		b.Subscribe(func(e bulkhead.Event) { events = append(events, e) })
		before := time.Now()
		if err := b.Do(context.Background(), func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		if len(events) != 2 {
			t.Fatalf("events %v, want permitted and finished", events)
		}
		for _, e := range events {
			if e.Time.Before(before) || e.Time.After(after) {
				t.Fatalf("%v at %v: not between %v and %v", e, e.Time, before, after)
			}
			if w := e.Time.Round(0); w.Before(before.Round(0).Add(-time.Millisecond)) || w.After(after.Round(0).Add(time.Millisecond)) {
				t.Fatalf("%v: wall time %v not between %v and %v", e, w, before, after)
			}
		}
		if r := events[1].Run; r != events[1].Time.Sub(events[0].Time) || r > after.Sub(before) {
			t.Fatalf("Run = %v, want the time between the events, at most %v", r, after.Sub(before))
		}
	}
	t.Run("before", outside)
	t.Run("bubble", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := mustNew(t, 1, time.Hour)
			var mu sync.Mutex
			var events []bulkhead.Event
			b.Subscribe(func(e bulkhead.Event) {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			})
			t0 := time.Now()
			// want checks the n-th event of type typ (counting from 0).
			want := func(n int, typ bulkhead.EventType, at time.Time, wait, run time.Duration) {
				t.Helper()
				mu.Lock()
				defer mu.Unlock()
				for _, e := range events {
					if e.Type != typ {
						continue
					}
					if n--; n >= 0 {
						continue
					}
					if e.Time != at || e.Wait != wait || e.Run != run {
						t.Fatalf("%v at %v wait %v run %v; want at %v wait %v run %v", typ, e.Time, e.Wait, e.Run, at, wait, run)
					}
					return
				}
				t.Fatalf("%v missing from %v", typ, events)
			}
			// A call that runs 3s.
			b.Do(context.Background(), func(context.Context) error { time.Sleep(3 * time.Second); return nil })
			want(0, bulkhead.EventPermitted, t0, 0, 0)
			want(0, bulkhead.EventFinished, t0.Add(3*time.Second), 0, 3*time.Second)
			// A caller that waits 2s for the permit, one that waits an hour
			// in vain, and a Permit held 1.5s.
			if err := b.Acquire(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := make(chan semaphore.Permit, 1)
			go func() {
				p, err := b.AcquirePermit(context.Background())
				if err != nil {
					panic(err)
				}
				got <- p
			}()
			synctest.Wait()
			time.Sleep(2 * time.Second)
			b.Release()
			p := <-got
			time.Sleep(1500 * time.Millisecond)
			var fe *bulkhead.FullError
			if err := b.Acquire(context.Background()); !errors.As(err, &fe) || !fe.Waited {
				t.Fatalf("Acquire = %v, want a rejection after waiting", err)
			}
			p.Release(nil)
			t1 := t0.Add(3 * time.Second)
			want(1, bulkhead.EventPermitted, t1, 0, 0)
			want(1, bulkhead.EventFinished, t1.Add(2*time.Second), 0, 0)
			want(2, bulkhead.EventPermitted, t1.Add(2*time.Second), 2*time.Second, 0)
			want(0, bulkhead.EventRejected, t1.Add(3500*time.Millisecond+time.Hour), time.Hour, 0)
			want(2, bulkhead.EventFinished, t1.Add(3500*time.Millisecond+time.Hour), 0, time.Hour+1500*time.Millisecond)
			b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 2, MaxWaitDuration: time.Hour})
			want(0, bulkhead.EventLimitChanged, time.Now(), 0, 0)
		})
	})
	t.Run("after", outside)
}
