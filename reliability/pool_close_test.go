//go:build unix

package reliability

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead/pool"
)

// cpuTime is the CPU time this process has used, user and system.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// idlePools returns n pools, each with an idle ants worker left by one task.
func idlePools(t *testing.T, n int) []*pool.Bulkhead {
	t.Helper()
	ps := make([]*pool.Bulkhead, n)
	for i := range ps {
		p, err := pool.New("idle", pool.Config{MaxWorkers: 4, QueueCapacity: 4, KeepAlive: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		f, err := p.TryGo(context.Background(), func(context.Context) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	return ps
}

// Closing idle pools, or changing their KeepAlive (which replaces their ants
// pools), costs CPU time in proportion to their number and never spins:
// ants' ReleaseContext busy-waits for its goroutines, which made closing
// 100 idle pools take seconds of CPU. Measured as the process's CPU time,
// not wall time; the bound is loose (a few milliseconds per pool, under the
// race detector) and far below what spinning costs.
func TestClosingIdlePoolsDoesNotSpin(t *testing.T) {
	const n = 100
	const perPool = time.Millisecond
	for _, op := range []string{"Close", "Reconfigure KeepAlive"} {
		t.Run(op, func(t *testing.T) {
			ps := idlePools(t, n)
			before := cpuTime(t)
			var wg sync.WaitGroup
			for _, p := range ps {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if op == "Close" {
						if err := p.Close(context.Background()); err != nil {
							t.Error(err)
						}
						return
					}
					if err := p.Reconfigure(pool.Config{MaxWorkers: 4, QueueCapacity: 4, KeepAlive: 2 * time.Minute}); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			// Then close them all, which waits for whatever the operation
			// left running (the replaced ants pools' release).
			for _, p := range ps {
				if err := p.Close(context.Background()); err != nil {
					t.Error(err)
				}
			}
			used := cpuTime(t) - before
			t.Logf("%s of %d idle pools, then Close: %v of CPU (%v per pool)", op, n, used, used/n)
			if used > n*perPool {
				t.Errorf("%s of %d idle pools used %v of CPU, want under %v", op, n, used, n*perPool)
			}
		})
	}
}
