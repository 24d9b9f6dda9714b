package adaptive

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead/semaphore"
)

// fixedLimit is an Algorithm that always answers its limit.
type fixedLimit float64

func (f fixedLimit) Update(float64, Window) Decision {
	return Decision{Limit: float64(f), Reason: "fixed"}
}

// The owner sets its limit and then detaches while a decision has made up
// its mind and is on its way to set the limit (held here, in c.set): after
// Detach returned, the decision's 3 does not land over the owner's 7, and
// the owner's other fields stay.
func TestDetachAfterOwnerReconfigureWhileDeciding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := semaphore.New("dep", semaphore.Config{MaxConcurrentCalls: 10})
		c, err := Attach(b, Config{Custom: fixedLimit(3), MinSamples: 1, Window: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		atSet, proceed := make(chan struct{}), make(chan struct{})
		var once sync.Once
		set := c.set
		c.set = func(n int) error {
			once.Do(func() { close(atSet); <-proceed })
			return set(n)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 2 { // the first call starts the clock, the second closes a window
				_ = b.Do(context.Background(), func(context.Context) error { time.Sleep(time.Millisecond); return nil })
			}
		}()
		<-atSet
		if err := b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 7, MaxWaitDuration: time.Second}); err != nil {
			t.Fatal(err)
		}
		c.Detach()
		close(proceed)
		<-done
		if got := b.Config(); got != (semaphore.Config{MaxConcurrentCalls: 7, MaxWaitDuration: time.Second}) {
			t.Fatalf("config %+v after Detach returned, want the owner's 7 and 1s", got)
		}
		if s := c.State(); s.Changes != 0 || s.Limit != 10 {
			t.Fatalf("state %+v, want no change recorded", s)
		}
	})
}

// A call miscounted in flight (as a call that ends, or begins, between
// Attach's Stats and its subscription's first events would be) costs one
// window at most: the next window's close reads the bulkhead's exact
// count. Under one call at a time AIMD then holds the limit (4, never used
// by half), and the count ends at 0, neither above nor below.
func TestInFlightMiscountHealsAtTheNextWindow(t *testing.T) {
	for _, off := range []int64{+3, -3} {
		synctest.Test(t, func(t *testing.T) {
			b, _ := semaphore.New("dep", semaphore.Config{MaxConcurrentCalls: 5})
			c, err := Attach(b, Config{Algorithm: "aimd", InitialLimit: 4, MinSamples: 1, Window: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Detach()
			c.inFlight.Add(off)
			for range 200 {
				_ = b.Do(context.Background(), func(context.Context) error { time.Sleep(time.Millisecond); return nil })
			}
			if s := c.State(); s.Changes > 1 || s.Windows < 10 {
				t.Fatalf("miscount %+d: after 200 calls one at a time: %+v; want at most one change", off, s)
			}
			if n := c.inFlight.Load(); n != 0 {
				t.Fatalf("miscount %+d: %d calls counted in flight after all ended, want 0", off, n)
			}
		})
	}
}
