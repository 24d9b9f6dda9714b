package future_test

import (
	"context"
	"errors"
	"runtime/debug"
	"testing"

	"github.com/bulkhead-go/bulkhead/future"
)

// Wait with a context that can end, on the last stage of a long Then
// chain whose source is pending, walks the chain recursively
// (Future.source -> then.chainSource -> Future.source ...): one pair of
// frames per stage. Completing and cancelling the same chain take constant
// stack (TestLongThenChainDoesNotRecurse, same 2 MB limit, same length);
// this Wait is a fatal, unrecoverable stack overflow.
func TestWaitOnLongThenChainDoesNotRecurse(t *testing.T) {
	n := chainLength()
	defer debug.SetMaxStack(debug.SetMaxStack(2 << 20))
	p := future.NewPromise[int](nil)
	last := p.Future()
	for range n {
		last = future.Then(last, func(v int) (int, error) { return v + 1, nil })
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Wait returns ctx.Err() at once: it need only look at the chain's source
	if _, err := last.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v", err)
	}
	p.Complete(0, nil)
}
