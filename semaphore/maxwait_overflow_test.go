package semaphore_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// A MaxWaitDuration of math.MaxInt64 ("wait as long as it takes") gives a
// waiter the latest deadline there is, not one that overflowed into the
// past: the line's timer, armed for the earliest deadline, is then still
// re-armed for a later waiter's bounded wait (after Reconfigure shortened
// MaxWaitDuration, or by MinDeadlineSlack), which ends on time, and the
// unbounded waiter keeps waiting.
func TestUnboundedMaxWaitDurationLeavesLaterWaitsTimed(t *testing.T) {
	for _, how := range []string{"Reconfigure", "MinDeadlineSlack"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// A bubble's clock starts in 2000, before the package's epoch
				// (read at init, outside the bubble), so now() starts
				// negative there, which would hide the overflow. Outside a
				// bubble now() is positive: move the bubble's clock past
				// the epoch first.
				time.Sleep(time.Until(time.Now().AddDate(30, 0, 0)))
				cfg := semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Duration(math.MaxInt64)}
				if how == "MinDeadlineSlack" {
					cfg.MinDeadlineSlack = time.Millisecond
				}
				b, err := semaphore.New("forever", cfg)
				if err != nil {
					t.Fatal(err)
				}
				if !b.TryAcquire() {
					t.Fatal("TryAcquire")
				}
				resA := make(chan error, 1)
				go func() { resA <- b.Acquire(context.Background()) }() // waits "forever"
				synctest.Wait()
				ctx := context.Background()
				if how == "Reconfigure" {
					cfg.MaxWaitDuration = time.Second
					if err := b.Reconfigure(cfg); err != nil {
						t.Fatal(err)
					}
				} else {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Second)
					defer cancel()
				}
				resB := make(chan error, 1)
				go func() { resB <- b.Acquire(ctx) }() // a bounded wait: ~1 s
				synctest.Wait()
				if how == "Reconfigure" {
					time.Sleep(time.Second + time.Millisecond) // B's MaxWaitDuration has passed
				} else {
					time.Sleep(time.Second - 500*time.Microsecond) // B's deadline less the slack has passed, not its deadline
				}
				synctest.Wait()
				var fe *bulkhead.FullError
				select {
				case err := <-resB:
					if !errors.As(err, &fe) {
						t.Errorf("B: %v, want a FullError (timeout or deadline)", err)
					}
				default:
					t.Errorf("B still waits after its bound (Stats %+v)", b.Stats())
				}
				select {
				case err := <-resA:
					t.Errorf("A (MaxWaitDuration MaxInt64) returned %v", err)
				default:
				}
				b.Release() // let A (and B, if it still waits) through
				for range 2 {
					select {
					case err := <-resA:
						if err == nil {
							b.Release()
						}
					case err := <-resB:
						if err == nil {
							b.Release()
						}
					}
					synctest.Wait()
					if b.Stats().Waiting == 0 && b.Stats().InFlight == 0 {
						break
					}
				}
			})
		})
	}
}
