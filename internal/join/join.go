// Package join connects the future package to the pool bulkhead, which
// future cannot import, without exported API of either: how a Wait inside a
// pool task helps run the task it waits for, and how a pool worker learns
// that a future's callbacks are about to run on it.
package join

type key struct{}

// Key is the context key under which a pool task's context holds its
// [Helper].
var Key key

// Helper is what a pool task's context holds under [Key].
type Helper interface {
	// Help runs the task behind target (a future's Canceler) on the calling
	// goroutine, if it is a task of the helper's own pool still waiting in
	// its queue, and reports whether it did. The future is complete when Help
	// returns true.
	Help(target any) bool
}

// Owner is implemented by a future's Canceler that must act before the
// future's callbacks run on the goroutine that completed it.
type Owner interface {
	// BeforeCallbacks is called on the completing goroutine after the
	// future's result is stored and its waiters released, and before its
	// callbacks run.
	BeforeCallbacks()
}
