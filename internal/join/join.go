// Package join connects the future package to the pool bulkhead, which
// future cannot import, without exported API of either: how a Wait inside a
// pool task starts the queued task it waits for, and how a pool worker learns
// that a future's callbacks are about to run on it.
package join

type key struct{}

// Key is the context key under which a pool task's context holds its
// [Helper].
var Key key

// Helper is what a pool task's context holds under [Key].
type Helper interface {
	// Help starts the task behind target (a future's Canceler) at once, on
	// a worker of its own and in the helper's slot, if it is a task of the
	// helper's own pool still waiting in its queue; it does not wait for
	// it. If the helper's slot is lent to another task already, Help
	// starts nothing and returns a channel that is closed once it is free
	// again, for the caller to try again then (if the future is still
	// pending); otherwise it returns nil. If decided is not nil, Help
	// starts nothing once decided reports true, checked at the moment it
	// would start the task (a gather decided meanwhile needs no more).
	Help(target any, decided func() bool) <-chan struct{}
}

// Owner is implemented by a future's Canceler that must act before the
// future's callbacks run on the goroutine that completed it.
type Owner interface {
	// BeforeCallbacks is called on the completing goroutine after the
	// future's result is stored and its waiters released, and before its
	// callbacks run.
	BeforeCallbacks()
}
