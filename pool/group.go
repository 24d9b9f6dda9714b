package pool

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/internal/join"
)

// Group runs a fan-out on a pool bulkhead as one call, as errgroup does on
// goroutines: Go each task, then Wait for their values in Go order. It fails
// fast: the first task to fail cancels the context of the others, its
// queued tasks leave the queue without running, and Go submits nothing
// more. At most a limit of the group's tasks are in the pool at once (by
// default the pool's MaxWorkers), so that a fan-out leaves the pool's queue
// to its other callers. Make one with [NewGroup]; a Group is safe for
// concurrent use. From one of the group's own tasks, add to it with TryGo,
// never Go (as with errgroup's SetLimit), or fan out with a nested Group.
type Group[T any] struct {
	b      *Bulkhead
	ctx    context.Context // the tasks' context, cancelled by the first failure
	cancel context.CancelCauseFunc
	by     *node // the task ctx is or derives from: Go and Wait help there

	mu    sync.Mutex
	cond  sync.Cond // on mu: a task ended, or the group failed
	eager int       // waits to wake at every task's end, not only the last's (awaitLocked)
	// ts are the tasks in Go order, each nil once ended, so that a fan-out
	// keeps about its limit of tasks alive, not all of them; ts[:next]
	// have ended. vals are their values, set as they end.
	ts      []*gtask[T]
	vals    []T
	pending []*gtask[T] // TryGo's, placed in ts once the pool took them or one fails
	next    int
	left    int // tasks in ts or pending not ended yet
	inPool  int // tasks submitted and not yet out of the pool (see settle)
	limit   int // SetLimit's; 0: the pool's MaxWorkers
	err     *future.TaskError
	entered int         // tasks that entered the pool (a by's group looks again: see awaitLocked)
	unwatch func() bool // stops the watch on ctx (see ended)
	// hand: a waiting Go's task, for take (loaded without mu: G4_FanOut/ours_pool_Group)
	hand atomic.Pointer[gtask[T]]
}

// gtask is a task of a Group: the group keeps its value, so it has no
// future: 184 bytes for an int (the 192-byte size class), against 256 for Submit's task (G4_FanOut/ours_pool_Group).
type gtask[T any] struct {
	node
	g  *Group[T]
	fn func(context.Context) (T, error) // nil once ended (guarded by g.mu)
	v  T
	gi int // its index in the group (-1 until TryGo places it; guarded by g.mu)
}

func (t *gtask[T]) exec() { t.v, t.err = t.fn(&t.node) }

// settle records the end of t and counts it out of the pool: the group's
// lock once per task, not in end too (G4_FanOut/ours_pool_Group).
func (t *gtask[T]) settle() {
	g := t.g
	g.mu.Lock()
	if t.inGroup { // else take started another task in its place
		g.inPool--
	}
	t.fn, t.inGroup = nil, false
	if t.gi < 0 { // a TryGo's task not placed yet: placeLocked counts it out, so that Wait cannot return without its value
		g.mu.Unlock()
		return
	}
	g.keepLocked(t)
	wake := g.countOutLocked()
	g.mu.Unlock()
	if wake { // unlocked: the woken take the lock at once
		g.cond.Broadcast()
	}
}

// countOutLocked counts an ended task out of left and reports whether a
// waiter must hear of it.
func (g *Group[T]) countOutLocked() bool {
	g.left--
	return g.left == 0 || g.eager > 0
}

// keepLocked moves the value of t, ended, to vals and forgets t.
func (g *Group[T]) keepLocked(t *gtask[T]) {
	if g.ts[t.gi] = nil; t.err == nil {
		g.vals[t.gi] = t.v
	}
}

// NewGroup returns an empty Group that runs its tasks on b, with a context
// derived from ctx that is cancelled, with the failure as its cause, when a
// task of the group fails, and once Wait returns.
func NewGroup[T any](ctx context.Context, b *Bulkhead) *Group[T] {
	if ctx == nil || b == nil {
		misuse("NewGroup", ctx, b)
	}
	g := &Group[T]{b: b}
	g.by, _ = ctx.Value(join.Key).(*node)
	g.cond.L = &g.mu
	g.ctx, g.cancel = context.WithCancelCause(ctx)
	g.unwatch = context.AfterFunc(g.ctx, g.ended)
	return g
}

