package bench

// The adaptive controller's cost on the guarded call: rows beside the plain
// semaphore Do in group 1 and the pool's Submit and Wait in group 3. (The
// comparison with failsafe-go's adaptive limiter on the simulation of
// examples/adaptive is cmd/adaptivechart.)

import (
	"testing"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/adaptive"
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
