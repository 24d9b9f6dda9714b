package bench

// The adaptive controller's cost on the guarded call: rows beside the plain
// semaphore Do in group 1 and the pool's Submit and Wait in group 3. (The
// comparison with failsafe-go's adaptive limiter on the simulation of
// examples/adaptive is cmd/adaptivechart.)

import (
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/adaptive"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// pinned returns a controller config that can never move the limit away
// from n, so that a row measures the controller's work on every call
// (aggregation, windows, the algorithm) and not a different limit.
func pinned(n int) adaptive.Config {
	return adaptive.Config{MinLimit: n, MaxLimit: n}
}

func attach(b *testing.B, inst bulkhead.Instance, n int) {
	c, err := adaptive.Attach(inst, pinned(n))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Detach)
}

func init() {
	guardCases = append(guardCases,
		// The bulkhead's own cost of events (one clock read per event),
		// which a controller needs.
		opCase{oursKind, "semaphore_Do_subscribed", func(b *testing.B) func() {
			s := newSemaphore(b, bigLimit)
			b.Cleanup(s.Subscribe(func(bulkhead.Event) {}))
			return semDo(s)
		}},
		opCase{oursKind, "semaphore_Do_adaptive", func(b *testing.B) func() {
			s := newSemaphore(b, bigLimit)
			attach(b, s, bigLimit)
			return semDo(s)
		}},
	)
	joinCases = append(joinCases,
		opCase{oursKind, "pool_Submit_Wait_adaptive", func(b *testing.B) func() {
			p := newPool(b, joinWorkers, 0)
			attach(b, p, joinWorkers)
			return func() {
				v, _ := poolJoin(p, answer)
				sink.Store(int64(v))
			}
		}},
	)
}

// TestAdaptiveCost prints what a controller costs a semaphore Do, measured
// the way separate benchmark runs cannot on a noisy machine: 300 rounds of
// 2,000 calls of each variant, interleaved in a random order in one process,
// reported as the median time per call. It only reports; it runs when
// BENCH_ADAPTIVE_COST is set:
//
//	BENCH_ADAPTIVE_COST=1 go test -run TestAdaptiveCost -v .
func TestAdaptiveCost(t *testing.T) {
	if os.Getenv("BENCH_ADAPTIVE_COST") == "" {
		t.Skip("set BENCH_ADAPTIVE_COST=1 to measure")
	}
	mk := func() *semaphore.Bulkhead {
		s, err := semaphore.New("cost", semaphore.Config{MaxConcurrentCalls: bigLimit})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	plain, subscribed, adapted := mk(), mk(), mk()
	defer subscribed.Subscribe(func(bulkhead.Event) {})()
	c, err := adaptive.Attach(adapted, pinned(bigLimit))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Detach()
	names := []string{"semaphore_Do", "semaphore_Do_subscribed", "semaphore_Do_adaptive"}
	ops := []func(){semDo(plain), semDo(subscribed), semDo(adapted)}
	const rounds, calls = 300, 2000
	for _, goroutines := range []int{1, 2} {
		per := make([][]time.Duration, len(ops))
		for range rounds {
			for _, i := range rand.Perm(len(ops)) {
				start := time.Now()
				var wg sync.WaitGroup
				for range goroutines {
					wg.Go(func() {
						for range calls {
							ops[i]()
						}
					})
				}
				wg.Wait()
				per[i] = append(per[i], time.Since(start)/time.Duration(calls*goroutines))
			}
		}
		for i, d := range per {
			slices.Sort(d)
			t.Logf("%d goroutine(s) %-24s median %v, p10 %v", goroutines, names[i], d[rounds/2], d[rounds/10])
		}
	}
}
