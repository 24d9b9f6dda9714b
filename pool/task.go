package pool

import (
	"context"
	"errors"
	"sync"
	"time"

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

// job is the typed part of a task: its function, result and future.
type job interface {
	exec()            // runs the function on the node's context and stores the result
	setErr(err error) // replaces the stored result with a failure
	result() error    // the stored error
	settle()          // completes the future with the stored result
	fail(err error)   // completes the future with err; the function never ran
	clear()           // forgets the function and the result (see node.drop)
}

// node is the untyped part of a task: its place in the Bulkhead's queues,
// its context and its loan. Everything but ctx and cancel is guarded by
// the Bulkhead's mutex.
type node struct {
	b          *Bulkhead
	j          job
	prev, next *node // in the line of waiting submitters, the queue or the running tasks
	state      nodeState
	refused    bool          // Close refused it while its submitter waited for room; set before ready closes
	lent       bool          // a task started in this task's slot runs (see help)
	deadline   int64         // from now(): when QueueTimeout drops it from the queue; 0 = never
	queuedAt   int64         // from now(); set only while someone is subscribed
	ready      chan struct{} // closed once a waiting submitter's task is admitted or refused
	lender     *node         // the task whose slot this one runs in, until it finishes (see help)
	ended      chan struct{} // closed when a task started in a lender's slot has finished
	stop       func() bool   // stops the watch on the submitter's context while queued
	// ctx is the task's context: context.WithCancelCause of tc, the
	// submitter's context seen from inside the task.
	tc     taskCtx
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// taskCtx is the submitter's context plus the node under join.Key, for a
// wait inside the task to find it; it lives in the node. drop forgets the
// submitter's context under mu (goroutines of the task may still use it).
type taskCtx struct {
	mu     sync.Mutex
	parent context.Context
	n      *node
}

func (c *taskCtx) get() context.Context {
	c.mu.Lock()
	p := c.parent
	c.mu.Unlock()
	return p
}

func (c *taskCtx) Deadline() (time.Time, bool) { return c.get().Deadline() }
func (c *taskCtx) Done() <-chan struct{}       { return c.get().Done() }
func (c *taskCtx) Err() error                  { return c.get().Err() }
func (c *taskCtx) String() string              { return "pool task context" }

func (c *taskCtx) Value(key any) any {
	if key == join.Key {
		return c.n
	}
	return c.get().Value(key)
}

// init gives n its bulkhead, job and context, made from the submitter's ctx.
func (n *node) init(b *Bulkhead, j job, ctx context.Context) {
	n.b, n.j = b, j
	n.tc.parent, n.tc.n = ctx, n
	n.ctx, n.cancel = context.WithCancelCause(&n.tc)
}

// Cancel is what Future.Cancel calls: see [future.Future.Cancel].
func (n *node) Cancel() {
	if b := n.pool(); b != nil {
		b.cancel(n, context.Canceled)
	}
}

// drop is called once n's future has completed: the future keeps the
// task's memory, but neither its function nor its submitter's context nor
// the Bulkhead.
func (n *node) drop() {
	n.j.clear()
	n.tc.mu.Lock()
	n.tc.parent, n.b = context.Background(), nil
	n.tc.mu.Unlock()
}

// pool returns n's Bulkhead, or nil once n is dropped. (Goroutines that a
// task started may ask with its context after it has ended.)
func (n *node) pool() *Bulkhead {
	n.tc.mu.Lock()
	defer n.tc.mu.Unlock()
	return n.b
}

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
	p     future.Promise[T]
	fn    func(context.Context) (T, error)
	fnErr func(context.Context) error // the function of Bulkhead.Go and TryGo; fn is nil then
	v     T
	err   error
}

func newTask[T any](b *Bulkhead, ctx context.Context, fn func(context.Context) (T, error), fnErr func(context.Context) error) *task[T] {
	t := &task[T]{fn: fn, fnErr: fnErr}
	t.init(b, t, ctx)
	t.p.Init(&t.node)
	return t
}

func (t *task[T]) exec() {
	if t.fnErr != nil {
		t.err = t.fnErr(t.ctx)
		return
	}
	t.v, t.err = t.fn(t.ctx)
}

func (t *task[T]) setErr(err error) {
	var zero T
	t.v, t.err = zero, err
}

func (t *task[T]) clear() {
	t.setErr(nil)
	t.fn, t.fnErr = nil, nil
}

func (t *task[T]) result() error { return t.err }
func (t *task[T]) settle()       { t.p.Complete(t.v, t.err) }
func (t *task[T]) fail(err error) {
	var zero T
	t.p.Complete(zero, err)
}
