package semaphore

import (
	"context"
	"errors"
	"testing"

	"github.com/bulkhead-go/bulkhead"
)

func TestPermitReleaseCountsOutcome(t *testing.T) {
	b, err := New("p", Config{MaxConcurrentCalls: 1})
	if err != nil {
		t.Fatal(err)
	}
	var finished []error
	cancel := b.Subscribe(func(e bulkhead.Event) {
		if e.Type == bulkhead.EventFinished {
			finished = append(finished, e.Err)
		}
	})
	defer cancel()
	p, err := b.AcquirePermit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquirePermit(context.Background()); !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("second AcquirePermit: got %v, want ErrBulkheadFull", err)
	}
	boom := errors.New("boom")
	p.Release(boom)
	p, err = b.AcquirePermit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p.Release(nil)
	s := b.Stats()
	if s.Permitted != 2 || s.Finished != 2 || s.Failed != 1 || s.Rejected != 1 || s.InFlight != 0 {
		t.Fatalf("stats %+v", s)
	}
	if len(finished) != 2 || finished[0] != boom || finished[1] != nil {
		t.Fatalf("finished events carried %v", finished)
	}
}

func TestZeroPermitReleasePanics(t *testing.T) {
	defer func() {
		if r := recover(); r != "semaphore: Permit.Release called on a zero Permit" {
			t.Fatalf("Release on a zero Permit: recovered %v, want a panic naming the call", r)
		}
	}()
	var p Permit
	p.Release(nil)
}
