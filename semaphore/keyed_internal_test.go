package semaphore

import "testing"

// After a flood of keys the map is rebuilt small: a Go map never shrinks
// by itself, so without the rebuild it would keep the flood's size.
func TestKeyedMapShrinksAfterFlood(t *testing.T) {
	k, err := NewKeyed[int]("flood", KeyedConfig{PerKey: Config{MaxConcurrentCalls: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var ps []KeyedPermit[int]
	for i := range 10_000 {
		p, ok := k.TryAcquire(i)
		if !ok {
			t.Fatal(i)
		}
		ps = append(ps, p)
	}
	if k.peak != 10_000 {
		t.Fatalf("peak %d", k.peak)
	}
	for _, p := range ps {
		p.Release(nil)
	}
	if len(k.keys) != maxIdle || k.nidle != maxIdle || k.peak > 10_000/8 || k.nfree != maxSpare {
		t.Fatalf("after the flood: %d entries, %d idle, peak %d, %d spare", len(k.keys), k.nidle, k.peak, k.nfree)
	}
}
