package adaptive_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/adaptive"
)

// recorder is a custom algorithm that keeps the windows it was given.
type recorder struct {
	bad atomic.Pointer[adaptive.Window]
}

func (r *recorder) Update(limit float64, w adaptive.Window) adaptive.Decision {
	if w.Successes > 0 && w.MeanRun != time.Millisecond {
		r.bad.CompareAndSwap(nil, &w)
	}
	return adaptive.Decision{Limit: limit, Reason: "hold"}
}

// Every success runs exactly 1ms, so every window's MeanRun must be 1ms.
// Found by a review: decide swapped the count and the summed run time one
// after the other, so a success between the two swaps had its run counted
// in one window and itself in the next (a mean of 2.7s, then of 0).
func TestMeanRunCountsTheSameCallsAsSuccesses(t *testing.T) {
	rec := &recorder{}
	c, err := adaptive.New(adaptive.Config{Custom: rec, MinSamples: 1, Window: time.Nanosecond}, 10,
		func(int) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now()
	var clock atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100000 {
				if rec.bad.Load() != nil {
					return
				}
				now := base.Add(time.Duration(clock.Add(int64(time.Hour))))
				c.Observe(bulkhead.Event{Type: bulkhead.EventPermitted, Time: now})
				c.Observe(bulkhead.Event{Type: bulkhead.EventFinished, Time: now, Run: time.Millisecond})
			}
		})
	}
	wg.Wait()
	if w := rec.bad.Load(); w != nil {
		t.Fatalf("window with %d successes of exactly 1ms each reports MeanRun %v", w.Successes, w.MeanRun)
	}
}