func (g *Group[T]) newTask(fn func(context.Context) (T, error)) *gtask[T] {
	t := &gtask[T]{g: g, fn: fn}
	t.b, t.j, t.parent, t.grp = g.b, t, g.ctx, g
	return t
}

// SetLimit lets at most n of the group's tasks be in the pool at once,
// queued or running; Go waits for one of them to end before it submits
// more. The default is the pool's MaxWorkers (a Go waiting at it sees a
// new MaxWorkers once one of the group's tasks ends). A negative n removes
// the group's own limit (the pool's bounds still apply, and the group may
// then fill the pool's queue). A new limit applies at once, to a Go that
// waits too; n == 0 panics.
func (g *Group[T]) SetLimit(n int) {
	g.usable("SetLimit", true)
	if n == 0 {
		panic("pool: Group.SetLimit(0): a group that may hold no task in the pool could run nothing")
	}
	g.mu.Lock()
	g.limit = n
	g.mu.Unlock()
	g.cond.Broadcast() // a Go waiting at the limit looks again
}

// Go submits fn as the group's next task. While the group is at its limit
// it waits for one of the group's tasks in the pool to leave it; when the
// pool is full, it waits for room, first in, first out, as [Go] does. After
// the group has failed, or once its context has ended, Go returns at once
// and submits nothing; a failure to submit (the context ended, the pool
// closed) is the group's failure. Either way the task has its place in
// Wait's values.
//
// Do not call Go from one of the group's own tasks: at the limit, the task
// it waits for can be the caller itself, and it waits forever, as
// errgroup's Go does. Use TryGo there, or a Group made inside the task.
func (g *Group[T]) Go(fn func(context.Context) (T, error)) {
	g.usable("Go", fn != nil)
	t := g.newTask(fn)
	g.mu.Lock()
	g.addLocked(t)
	g.left++
	stopped, offered := g.stoppedLocked(), false
	for !stopped && !g.roomLocked(0) {
		if !offered && g.by == nil && g.hand.Load() == nil {
			g.hand.Store(t) // for take
			offered = true
		}
		g.awaitLocked(true)
		if offered && g.hand.Load() != t { // take started t
			g.mu.Unlock()
			return
		}
		stopped = g.stoppedLocked()
	}
	if offered {
		g.hand.Store(nil)
	}
	if !stopped {
		g.inPool++
		t.inGroup = true
	}
	g.mu.Unlock()
	switch {
	case stopped:
		g.refused(t, context.Cause(g.ctx))
	case g.enter(t, true) != nil: // refused: enter ended t
	case g.ctx.Err() != nil: // ended while t was queued: ended may have looked before
		g.b.dropBy(&t.node, nil, bulkhead.EventCancelled)
	case g.by != nil:
		g.mu.Lock()
		g.entered++
		g.mu.Unlock()
		g.cond.Broadcast()
	}
}

// ended runs once the group's context ends before Wait returns: the
// group's queued tasks leave the queue (one watch for the group, not one
// per queued task: G4_FanOut/parallel/ours_pool_Group allocations), and
// every waiting Go and Wait looks again.
func (g *Group[T]) ended() {
	g.mu.Lock()
	rest := g.restLocked()
	g.mu.Unlock() // a waiter that looked before ctx ended is asleep now
	for _, t := range rest {
		if t != nil {
			g.b.dropBy(&t.node, nil, bulkhead.EventCancelled)
		}
	}
	g.cond.Broadcast()
}

