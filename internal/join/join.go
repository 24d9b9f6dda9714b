// Package join is the one link from the future package to the pool
// bulkhead, which future cannot import: a wait inside a pool task finds the
// task under Key in its context, and asks it to run a queued task it waits
// for.
package join

type key struct{}

// Key is the context key under which a pool task's context holds its
// [Helper].
var Key key

// Helper is what a pool task's context holds under [Key].
type Helper interface {
	// Help runs the task behind target (a pending future's Canceler) in the
	// helper's slot, and returns once it has finished, if it is a task of
	// the helper's pool still waiting in its queue; otherwise it returns nil
	// at once. If the helper's slot is lent already, it starts nothing and
	// returns a channel that is closed when a slot is given back, for the
	// caller to try again then. It starts nothing once decided (if not
	// nil) reports true: a gather that needs no more.
	Help(target any, decided func() bool) <-chan struct{}
}

// Signal is what the Canceler of a pool task's future offers a wait with
// a context that can end: Signal(done) returns the Done channel of the
// task's own context if done is that of the context the task was submitted
// with (it then closes once done does, and once the task has ended), else
// nil.
type Signal interface {
	Signal(done <-chan struct{}) <-chan struct{}
}
