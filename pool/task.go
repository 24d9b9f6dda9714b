package pool

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/internal/join"
)

// errGoexit completes the future of a task that called runtime.Goexit.
var errGoexit = errors.New("pool: the task called runtime.Goexit (as t.FailNow does) instead of returning")

// errNotRun completes the future of a task that was given a worker but never
// ran, because an event subscriber of its EventPermitted panicked or called
// runtime.Goexit on that worker.
var errNotRun = errors.New("pool: the task did not run: a subscriber of its permitted event panicked or called runtime.Goexit")

type nodeState uint8

const (
	stNew     nodeState = iota // being submitted
	stWaiting                  // its submitter waits for room (Go, Bulkhead.Go)
	stQueued                   // in the queue
	stRunning                  // counted in active, on a worker
	stDone                     // finished, or dropped before it ran
)

// job is the typed part of a task: its function, value and future.
type job interface {
	exec()   // runs the function on the node's context, storing its result
	settle() // forgets the function, completes the future with the result
}

// member is a Group that a task belongs to: see Group.end and Group.take.
type member interface {
	end(n *node, err error)
	take(n *node) *node
}

// node is the untyped part of a task. Its links, states and loan are
// guarded by the Bulkhead's mutex, its context's fields by cmu.
type node struct {
	b          *Bulkhead // nil once dropped (guarded by cmu)
	j          job
	err        error           // the task's error, once run or dropped
	grp        member          // its Group, if any
	done       <-chan struct{} // its context's Done once dropped, if one was made before (see drop)
	prev, next *node           // in the line of waiting submitters, the queue or the running tasks
	state      nodeState
	refused    bool            // Close refused it while its submitter waited for room; set before ready closes
	bumped     bool            // refused while its submitter waited, for reason (see bumpLocked), set before ready closes
	byDeadline bool            // its deadline (below) is its submitter's, less MinDeadlineSlack
	reason     bulkhead.Reason // why the queue's rules dropped it or bumpLocked refused it, if either did
	inGroup    bool            // in the pool, for its Group (guarded by the Group's mutex)
	lent       bool            // a task started in this task's slot runs (see help)
	ended      uint8           // its context's end (guarded by cmu): an index of ctxErrs, 0 until the pool ends it
	joined     int64           // from now(): when it was queued, for CoDel and aging (set only with them)
	queuedAt   int64           // from now(); set only while someone is subscribed
	x          *aux            // what only slow paths need, made when first needed (see aux)
	lane       *lane           // its key's lane in a keyed pool, nil in a plain one
	// The node is the task's context: parent is the submitter's until a Done
	// is asked for, then (cancel set) a context.WithCancel of it, so that a task
	// that never looks at ctx.Done() costs one allocation, in the 256-byte
	// size class (G3_Join/ours_pool_Submit_Wait, G4_FanOut/ours_pool_Group).
	cmu    sync.Mutex
	parent context.Context
	cancel context.CancelFunc
}

// aux is the part of a task that only a task with a QueueTimeout or deadline
// timer, a watch on a cancellable submitter's context, a waiting submitter or
// a lent slot needs, paths that allocate already: in an allocation of its own
// (48 bytes), so that a plain task is one allocation in the 256-byte size
// class, not 288 (G4_FanOut/ours_pool_Submit_All at GOMAXPROCS 2: GC;
// G3_Join/ours_pool_Submit_Wait). Lock rule: node.x is set once, under the
// Bulkhead's mutex, and never cleared; aux's fields are written under that
// mutex and read under it, but for ready and lender read by the goroutine
// that runs or waits for n after the mutex published them (awaitRoom's copy,
// runLent, finish) while no one writes them.
type aux struct {
	deadline int64       // from now(): when QueueTimeout or (byDeadline) the slack drops it; 0: never
	expiry   *time.Timer // drops it from the queue after QueueTimeout
	stop     func() bool // stops the watch on the submitter's context while queued
	// ready is closed once a waiting submitter's task is admitted or refused,
	// or once a task started in a lender's slot has finished (see help).
	ready  chan struct{}
	lender *node // the task whose slot this one runs in, until it finishes (see help)
}

// ax returns n's aux for writing, made if n has none. b.mu must be held.
func (n *node) ax() *aux {
	if n.x == nil {
		n.x = new(aux)
	}
	return n.x
}

// rd returns a copy of n's aux, for reading (a zero one if n has none):
// a copy, so that no write through it can reach n or another task. b.mu
// must be held.
func (n *node) rd() (x aux) {
	if n.x != nil {
		x = *n.x
	}
	return x
}

// ctxErrs are the errors of a task's context by node.ended: a byte, not an
// error, keeps the task in the 256-byte size class (G4_FanOut: GC).
var ctxErrs = [...]error{nil, context.Canceled, context.DeadlineExceeded}

// closedChan is the Done of a task's context once the task is done (see drop).
var closedChan = make(chan struct{})

func init() { close(closedChan) }

// Done is the task context's [context.Context.Done].
func (n *node) Done() <-chan struct{} {
	n.cmu.Lock()
	defer n.cmu.Unlock()
	return n.doneLocked()
}

func (n *node) doneLocked() <-chan struct{} {
	switch {
	case n.cancel == nil && n.b == nil: // dropped: ended, with the channel it had, if any
		if n.done != nil {
			return n.done
		}
		return closedChan
	case n.cancel == nil:
		if n.parent, n.cancel = context.WithCancel(n.parent); n.ended != 0 {
			n.cancel()
		}
	}
	return n.parent.Done()
}

