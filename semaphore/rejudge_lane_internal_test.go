package semaphore

import (
	"context"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// After the re-check finds the settings replaced, acquireClass hands
// acquireSlow the lane computed under the new settings (found by a review: it passed the one computed under the old settings). If those had no
// Priorities (a Shadow only, so every call takes the configured path) and
// the new ones do, the lane is laneCritical whatever the context says: a
// Sheddable call is judged by Critical's ceiling under the new settings and
// admitted above Sheddable's ceiling, after Reconfigure returned - the very
// F1 outcome the re-check was meant to rule out.
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
