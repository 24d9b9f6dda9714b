package clock

import (
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Now lies between two time.Now calls around it, by the monotonic clock
// and by the wall clock, whether it took a new anchor or used the last.
func TestNowBetweenTimeNows(t *testing.T) {
	for i := range 1000 {
		if i == 500 {
			anchor.Store(nil)
		}
		before := time.Now()
		got := Now()
		after := time.Now()
		if got.Before(before) || got.After(after) {
			t.Fatalf("call %d: Now() = %v, not between %v and %v", i, got, before, after)
		}
		if w := got.Round(0); w.Before(before.Round(0).Add(-time.Millisecond)) || w.After(after.Round(0).Add(time.Millisecond)) {
			t.Fatalf("call %d: wall time of Now() = %v, not between %v and %v", i, w, before, after)
		}
	}
}

// An anchor over a second old, or in the future, is replaced, so that a
// step of the wall clock shows within a second.
func TestNowReanchors(t *testing.T) {
	for _, age := range []time.Duration{2 * maxAge, -time.Hour} {
		old := time.Now().Add(-age)
		anchor.Store(&old)
		before := time.Now()
		got := Now()
		if a := anchor.Load(); a == &old || a.Before(before) {
			t.Fatalf("anchor %v old: not replaced (anchor %v, now %v)", age, a, before)
		}
		if got.Before(before) {
			t.Fatalf("anchor %v old: Now() = %v, before %v", age, got, before)
		}
	}
	// A young anchor is kept.
	Now()
	a := anchor.Load()
	Now()
	if anchor.Load() != a {
		t.Fatal("an anchor less than a second old was replaced")
	}
}

// Inside a testing/synctest bubble, Now is the bubble's time.Now exactly,
// whether the anchor comes from outside the bubble, from the bubble itself,
// or from another bubble; and outside again it is the real time.
func TestNowInBubbles(t *testing.T) {
	Now() // an anchor from outside, with a monotonic reading
	bubble := func(t *testing.T) {
		for _, step := range []time.Duration{0, time.Millisecond, 300 * time.Millisecond, 2 * time.Second, 0, time.Hour} {
			time.Sleep(step)
			if got, want := Now(), time.Now(); !got.Equal(want) || got != want {
				t.Fatalf("after a sleep of %v: Now() = %v, want the bubble's time %v", step, got, want)
			}
		}
	}
	synctest.Test(t, bubble)
	synctest.Test(t, bubble) // the anchor is the first bubble's, an hour ahead
	before := time.Now()
	if got := Now(); got.Before(before) || got.Sub(before) > time.Minute {
		t.Fatalf("after the bubbles: Now() = %v, time.Now() was %v", got, before)
	}
}

func BenchmarkNow(b *testing.B) {
	for b.Loop() {
		Now()
	}
}

func BenchmarkTimeNow(b *testing.B) {
	for b.Loop() {
		time.Now()
	}
}