// Signal is what a Wait on n's pending future asks for with its context's
// Done channel: if that is the channel of the context n was submitted
// with, the Done channel of n's own context, which closes once that one
// does and once n has ended: one channel to park on instead of a select on
// two, and no channel of the future's (G3_Join/ours_pool_Submit_Wait_ctxDone).
// Else nil. b.mu is held too: a queued task's parent is read under it.
func (n *node) Signal(done <-chan struct{}) <-chan struct{} {
	b := n.pool()
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n.cmu.Lock()
	defer n.cmu.Unlock()
	if n.state == stDone || n.cancel != nil || n.parent.Done() != done {
		return nil
	}
	return n.doneLocked()
}

// Err is the task context's [context.Context.Err].
func (n *node) Err() error {
	n.cmu.Lock()
	defer n.cmu.Unlock()
	if n.ended != 0 {
		return ctxErrs[n.ended]
	}
	return n.parent.Err()
}

// Deadline is the task context's [context.Context.Deadline].
func (n *node) Deadline() (time.Time, bool) {
	n.cmu.Lock()
	defer n.cmu.Unlock()
	return n.parent.Deadline()
}

// Value is the task context's [context.Context.Value], and the node itself
// under join.Key, for a wait inside the task. Other keys go to parent's
// context, so that a context derived from the task's joins parent's
// cancellation without a goroutine, and context.Cause reads parent's cause.
func (n *node) Value(key any) any {
	if key == join.Key {
		return n
	}
	n.cmu.Lock()
	c := n.parent
	n.cmu.Unlock()
	return c.Value(key)
}

func (n *node) String() string { return "pool task context" }

// end ends the task's context, once: its future was cancelled, Close gave
// up, or the task returned.
func (n *node) end() {
	n.cmu.Lock()
	n.endLocked()
	n.cmu.Unlock()
}

// endLocked ends the context, once, and reports whether it had ended of
// itself (its submitter's context ended: there may be a cause). A Done
// channel made already tells it without a call of Err, which locks
// (G3_Join/ours_pool_Submit_Wait_ctxDone).
func (n *node) endLocked() (before bool) {
	if n.ended != 0 {
		return false
	}
	if n.cancel != nil {
		select {
		case <-n.parent.Done():
			before = true
		default:
		}
		n.cancel()
	} else {
		before = n.parent.Err() != nil
	}
	n.ended = 1
	if before && n.parent.Err() == context.DeadlineExceeded {
		n.ended = 2
	}
	return before
}

// Cancel is what Future.Cancel calls: see [future.Future.Cancel].
func (n *node) Cancel() {
	if b := n.pool(); b == nil || !b.dropQueued(n, context.Canceled, bulkhead.EventCancelled) {
		n.end()
	}
}

// drop ends the task's context once the task is done, before its future
// completes: the future keeps the task's memory, but neither its function
// (see settle) nor its submitter's context nor the Bulkhead. Goroutines of the task may
// still use its context: it keeps its deadline, its Done, Err and cause,
// and loses only the submitter's values (see the package doc).
func (n *node) drop() {
	n.cmu.Lock()
	if n.ended == 0 && n.cancel == nil && n.parent.Done() == nil {
		// A submitter's context that cannot end (Background) has no
		// deadline, error or cause to keep: one call, not three
		// (G3_Join/ours_pool_Submit_Wait).
		n.ended, n.parent, n.b, n.grp = 1, context.Background(), nil, nil
		n.cmu.Unlock()
		return
	}
	ended := n.ended != 0 // by Cancel or Close
	var keep context.Context = context.Background()
	if d, ok := n.parent.Deadline(); ok {
		keep = deadlineOnly{keep, d}
	}
	if n.endLocked() || ended { // else it has no cause
		if cause := context.Cause(n.parent); cause != nil && cause != ctxErrs[n.ended] {
			c, cancel := context.WithCancelCause(keep) // rare: the submitter's context ended with a cause
			cancel(cause)
			keep = c
		}
	}
	if n.cancel != nil { // Done was asked for: successive calls return the same channel
		n.done = n.parent.Done()
	}
	n.parent, n.cancel, n.b, n.grp = keep, nil, nil, nil
	n.cmu.Unlock()
}

// deadlineOnly is what a completed task's context keeps of its
// submitter's deadline (see drop).
type deadlineOnly struct {
	context.Context // context.Background()
	d               time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.d, true }

// Help is what a wait inside a task calls: see Bulkhead.help.
func (n *node) Help(target any, decided func() bool) <-chan struct{} {
	t, ok := target.(*node)
	if b := n.pool(); ok && b != nil && t.pool() == b {
		return b.help(n, t, decided)
	}
	return nil
}

// task is one submitted function with its promise, in one allocation.
type task[T any] struct {
	node
	p  future.Promise[T]
	fn func(context.Context) (T, error)
	v  T
}

func newTask[T any](b *Bulkhead, ctx context.Context, fn func(context.Context) (T, error)) *task[T] {
	t := &task[T]{fn: fn}
	t.b, t.j, t.parent = b, t, ctx
	t.p.Init(&t.node)
	return t
}

func (t *task[T]) exec() { t.v, t.err = t.fn(&t.node) }
func (t *task[T]) settle() {
	t.fn = nil // v and err are the future's too
	t.p.Complete(t.v, t.err)
}

// pool returns n's Bulkhead, or nil once n is dropped.
func (n *node) pool() *Bulkhead {
	n.cmu.Lock()
	defer n.cmu.Unlock()
	return n.b
}
