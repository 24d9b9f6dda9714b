package semaphore_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// runLine has callers goroutines make calls Do calls each on b, whose
// limit is below callers, so that most calls wait in line; fn yields, so
// that the line stays long even at GOMAXPROCS=1.
func runLine(t *testing.T, b *semaphore.Bulkhead, callers, calls int) {
	t.Helper()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range calls {
				if err := b.Do(context.Background(), func(context.Context) error {
					runtime.Gosched()
					return nil
				}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A long line reuses its waiters: the calls that wait in it allocate
// little (the first waiters of each line, a waiter handed the timer), where
// each would otherwise allocate a waiter and its channel. How many calls
// wait, and how often a line ends, depends on the scheduler (the race
// detector's ends lines more often), so the bound is per waiting call,
// counted from the events: fewer than one allocation each, where without
// reuse there are two.
func TestLineReusesWaiters(t *testing.T) {
	const callers, calls = 32, 100
	b := mustNew(t, 2, time.Hour)
	var waited atomic.Uint64
	b.Subscribe(func(e bulkhead.Event) {
		if e.Type == bulkhead.EventPermitted && e.Wait > 0 {
			waited.Add(1)
		}
	})
	runLine(t, b, callers, 10) // warm up
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w0 := waited.Load()
	runLine(t, b, callers, calls)
	runtime.ReadMemStats(&after)
	w := waited.Load() - w0
	s := b.Stats()
	if s.InFlight != 0 || s.Waiting != 0 || s.Finished != callers*(calls+10) {
		t.Fatalf("stats after the lines: %+v", s)
	}
	if w < callers*calls/2 {
		t.Fatalf("only %d of %d calls waited: the line was too short to tell", w, callers*calls)
	}
	if n := after.Mallocs - before.Mallocs; n >= w {
		t.Fatalf("%d allocations for %d calls that waited: waiters are not reused", n, w)
	} else {
		t.Logf("%d allocations for %d calls that waited (of %d)", n, w, callers*calls)
	}
}

// Waiters are reused only within their line: a bulkhead shared by several
// testing/synctest bubbles, whose lines wait inside one bubble, then inside
// another, then outside any, never hands a waiter (whose channel belongs
// to the bubble it was made in) to a caller of another bubble, which would
// panic or deadlock.
func TestLineReuseStaysInItsBubble(t *testing.T) {
	shared := mustNew(t, 1, time.Hour)
	line := func(t *testing.T) { runLine(t, shared, 4, 50) }
	t.Run("bubble1", func(t *testing.T) { synctest.Test(t, line) })
	t.Run("bubble2", func(t *testing.T) { synctest.Test(t, line) })
	t.Run("outside", line)
	t.Run("bubble3", func(t *testing.T) { synctest.Test(t, line) })
	if s := shared.Stats(); s.InFlight != 0 || s.Waiting != 0 || s.Finished != 4*4*50 {
		t.Fatalf("stats after the lines: %+v", s)
	}
}

// A waiter whose context cannot end waits on its own channel alone, unless
// it listens to the timer; when the waiters listening to it leave, such a
// waiter is handed the timer and still times out on time (without the
// hand-over it would wait forever: synctest reports the deadlock).
func TestWaitersWithoutDoneTimeOutAfterTheWatchersLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1, 50*time.Millisecond)
		if err := b.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		const n = 5
		errs := make([]chan error, n)
		var cancels []context.CancelFunc
		for i := range n {
			ctx := context.Background() // no Done channel
			if i < 2 {                  // the first two listen to the timer
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				cancels = append(cancels, cancel)
			}
			errs[i] = make(chan error, 1)
			go func() { errs[i] <- b.Do(ctx, func(context.Context) error { return nil }) }()
			synctest.Wait()
			time.Sleep(time.Millisecond)
		}
		for _, cancel := range cancels {
			cancel()
		}
		for i := range 2 {
			if err := <-errs[i]; err != context.Canceled {
				t.Fatalf("waiter %d: %v, want context.Canceled", i, err)
			}
		}
		start := time.Now() // 5ms after the first waiter began
		for i := 2; i < n; i++ {
			var fe *bulkhead.FullError
			if err := <-errs[i]; !errors.As(err, &fe) || !fe.Waited {
				t.Fatalf("waiter %d: %v, want a rejection after waiting", i, err)
			}
			if d, want := time.Since(start), time.Duration(50+i-n)*time.Millisecond; d != want {
				t.Fatalf("waiter %d rejected after %v, want %v", i, d, want)
			}
		}
		b.Release()
		if s := b.Stats(); s.InFlight != 0 || s.Waiting != 0 || s.Rejected != n-2 || s.Cancelled != 2 {
			t.Fatalf("stats: %+v", s)
		}
	})
}
