package pool

import (
	"context"

	"github.com/bulkhead-go/bulkhead/internal/join"
)

// A task that waits, with its own context, for a queued task of its pool
// lends it its slot: the awaited task starts at once on a worker of its own,
// and the waiter blocks until it has finished, whatever its context does
// meanwhile, so no task function is added. One loan per slot at a time. Go
// lends the caller's slot the same way when the queue is full.

// caller returns the task of b whose context ctx is (or derives from), if
// it is running. b.mu must be held.
func (b *Bulkhead) caller(ctx context.Context) *node {
	by, _ := ctx.Value(join.Key).(*node)
	if by == nil || by.pool() != b || by.state != stRunning {
		return nil
	}
	return by
}

// lendLocked starts n in by's slot. b.mu must be held, by running and its
// slot not lent.
func (b *Bulkhead) lendLocked(by, n *node) {
	by.lent = true
	x := n.ax()
	x.lender = by
	x.ready = make(chan struct{})
	b.lent++
	b.startLocked(n)
}

// runLent runs n, started in another task's slot, on a worker of its own,
// and waits until it has finished (its callbacks included).
func (b *Bulkhead) runLent(n *node) {
	ended := n.x.ready // set by lendLocked, before n started
	b.invoke(n)
	<-ended
}

// help starts t, a task of b still in the queue whose future the running
// task by waits for, in by's slot, and returns once t has finished. If by's
// slot is lent already (a wait on another goroutine of by's), it starts
// nothing and returns a channel that is closed when a loan of b ends, for
// the waiter to try again then. It returns nil at once if t is not queued,
// by not running, or decided (not nil) reports that the wait needs nothing
// more; and once t is refused as a worker would refuse it (its context has
// ended, its QueueTimeout or deadline point has come, CoDel sheds it). In
// a keyed pool t must be next in its key's lane; a class lane (Priorities)
// lends to any of its tasks.
func (b *Bulkhead) help(by, t *node, decided func() bool) <-chan struct{} {
	b.mu.Lock()
	if t.state != stQueued || by.state != stRunning || (t.lane != nil && t.lane.owner != nil && !b.keys.startable(t)) || (decided != nil && decided()) {
		b.mu.Unlock()
		return nil
	}
	if by.lent {
		if b.loanEnded == nil {
			b.loanEnded = make(chan struct{})
		}
		c := b.loanEnded
		b.mu.Unlock()
		return c
	}
	var now int64
	if !b.takeLocked(t, t, &now) { // the queue's rules refuse it, as a worker's pop would
		sh := b.takeShedLocked()
		b.mu.Unlock()
		b.refusedAll(sh)
		return nil
	}
	b.lendLocked(by, t)
	more, sh := b.kickLocked(), b.takeShedLocked()
	b.mu.Unlock()
	ended := t.x.ready
	defer func() { <-ended }() // the loan ends once t has finished, even if a callback below ends this goroutine
	b.invoke(t)
	b.startAll(more, sh)
	return nil
}