// TryGo submits fn as the group's next task if it can without waiting, and
// reports whether it did. It returns false when the group is at its limit,
// has failed or its context has ended, or the pool refused the task (full,
// or closed); a task not submitted takes no place in Wait's values.
func (g *Group[T]) TryGo(fn func(context.Context) (T, error)) bool {
	g.usable("TryGo", fn != nil)
	g.mu.Lock()
	if g.stoppedLocked() || !g.roomLocked(0) {
		g.mu.Unlock()
		return false
	}
	t := g.newTask(fn)
	t.gi = -1
	g.inPool++
	g.left++
	t.inGroup = true
	g.pending = append(g.pending, t)
	g.mu.Unlock()
	// Submitted without the lock: the pool publishes its events on this
	// goroutine, and a subscriber may call the group.
	if g.enter(t, false) != nil { // never in the pool: no place in Wait's values
		return false
	}
	g.mu.Lock()
	g.pending = slices.DeleteFunc(g.pending, func(p *gtask[T]) bool { return p == t })
	wake := g.placeLocked(t)
	g.entered++
	g.mu.Unlock()
	if g.ctx.Err() != nil { // ended while t was queued: ended may have looked before
		g.b.dropBy(&t.node, nil, bulkhead.EventCancelled)
	}
	if wake || g.by != nil {
		g.cond.Broadcast()
	}
	return true
}

// enter submits t to the pool (wait: as Go does) and, if the pool refuses
// it, ends it refused (TryGo: takes it back). A refusal is reported to the
// pool's subscribers on this goroutine before the pool returns: if one of
// them panics or calls runtime.Goexit, t still ends, with errUnreported.
func (g *Group[T]) enter(t *gtask[T], wait bool) (err error) {
	err = errUnreported
	defer func() {
		switch {
		case err == nil:
		case wait:
			g.refused(t, err)
		default:
			g.untry(t, err)
		}
	}()
	return g.b.enter(g.ctx, &t.node, wait)
}

// errUnreported is the error of a group's task that the pool refused while
// a subscriber of that refusal's event panicked or called runtime.Goexit.
var errUnreported = errors.New("pool: the task was refused, and a subscriber of that event panicked or called runtime.Goexit")

// untry takes back t, a task TryGo counted that the pool refused with err:
// it was never in the pool and has no place in Wait's values.
func (g *Group[T]) untry(t *gtask[T], err error) {
	g.mu.Lock()
	g.pending = slices.DeleteFunc(g.pending, func(p *gtask[T]) bool { return p == t })
	g.inPool--
	g.left--
	t.inGroup = false
	g.mu.Unlock()
	g.cond.Broadcast()
	t.err = err
	t.drop()
}

// placeLocked gives t, a task TryGo submitted, its index, once. If t has
// ended already, settle left it counted for this (see gtask.settle).
func (g *Group[T]) placeLocked(t *gtask[T]) (wake bool) {
	if t.gi < 0 {
		if g.addLocked(t); t.fn == nil {
			g.keepLocked(t)
			wake = g.countOutLocked()
		}
	}
	return wake
}

// addLocked gives t the next index.
func (g *Group[T]) addLocked(t *gtask[T]) {
	t.gi = len(g.ts)
	g.ts = append(g.ts, t)
	g.vals = append(g.vals, *new(T))
}

// Wait waits until every task the group submitted has ended, then cancels
// the group's context and returns the tasks' values in Go order (the zero
// value where a task did not succeed) and the group's first failure: a
// [*future.TaskError] with that task's index, unwrapping to its error (a
// [*bulkhead.PanicError] for a panic). Wait returns nil if every task
// succeeded.
func (g *Group[T]) Wait() ([]T, error) {
	g.usable("Wait", true)
	g.mu.Lock()
	for g.left > 0 {
		g.awaitLocked(g.by != nil) // else woken by the last task only (G4_FanOut/ours_pool_Group)
	}
	vals := slices.Clip(g.vals) // a later Go appends to a copy
	g.vals = vals
	err := g.err
	g.mu.Unlock()
	g.unwatch() // no goroutine for ended at Wait's own cancel
	g.cancel(nil)
	if err == nil {
		return vals, nil
	}
	return vals, err
}

