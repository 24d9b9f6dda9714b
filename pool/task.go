package pool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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
	stWaiting                  // its submitter waits for room (SubmitWait)
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
}

// node is the untyped part of a task: its place in the bulkhead's lists and
// its context. The list links and state are guarded by the bulkhead's mutex.
type node struct {
	b          *Bulkhead
	j          job
	prev, next *node // in the waiting list, the queue or the running list
	deadline   int64 // from now(): when QueueTimeout drops it from the queue; 0 = never
	queuedAt   int64 // from now(); set only while someone is subscribed
	state      nodeState
	helping    bool          // a task this one waits for was started in its slot and still runs
	refused    bool          // SubmitWait: Close refused it while it waited; set before ready closes
	ready      chan struct{} // SubmitWait: closed once the task is admitted or refused
	handoff    *node         // the next task this worker owes, while its future completes
	helpedBy   *node         // the task whose wait started this one in its slot, until it finishes
	w          *watch        // the shared watch on the submitter's context, while queued
	wprev      *node
	wnext      *node
	ctx        runCtx
}

// Cancel is what Future.Cancel calls: see [future.Future.Cancel].
func (n *node) Cancel() { n.b.cancel(n, context.Canceled) }

// BeforeCallbacks is called on this worker once n's future is complete and
// before its callbacks run: the next task this worker owes goes to another
// worker first, so that a callback that panics or calls runtime.Goexit
// strands nothing.
func (n *node) BeforeCallbacks() {
	if nx := n.handoff; nx != nil {
		n.handoff = nil
		n.b.invoke(nx)
	}
}

// Help is what [future.Future.Wait] and the gathering functions call when
// they are given n's context (or one derived from it) and the future of
// target is pending: see Bulkhead.help.
func (n *node) Help(target any, decided func() bool) <-chan struct{} {
	t, ok := target.(*node)
	if !ok || t.b != n.b {
		return nil
	}
	return n.b.help(n, t, decided)
}

// parentDone runs when the submitter's context ends, if n's context watches
// it (a running task that asked for its Done channel).
func (n *node) parentDone() { n.b.cancel(n, n.ctx.parent.Err()) }

// task is one submitted function with its promise. The promise is an
// allocation of its own, so that a completed future does not keep the task
// (its function, context and bulkhead) alive.
type task[T any] struct {
	node
	p     *future.Promise[T]
	fn    func(context.Context) (T, error)
	fnErr func(context.Context) error // Go's function; fn is nil then
	v     T
	err   error
}

func (t *task[T]) exec() {
	if t.fnErr != nil {
		t.err = t.fnErr(&t.ctx)
		return
	}
	t.v, t.err = t.fn(&t.ctx)
}

func (t *task[T]) setErr(err error) {
	var zero T
	t.v, t.err = zero, err
}

func (t *task[T]) result() error { return t.err }
func (t *task[T]) settle()       { t.p.Complete(t.v, t.err) }
func (t *task[T]) fail(err error) {
	var zero T
	t.p.Complete(zero, err)
}

// runCtx is the context a task runs with. It carries the submitter's values
// and deadline, and is cancelled when the submitter's context ends, when the
// task's future is cancelled, when Close gives up waiting, and when the task
// returns. It lives inside the task; what only a context that is looked at
// (Done, AfterFunc) or cancelled needs is made then, in an allocation of its
// own.
//
// Its Value hides the submitter's cancellation (as [context.WithoutCancel]
// does), so that context.Cause of a task's context reports its own Err. It
// has an AfterFunc method, so that contexts derived from it inside the task
// (context.WithTimeout and the like) need no watching goroutine.
//
// Both costly parts are made only when needed. The WithoutCancel view of
// the submitter's context is made by the first Value call. The watch on the
// submitter's context (a context.AfterFunc) is started by the first Done or
// AfterFunc call of the running task; until then, Err asks the submitter's
// context itself. (While the task is queued, the bulkhead watches that
// context for it, with one watch for every queued task that shares it.) A
// task that never looks at its context costs neither.
type runCtx struct {
	parent context.Context
	vals   atomic.Value // context.Context: WithoutCancel(parent), made by the first Value
	// st is nil until the context is touched (by Done, AfterFunc or a
	// cancellation: st then holds everything about its end), or
	// endedUntouched once it ended before that (its Err is
	// context.Canceled, and nothing else is left to do).
	st   atomic.Pointer[ctxState]
	hide bool // parent can end: hide its cancellation and watch it
}

// ctxState is the part of a task's context that only a touched context
// needs, in an allocation of its own, so that a task that does not look
// at its context does not carry it.
type ctxState struct {
	mu       sync.Mutex
	watching bool         // the watch on parent was started
	done     atomic.Value // chan struct{}, made lazily
	err      error
	afters   *afterFunc  // functions to run when done, newest first
	stop     func() bool // stops the watch on parent
}

// endedUntouched is the st of a context that ended before it was touched.
var endedUntouched = new(ctxState)

