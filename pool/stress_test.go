package pool_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// ants counts a worker as busy for a moment after the task returns, and an
// idle worker as running. The bulkhead must not care: right after the last
// future of a round completes, a full round of MaxWorkers+QueueCapacity
// tasks must be accepted, every time.
func TestRefillAfterDrainNeverRejects(t *testing.T) {
	const workers, queue = 4, 4
	rounds := 5000
	if testing.Short() {
		rounds = 300
	}
	b := newPool(t, pool.Config{MaxWorkers: workers, QueueCapacity: queue})
	ctx := guardCtx(t)
	fn := func(context.Context) (int, error) { return 1, nil }
	fs := make([]*future.Future[int], workers+queue)
	for r := range rounds {
		for i := range fs {
			f, err := pool.Submit(ctx, b, fn)
			if err != nil {
				t.Fatalf("round %d, task %d: %v (stats %+v)", r, i, err, b.Stats())
			}
			fs[i] = f
		}
		if _, err := future.All(ctx, fs...); err != nil {
			t.Fatal(err)
		}
	}
	s := atRest(t, b)
	if s.Rejected != 0 || s.Permitted != uint64(rounds*(workers+queue)) {
		t.Fatalf("Stats %+v", s)
	}
}

// Many goroutines submit tasks that succeed, fail, panic, get cancelled in
// the queue or while running, or expire, while the limits change. Afterwards
// every accepted task is accounted for exactly once and the counts are back
// at rest.
func TestAccountingUnderChaos(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 3, QueueCapacity: 4, QueueTimeout: 2 * time.Millisecond})
	const goroutines, perG = 6, 1000
	var accepted, immediate atomic.Uint64
	var wg sync.WaitGroup
	stopReconf := make(chan struct{})
	reconfDone := make(chan struct{})
	go func() {
		defer close(reconfDone)
		cfgs := []pool.Config{
			{MaxWorkers: 1, QueueCapacity: 1, QueueTimeout: time.Millisecond},
			{MaxWorkers: 4, QueueCapacity: 8},
			{MaxWorkers: 2, QueueCapacity: 0},
			{MaxWorkers: 3, QueueCapacity: 4, QueueTimeout: 2 * time.Millisecond},
		}
		for i := 0; ; i++ {
			select {
			case <-stopReconf:
				return
			case <-time.After(200 * time.Microsecond):
			}
			if err := b.Reconfigure(cfgs[i%len(cfgs)]); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	boom := errors.New("boom")
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			var fs []*future.Future[int]
			var cancels []context.CancelFunc
			settled := 0
			for range perG {
				ctx, cancel := context.WithCancel(context.Background())
				cancels = append(cancels, cancel)
				kind := rng.IntN(6)
				f, err := pool.Submit(ctx, b, func(ctx context.Context) (int, error) {
					switch kind {
					case 0:
						return 0, boom
					case 1:
						panic(boom)
					case 2:
						select {
						case <-ctx.Done():
						case <-time.After(time.Millisecond):
						}
						return 0, ctx.Err()
					}
					return 1, nil
				})
				if err != nil {
					if !errors.Is(err, bulkhead.ErrBulkheadFull) {
						t.Errorf("Submit: %v", err)
					}
					immediate.Add(1)
					for _, f := range fs[settled:] { // let the pool make progress
						wait(t, f)
					}
					settled = len(fs)
					continue
				}
				accepted.Add(1)
				fs = append(fs, f)
				switch rng.IntN(4) {
				case 0:
					cancel()
				case 1:
					f.Cancel()
				}
			}
			for _, f := range fs {
				if _, err := wait(t, f); errors.Is(err, context.DeadlineExceeded) {
					t.Error("a future never completed")
				}
			}
			for _, c := range cancels {
				c()
			}
		}()
	}
	wg.Wait()
	close(stopReconf)
	<-reconfDone
	s := atRest(t, b)
	expired := s.Rejected - immediate.Load()
	if s.Permitted+s.Cancelled+expired != accepted.Load() {
		t.Fatalf("accepted %d != Permitted %d + Cancelled %d + expired %d", accepted.Load(), s.Permitted, s.Cancelled, expired)
	}
	t.Logf("accepted %d, immediate rejections %d, %+v", accepted.Load(), immediate.Load(), s)
}