// awaitLocked waits for a task of the group to end (not eager: the last),
// with g.mu held and released meanwhile. In a task of the pool (by), if the
// group's oldest task in the pool is queued, it runs it in by's slot
// instead; a task that Go of another goroutine has yet to queue wakes it
// once queued (entered), since by's slot may be the only one to run it.
func (g *Group[T]) awaitLocked(eager bool) {
	if g.by != nil {
		if t := g.oldestLocked(); t != nil {
			entered := g.entered
			g.mu.Unlock()
			busy := g.by.Help(&t.node, nil)
			if busy != nil {
				<-busy
			}
			g.mu.Lock()
			if busy != nil || !t.inGroup || g.entered != entered { // look again
				return
			}
		}
	}
	if eager {
		g.eager++
	}
	g.cond.Wait()
	if eager {
		g.eager--
	}
}

// usable panics for a nil or zero Group, or (fnOK false) a nil function.
func (g *Group[T]) usable(name string, fnOK bool) {
	if g == nil || g.b == nil {
		panic("pool: Group." + name + " called on a Group not made by NewGroup")
	}
	if !fnOK {
		panic("pool: Group." + name + " called with a nil function")
	}
}

// end is what the pool calls for a task of the group that failed (err; a
// panic as a *bulkhead.PanicError): from the task's worker before its slot
// is freed, or as it leaves the queue unrun; settle then counts it out of
// the pool. The first failure stops the group: Go and take submit nothing
// more, and its context is cancelled with the group's error as the cause,
// so that no worker starts its queued tasks (takeLocked sheds them) and
// ended takes the rest out of the queue. No callback runs here: a worker
// frees its slot before anything of a user's can end its goroutine.
func (g *Group[T]) end(n *node, err error) {
	if err == nil {
		return
	}
	g.mu.Lock()
	first := g.err == nil
	if first {
		t := n.j.(*gtask[T])
		if t.gi < 0 { // a TryGo's task that fails before TryGo returns
			g.placeLocked(t)
		}
		g.err = &future.TaskError{Index: t.gi, Err: err}
		g.cond.Broadcast()
	}
	cause := g.err
	g.mu.Unlock()
	if first {
		g.cancel(cause)
	}
}

// restLocked returns the group's tasks that may still be in the queue.
func (g *Group[T]) restLocked() []*gtask[T] {
	g.oldestLocked() // moves next on
	return slices.Concat(g.ts[g.next:], g.pending)
}

// take is what the worker of n, a task of the group leaving the pool,
// calls with the pool's lock held and nothing else waiting for n's slot:
// it returns the task of a Go waiting at the limit, counted in the pool in
// n's place, for the worker to start in n's slot, or nil. No queue, no
// other worker, no submit by Go (G4_FanOut/ours_pool_Group).
func (g *Group[T]) take(n *node) *node {
	if g.hand.Load() == nil {
		return nil
	}
	g.mu.Lock()
	t := g.hand.Load()
	if t == nil || !n.inGroup || g.stoppedLocked() || !g.roomLocked(1) {
		g.mu.Unlock()
		return nil
	}
	n.inGroup, t.inGroup = false, true
	g.hand.Store(nil)
	g.mu.Unlock()
	g.cond.Broadcast()
	return &t.node
}

// refused ends t, which the pool did not take, with err, the group's
// failure if it is the first.
func (g *Group[T]) refused(t *gtask[T], err error) {
	g.end(&t.node, err)
	t.err = err
	t.drop()
	t.settle()
}

// stoppedLocked reports whether Go must submit nothing more. Err is an
// atomic load; a select on Done would lock (G4_FanOut/ours_pool_Group).
func (g *Group[T]) stoppedLocked() bool {
	return g.err != nil || g.ctx.Err() != nil
}

// roomLocked reports whether the group may put one more task in the pool
// once out of its tasks there have left.
func (g *Group[T]) roomLocked(out int) bool {
	lim := g.limit
	if lim == 0 {
		lim = g.b.cfg.Load().MaxWorkers
	}
	return lim < 0 || g.inPool-out < lim
}

// oldestLocked moves next past the ended tasks and returns the oldest task
// of the group in the pool, or nil.
func (g *Group[T]) oldestLocked() *gtask[T] {
	for g.next < len(g.ts) && g.ts[g.next] == nil {
		g.next++
	}
	for _, ts := range [2][]*gtask[T]{g.ts[g.next:], g.pending} {
		for _, t := range ts {
			if t != nil && t.inGroup {
				return t
			}
		}
	}
	return nil
}
