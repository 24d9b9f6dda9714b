// Package semtest holds test helpers for semaphore bulkheads, shared by the
// tests of several packages.
package semtest

import (
	"testing"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// AtRest fails the test unless b is at rest (no call running, no waiter)
// with exactly these counters; every permitted call has finished. Its
// rejections by reason must add up to rejected; their split, and the line's
// modes (Overloaded, LIFO), are the caller's to check.
func AtRest(t testing.TB, b *semaphore.Bulkhead, permitted, rejected, cancelled, failed uint64) {
	t.Helper()
	limit := b.Config().MaxConcurrentCalls
	want := bulkhead.Stats{
		Name: b.Name(), Kind: bulkhead.Semaphore, MaxConcurrentCalls: limit, AvailableConcurrentCalls: limit,
		Permitted: permitted, Rejected: rejected, Cancelled: cancelled, Finished: permitted, Failed: failed,
	}
	s := b.Stats()
	var sum uint64
	for _, n := range s.RejectedBy {
		sum += n
	}
	if sum != rejected {
		t.Fatalf("stats at rest: rejections by reason %v add up to %d, want %d", s.RejectedBy, sum, rejected)
	}
	want.RejectedBy, want.Overloaded, want.LIFO = s.RejectedBy, s.Overloaded, s.LIFO
	if s != want {
		t.Fatalf("stats at rest:\n got %+v\nwant %+v", s, want)
	}
}
