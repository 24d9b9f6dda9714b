// Package semtest holds test helpers for semaphore bulkheads, shared by the
// tests of several packages.
package semtest

import (
	"testing"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// AtRest fails the test unless b is at rest (no call running, no waiter)
// with exactly these counters; every permitted call has finished.
func AtRest(t testing.TB, b *semaphore.Bulkhead, permitted, rejected, cancelled, failed uint64) {
	t.Helper()
	limit := b.Config().MaxConcurrentCalls
	want := bulkhead.Stats{
		Name: b.Name(), Kind: bulkhead.Semaphore, MaxConcurrentCalls: limit, AvailableConcurrentCalls: limit,
		Permitted: permitted, Rejected: rejected, Cancelled: cancelled, Finished: permitted, Failed: failed,
	}
	if s := b.Stats(); s != want {
		t.Fatalf("stats at rest:\n got %+v\nwant %+v", s, want)
	}
}
