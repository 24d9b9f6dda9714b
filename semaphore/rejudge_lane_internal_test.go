package semaphore

import (
	"context"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// A call that finds the settings replaced after it took a permit is
// re-judged by the new settings, its priority lane too. Found by a review:
// it kept the lane of the old settings, so with a Shadow only before and
// Priorities after, a Sheddable call was judged by Critical's ceiling and
// admitted above Sheddable's after Reconfigure had returned.
func TestRejudgedCallTakesItsLaneFromTheNewSettings(t *testing.T) {
	old := Config{MaxConcurrentCalls: 2, Shadow: &Shadow{MaxConcurrentCalls: 1}}
	prio := Config{MaxConcurrentCalls: 2, Priorities: &bulkhead.Priorities{Sheddable: 0.5}} // Sheddable's ceiling: 1
	b, err := New("j2", old)
	if err != nil {
		t.Fatal(err)
	}
	if !b.TryAcquire() { // one call holds a permit
		t.Fatal("TryAcquire")
	}
	ctx := bulkhead.WithPriority(context.Background(), bulkhead.Sheddable)
	st := b.set.Load() // doShadowed's load, before Reconfigure
	if err := b.Reconfigure(prio); err != nil {
		t.Fatal(err)
	}
	// The same call made after Reconfigure is refused:
	if err := b.Do(ctx, func(context.Context) error { return nil }); err == nil {
		t.Fatal("a Sheddable call was admitted under Sheddable's ceiling 1 with 1 held")
	}
	// The call that read the settings before it (preempted between
	// doShadowed's b.set.Load and acquireClass's re-check):
	_, _, err = b.acquireClass(ctx, st)
	if err == nil {
		in := b.Stats().InFlight
		b.finish(time.Time{}, nil, false)
		t.Fatalf("a Sheddable call that read the settings before Reconfigure was admitted after it returned: %d in flight, Sheddable's ceiling %d",
			in, b.set.Load().ceil[laneOf(bulkhead.Sheddable)])
	}
}
