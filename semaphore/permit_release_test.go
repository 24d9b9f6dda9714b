package semaphore_test

import (
	"context"
	"testing"

	"github.com/bulkhead-go/bulkhead/semaphore"
)

// A second Release of a Permit (or of a copy) panics, as Bulkhead.Release
// without a permit does, even while another call holds a permit: it must
// not give back that call's permit, which would let a third call run
// beside the two holders under a limit of 2 and count a finish that never
// happened.
func TestPermitReleasedTwicePanics(t *testing.T) {
	b, err := semaphore.New("double", semaphore.Config{MaxConcurrentCalls: 2})
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.AcquirePermit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !b.TryAcquire() { // another caller's permit
		t.Fatal("TryAcquire")
	}
	c := p // a copy is the same permit
	p.Release(nil)
	panicked := func() (r any) {
		defer func() { r = recover() }()
		c.Release(nil) // the bug: the same Permit again
		return nil
	}()
	if panicked != "semaphore: Permit.Release called twice" {
		// The other caller still runs; the limit is 2; yet two more get in.
		n := 0
		for b.TryAcquire() {
			n++
		}
		t.Fatalf("second Permit.Release: recovered %v; with one real holder, %d more calls were admitted under limit 2 (Stats %+v)", panicked, n, b.Stats())
	}
	if s := b.Stats(); s.InFlight != 1 || s.Finished != 1 {
		t.Fatalf("after the refused second Release: %+v, want 1 in flight and 1 finished", s)
	}
}
