package semaphore_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead/semaphore"
)

// A bulkhead shared by several tests may make callers wait inside one
// testing/synctest bubble, then inside another, then outside any: its
// deadline timer must belong to the line that waits, not to the first
// bubble that ever waited (using a bubble's timer from another bubble is a
// fatal error that kills the test binary).
func TestSharedBulkheadWaitsInSeveralBubbles(t *testing.T) {
	shared, err := semaphore.New("shared", semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	waitOnce := func(t *testing.T) {
		if err := shared.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- shared.Acquire(context.Background()) }() // waits in line
		for shared.Stats().Waiting == 0 {
			time.Sleep(time.Millisecond) // only until the waiter is in line; never the pass criterion
		}
		shared.Release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		shared.Release()
	}
	t.Run("bubble1", func(t *testing.T) { synctest.Test(t, waitOnce) })
	t.Run("bubble2", func(t *testing.T) { synctest.Test(t, waitOnce) })
	t.Run("outside", waitOnce)
	if s := shared.Stats(); s.InFlight != 0 || s.Waiting != 0 || s.Permitted != 6 || s.Finished != 6 {
		t.Fatalf("stats after three lines: %+v", s)
	}
}