// node returns the node whose context c is. (A node's context is a field
// of the node: the pointer it would need takes task[int] from 208 bytes to
// 224, one size class.)
func (c *runCtx) node() *node {
	return (*node)(unsafe.Add(unsafe.Pointer(c), -int(unsafe.Offsetof(node{}.ctx))))
}

// touch returns c's state for Done, AfterFunc or a cancellation, made on
// the first call; nil if c has ended untouched: it is done with
// context.Canceled.
func (c *runCtx) touch() *ctxState {
	for {
		switch x := c.st.Load(); x {
		case endedUntouched:
			return nil
		case nil:
			x = new(ctxState)
			if c.st.CompareAndSwap(nil, x) {
				return x
			}
		default:
			return x
		}
	}
}

type afterFunc struct {
	f          func()
	prev, next *afterFunc
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (c *runCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }

func (c *runCtx) Value(key any) any {
	if key == join.Key {
		return c.node() // helps a Wait inside the task: see node.Help
	}
	if !c.hide {
		return c.parent.Value(key)
	}
	v := c.vals.Load()
	if v == nil {
		c.vals.CompareAndSwap(nil, context.WithoutCancel(c.parent))
		v = c.vals.Load()
	}
	return v.(context.Context).Value(key)
}

func (c *runCtx) Done() <-chan struct{} {
	x := c.st.Load()
	if x != nil && x != endedUntouched {
		if d := x.done.Load(); d != nil {
			return d.(chan struct{})
		}
	}
	if x = c.touch(); x == nil {
		return closedChan
	}
	x.mu.Lock()
	d := x.done.Load()
	if d == nil {
		if x.err != nil {
			d = closedChan
		} else {
			d = make(chan struct{})
		}
		x.done.Store(d)
	}
	x.mu.Unlock()
	c.watch(x)
	return d.(chan struct{})
}

func (c *runCtx) Err() error {
	switch x := c.st.Load(); x {
	case endedUntouched:
		return context.Canceled
	case nil:
	default:
		x.mu.Lock()
		err := x.err
		x.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if !c.hide {
		return nil
	}
	// Not watched yet, or the watch has not run yet: ask the parent.
	if perr := c.parent.Err(); perr != nil {
		c.cancel(perr)
		return c.Err() // ended now, by this cancel or another end
	}
	return nil
}

// watch starts watching the submitter's context, once, unless it cannot end
// or c is already done. x is c's state.
func (c *runCtx) watch(x *ctxState) {
	if !c.hide {
		return
	}
	x.mu.Lock()
	if x.watching || x.err != nil {
		x.mu.Unlock()
		return
	}
	x.watching = true
	x.mu.Unlock()
	stop := context.AfterFunc(c.parent, c.node().parentDone)
	x.mu.Lock()
	if x.err != nil { // ended meanwhile: end did not see stop
		x.mu.Unlock()
		stop()
		return
	}
	x.stop = stop
	x.mu.Unlock()
}

func (c *runCtx) String() string { return "pool task context" }

// AfterFunc arranges for f to run in its own goroutine once c is done, as
// [context.AfterFunc] does; the context package calls it for contexts
// derived from c.
func (c *runCtx) AfterFunc(f func()) (stop func() bool) {
	x := c.touch()
	if x == nil {
		go f()
		return func() bool { return false }
	}
	c.watch(x)
	a := &afterFunc{f: f}
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	a.next = x.afters
	if a.next != nil {
		a.next.prev = a
	}
	x.afters = a
	x.mu.Unlock()
	return func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		if a.f == nil { // already run, or already stopped
			return false
		}
		a.f = nil
		if a.prev == nil {
			x.afters = a.next
		} else {
			a.prev.next = a.next
		}
		if a.next != nil {
			a.next.prev = a.prev
		}
		return true
	}
}

// cancel ends c with err (the first call wins).
func (c *runCtx) cancel(err error) {
	if x := c.touch(); x != nil {
		x.end(err, false)
	}
}

// finish ends c with context.Canceled once its task is done, or dropped
// before it ran, and stops watching the submitter's context. A context
// nobody touched ends with one atomic operation.
func (c *runCtx) finish() {
	if !c.st.CompareAndSwap(nil, endedUntouched) {
		if x := c.st.Load(); x != endedUntouched {
			x.end(context.Canceled, true)
		}
	}
}

// end ends the context with err (unless it has ended already) and, if
// unwatch, stops watching the submitter's context.
func (x *ctxState) end(err error, unwatch bool) {
	var stop func() bool
	var fs []func()
	x.mu.Lock()
	if unwatch {
		stop, x.stop = x.stop, nil
	}
	if x.err == nil {
		x.err = err
		if d, _ := x.done.Load().(chan struct{}); d != nil { // else Done makes it closed
			close(d)
		}
		for a := x.afters; a != nil; a = a.next {
			fs = append(fs, a.f)
			a.f = nil
		}
		x.afters = nil
	}
	x.mu.Unlock()
	if stop != nil {
		stop()
	}
	for _, f := range fs {
		go f()
	}
}
