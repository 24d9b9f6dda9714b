package semaphore

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// checkFreeLocked reports a waiter kept for reuse that is not clean: a
// signal left in its channel would wake its next caller for nothing, and
// the caller would take the timer for its own. A line keeps at most its
// limit of them, max at most (a smaller limit keeps those kept already).
// b.mu must be held.
func checkFreeLocked(t *testing.T, b *Bulkhead, max int) {
	t.Helper()
	n := 0
	for w := b.free; w != nil; w = w.next {
		n++
		if len(w.ready) != 0 || w.handed || w.prev != nil || w.line != b.line {
			t.Errorf("kept waiter: %d signals left, handed %v, linked %v, line %d of %d",
				len(w.ready), w.handed, w.prev != nil, w.line, b.line)
		}
	}
	if n != b.nfree || n > max {
		t.Errorf("%d waiters kept, counted %d, most %d", n, b.nfree, max)
	}
}

// A line that calls join and leave every way at once (granted, timed out,
// cancelled by a context that ends, with and without a Done channel, while
// the limit changes) keeps only clean waiters for reuse, loses no permit
// and counts every call.
func TestLineReuseUnderChurn(t *testing.T) {
	b, err := New("churn", Config{MaxConcurrentCalls: 2, MaxWaitDuration: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const callers, calls = 16, 300
	var wg sync.WaitGroup
	var ran, full, ended, other atomic.Int64
	stop := make(chan struct{})
	var checks sync.WaitGroup
	checks.Go(func() { // looks at the kept waiters and changes the limit, while the line runs
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			b.mu.Lock()
			checkFreeLocked(t, b, 3)
			b.mu.Unlock()
			if i%50 == 0 {
				_ = b.Reconfigure(Config{MaxConcurrentCalls: 1 + i/50%3, MaxWaitDuration: time.Millisecond})
			}
			runtime.Gosched()
		}
	})
	for g := range callers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range calls {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				switch r.IntN(4) {
				case 1:
					ctx, cancel = context.WithTimeout(ctx, time.Duration(r.IntN(500))*time.Microsecond)
				case 2:
					ctx, cancel = context.WithCancel(ctx)
					if r.IntN(2) == 0 {
						go cancel()
					}
				}
				err := b.Do(ctx, func(context.Context) error {
					runtime.Gosched()
					return nil
				})
				cancel()
				switch {
				case err == nil:
					ran.Add(1)
				case errors.Is(err, bulkhead.ErrBulkheadFull):
					full.Add(1)
				case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
					ended.Add(1) // counted cancelled if it waited, not at all if ctx had ended before Do
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	checks.Wait()
	s := b.Stats()
	if other.Load() != 0 || s.InFlight != 0 || s.Waiting != 0 || s.Permitted != s.Finished ||
		s.Permitted != uint64(ran.Load()) || s.Rejected != uint64(full.Load()) || s.Cancelled > uint64(ended.Load()) {
		t.Fatalf("after the churn (%d ran, %d full, %d ended, %d other): %+v", ran.Load(), full.Load(), ended.Load(), other.Load(), s)
	}
	if b.free != nil || b.nfree != 0 {
		t.Fatalf("the line is over but %d waiters are kept", b.nfree)
	}
}
