package semaphore

import "testing"

// After a flood of keys the table is rebuilt small: it holds the idle
// entries kept for reuse and no more, and keeps that many spares.
func TestKeyedTableShrinksAfterFlood(t *testing.T) {
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
	if n := len(k.tab.Load().slots); n < 10_000 {
		t.Fatalf("%d slots for 10,000 keys", n)
	}
	for _, p := range ps {
		p.Release(nil)
	}
	tab := k.tab.Load()
	if tab.live != maxIdle || k.nidle != maxIdle || len(tab.slots) > 8*maxIdle || k.nfree != maxSpare {
		t.Fatalf("after the flood: %d entries, %d idle, %d slots, %d spare", tab.live, k.nidle, len(tab.slots), k.nfree)
	}
}
