package semaphore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every Stats snapshot is consistent in itself while other goroutines call
// Stats too: Permitted >= Finished, and Permitted - Finished - InFlight is
// within what the limit allows (issue 11, point 5: a snapshot once showed
// Permitted - Finished a million above a limit of 4).
func TestStatsSnapshotsConsistentUnderConcurrentReaders(t *testing.T) {
	const limit = 4
	b := mustNew(t, limit, 0)
	stop := make(chan struct{})
	var callers, readers sync.WaitGroup
	var calls atomic.Uint64
	for range 3 {
		callers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				b.Do(context.Background(), func(context.Context) error { return nil })
				calls.Add(1)
			}
		})
	}
	// Readers run until preemption has stopped some of them in the middle
	// of a snapshot while the others went on: a second of 10ms time slices
	// (the code before the fix failed this four times in five).
	var bad atomic.Value
	deadline := time.Now().Add(time.Second)
	for range 6 {
		readers.Go(func() {
			for i := 0; bad.Load() == nil; i++ {
				s := b.Stats()
				d := int64(s.Permitted) - int64(s.Finished) - int64(s.InFlight)
				if s.Permitted < s.Finished || d > limit || d < -limit {
					bad.Store(s)
				}
				if i%256 == 0 && time.Now().After(deadline) {
					return
				}
			}
		})
	}
	readers.Wait()
	close(stop)
	callers.Wait()
	if s := bad.Load(); s != nil {
		t.Fatalf("inconsistent snapshot: %+v", s)
	}
	s := b.Stats()
	if s.Permitted != calls.Load() || s.Finished != s.Permitted {
		t.Fatalf("at rest after %d calls: %+v", calls.Load(), s)
	}
}
