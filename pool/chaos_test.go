package pool_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// Submitters run tasks that return, panic, call runtime.Goexit or wait for
// their context, and cancel them (by their context or their future), while
// another goroutine keeps changing KeepAlive (so the ants pool is replaced
// again and again) and Close races all of it, first with a short deadline.
// Each round checks that no more than MaxWorkers tasks ever ran at once
// (counted inside the tasks), that every future completes, that every
// accepted task is accounted for once, and that no goroutine is left.
// Rounds have deterministic seeds; the interleaving is the scheduler's. The
// pacing sleeps only spread the events out; nothing is decided by them.
func TestChaosBoundCloseReconfigure(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	for it := range rounds {
		chaosRound(t, it)
		if t.Failed() {
			return
		}
	}
}

func chaosRound(t *testing.T, it int) {
	ignore := goleak.IgnoreCurrent()
	rng := rand.New(rand.NewPCG(uint64(it), 7))
	workers, queue := 1+rng.IntN(3), rng.IntN(4)
	var maxWait time.Duration
	if rng.IntN(2) == 0 {
		maxWait = time.Duration(50+rng.IntN(300)) * time.Microsecond
	}
	cfg := pool.Config{MaxWorkers: workers, QueueCapacity: queue, QueueTimeout: maxWait}
	b, err := pool.New("chaos", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var cur, peak atomic.Int32
	var accepted, immediate atomic.Uint64
	var mu sync.Mutex
	var fs []*future.Future[int]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // same limits, a new KeepAlive each time: a new ants pool
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
			c := cfg
			c.KeepAlive = time.Duration(1+i%3) * time.Second
			if err := b.Reconfigure(c); err != nil && err != bulkhead.ErrClosed {
				t.Error(err)
			}
		}
	}()
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(it), uint64(g)))
			for range 100 {
				ctx, cancel := context.WithCancel(context.Background())
				kind := r.IntN(5)
				f, err := pool.Submit(ctx, b, func(ctx context.Context) (int, error) {
					n := cur.Add(1)
					defer cur.Add(-1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					switch kind {
					case 0:
						panic("boom")
					case 1:
						runtime.Goexit()
					case 2:
						select {
						case <-ctx.Done():
						case <-time.After(200 * time.Microsecond):
						}
					}
					return 1, nil
				})
				switch {
				case err == nil:
					accepted.Add(1)
					mu.Lock()
					fs = append(fs, f)
					mu.Unlock()
					switch r.IntN(4) {
					case 0:
						cancel()
					case 1:
						f.Cancel()
					}
				case errors.Is(err, bulkhead.ErrBulkheadFull):
					immediate.Add(1)
				case err != bulkhead.ErrClosed:
					t.Errorf("Submit: %v", err)
				}
				if r.IntN(8) == 0 {
					runtime.Gosched()
				}
				defer cancel()
			}
		}()
	}
	time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // let some work in first
	short, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(500))*time.Microsecond)
	_ = b.Close(short) // may give up: queued tasks fail, running ones are cancelled
	cancel()
	if err := b.Close(guardCtx(t)); err != nil {
		t.Fatalf("round %d: Close: %v, stats %+v", it, err, b.Stats())
	}
	close(stop)
	wg.Wait()
	for _, f := range fs {
		if _, err := f.Wait(guardCtx(t)); errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("round %d: a future never completed", it)
		}
	}
	s := b.Stats()
	if s.InFlight != 0 || s.QueueDepth != 0 || s.Permitted != s.Finished {
		t.Fatalf("round %d: not at rest: %+v", it, s)
	}
	expired := s.Rejected - immediate.Load()
	if s.Permitted+s.Cancelled+expired != accepted.Load() {
		t.Fatalf("round %d: accepted %d != Permitted %d + Cancelled %d + expired %d", it, accepted.Load(), s.Permitted, s.Cancelled, expired)
	}
	if int(peak.Load()) > workers {
		t.Fatalf("round %d: %d tasks ran at once, MaxWorkers %d", it, peak.Load(), workers)
	}
	goleak.VerifyNone(t, ignore)
}
