package bulkheadtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead/bulkheadtest"
	"github.com/bulkhead-go/bulkhead/pool"
)

func newPool(t *testing.T, cfg pool.Config) *pool.Bulkhead {
	t.Helper()
	p, err := pool.New("emails", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

// poolBurst calls through p: a task that passes the gate, waited for.
func poolBurst(p *pool.Bulkhead, gate *bulkheadtest.Gate, workers, limit int) bulkheadtest.Burst {
	return bulkheadtest.Burst{Name: "emails", Workers: workers, Limit: limit, Gate: gate, Bulkhead: p,
		Call: func(ctx context.Context) error {
			f, err := p.TryGo(ctx, gate.Wait)
			if err != nil {
				return err
			}
			_, err = f.Wait(ctx)
			return err
		}}
}

// A hand-off pool (no queue) is proved like a semaphore.
func TestPoolWithoutQueueIsProved(t *testing.T) {
	p := newPool(t, pool.Config{MaxWorkers: 2})
	var gate bulkheadtest.Gate
	bulkheadtest.AssertIsolated(t, poolBurst(p, &gate, 6, 2))
}

// A pool with a queue is refused at once, with a message that says why,
// when the burst names its bulkhead.
func TestPoolWithQueueIsRefusedAtOnce(t *testing.T) {
	p := newPool(t, pool.Config{MaxWorkers: 2, QueueCapacity: 2})
	var gate bulkheadtest.Gate
	_, err := bulkheadtest.Run(guardCtx(t), poolBurst(p, &gate, 6, 2))
	if err == nil || !strings.Contains(err.Error(), "has a queue (QueueCapacity 2): queued tasks never reach the Gate") {
		t.Fatalf("Run = %v, want the queue explained", err)
	}
}

// Without the Bulkhead field, a pool with a queue stalls the run; the
// caller's limit ends it, and the message names the likely cause.
func TestPoolWithQueueStallsWithinTheCallersLimit(t *testing.T) {
	p := newPool(t, pool.Config{MaxWorkers: 2, QueueCapacity: 2})
	var gate bulkheadtest.Gate
	burst := poolBurst(p, &gate, 6, 2)
	burst.Bulkhead = nil
	rec := &recorder{TB: t}
	start := time.Now()
	bulkheadtest.AssertIsolatedWithin(rec, 200*time.Millisecond, burst)
	if d := time.Since(start); d > guard/2 {
		t.Fatalf("AssertIsolatedWithin took %v", d) // only a guard against the old one-minute wait
	}
	if len(rec.fatals) != 1 || !strings.Contains(rec.fatals[0], "in a pool's queue") {
		t.Fatalf("fatals %q, want the queue named as a likely cause", rec.fatals)
	}
}
