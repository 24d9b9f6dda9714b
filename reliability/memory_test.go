package reliability

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/internal/semtest"
	"github.com/bulkhead-go/bulkhead/pool"
)

// heapAfterGC returns the live heap after two collections.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// waitGoroutines waits until at most n goroutines exist.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	waitFor(t, "the goroutine count to return to its baseline", func() bool { return runtime.NumGoroutine() <= n })
}

// burst starts callers goroutines in waves of at most wave live ones, each
// released by one latch per wave, and waits for them all.
func burst(callers, wave int, call func()) {
	for done := 0; done < callers; {
		n := min(wave, callers-done)
		latch := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(n)
		for range n {
			go func() {
				defer wg.Done()
				<-latch
				call()
			}()
		}
		close(latch)
		wg.Wait()
		done += n
	}
}

// TestMemoryBurstSemaphore: 100,000 callers against a limit of 8 with no
// waiting leave the heap and the goroutine count at their baseline. The
// baseline is taken after an identical burst that does not touch the
// bulkhead, since the runtime keeps the descriptors of exited goroutines for
// reuse. Under -race the callers come in waves of 5,000 live goroutines (the
// race detector's limit is 8128); without it, all at once.
func TestMemoryBurstSemaphore(t *testing.T) {
	const callers = 100_000
	wave := callers
	if raceEnabled {
		wave = 5_000
	}
	b := newSem(t, 8, 0)
	goroutines := runtime.NumGoroutine()
	burst(callers, wave, func() {}) // warm up: the runtime's goroutine free list
	waitGoroutines(t, goroutines)
	base := heapAfterGC()

	var permitted, rejected uint64
	for done := 0; done < callers; {
		n := min(wave, callers-done)
		gate := make(chan struct{})
		latch := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		okN, fullN := 0, 0
		wg.Add(n)
		for range n {
			go func() {
				defer wg.Done()
				<-latch
				err := b.Do(context.Background(), func(context.Context) error {
					<-gate // hold the permit while the others arrive
					return nil
				})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					okN++
				case errors.Is(err, bulkhead.ErrBulkheadFull):
					fullN++
					if fullN == n-8 {
						close(gate) // every other caller was turned away
					}
				default:
					t.Errorf("Do = %v", err)
				}
			}()
		}
		close(latch)
		wg.Wait()
		if okN != 8 || fullN != n-8 {
			t.Fatalf("a wave of %d: %d admitted, %d rejected; want 8 and %d", n, okN, fullN, n-8)
		}
		permitted += uint64(okN)
		rejected += uint64(fullN)
		done += n
	}
	waitGoroutines(t, goroutines)
	after := heapAfterGC()
	semtest.AtRest(t, b, permitted, rejected, 0, 0)
	// A leak of even 8 bytes per call would show as 800 KB.
	const slack = 256 << 10
	if after > base+slack {
		t.Fatalf("heap %d bytes after the burst, %d before: grew by %d (slack %d)", after, base, after-base, slack)
	}
	t.Logf("%d callers (waves of %d): heap %d -> %d bytes, goroutines back to %d", callers, wave, base, after, runtime.NumGoroutine())
}

// TestMemoryPoolFullQueueIsBounded: a pool with a full queue holds memory in
// proportion to QueueCapacity, not to the number of submits it rejects.
func TestMemoryPoolFullQueueIsBounded(t *testing.T) {
	const capacity, rejectedSubmits = 1000, 100_000
	b, err := pool.New("mem", pool.Config{MaxWorkers: 2, QueueCapacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	gate := make(chan struct{})
	task := func(context.Context) error { <-gate; return nil }
	ctx := context.Background()

	base := heapAfterGC()
	var futures []interface {
		Wait(context.Context) (struct{}, error)
	}
	for range 2 + capacity {
		f, err := b.TryGo(ctx, task)
		if err != nil {
			t.Fatalf("filling the pool: %v", err)
		}
		futures = append(futures, f)
	}
	full := heapAfterGC()
	for range rejectedSubmits {
		if _, err := b.TryGo(ctx, task); !errors.Is(err, bulkhead.ErrBulkheadFull) {
			t.Fatalf("Go on a full pool = %v", err)
		}
	}
	afterRejects := heapAfterGC()
	s := b.Stats()
	if s.QueueDepth != capacity || s.InFlight != 2 || s.Rejected != rejectedSubmits {
		t.Fatalf("stats %+v", s)
	}
	perQueued := float64(full-base) / float64(capacity+2)
	t.Logf("queue of %d: %d bytes (%.0f per task); after %d rejected submits: %+d bytes",
		capacity, full-base, perQueued, rejectedSubmits, int64(afterRejects)-int64(full))
	if afterRejects > full+64<<10 {
		t.Fatalf("the heap grew by %d bytes over %d rejected submits", afterRejects-full, rejectedSubmits)
	}
	if perQueued > 2048 {
		t.Fatalf("%.0f bytes per queued task, want a small constant", perQueued)
	}
	close(gate)
	for _, f := range futures {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
