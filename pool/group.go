package pool

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
)

// Group runs a fan-out on a pool bulkhead as one call, as errgroup does on
// goroutines: Go each task, then Wait for their values in Go order. It fails
// fast: the first task to fail cancels the context of the others, its
// queued tasks leave the queue without running, and Go submits nothing
// more. At most a limit of the group's tasks are in the pool at once (by
// default the pool's MaxWorkers), so that a fan-out leaves the pool's queue
// to its other callers. Make one with [NewGroup]; a Group is safe for
// concurrent use, and Go may be called from its own tasks.
type Group[T any] struct {
	b      *Bulkhead
	ctx    context.Context // the tasks' context, cancelled by the first failure
	cancel context.CancelCauseFunc
	// waitCtx is ctx without its cancellation, for waiting on the group's
	// futures: such a wait does not allocate, and inside a task of the same
	// pool it starts a queued task of the group in the waiting task's slot
	// (see "Waiting inside a task"). A failure ends the futures themselves.
	waitCtx valuesOnly

	mu     sync.Mutex
	ts     []*task[T] // in Go order; nil where Go submitted nothing
	next   int        // ts[:next] have ended
	inPool int        // tasks submitted and not yet ended (see end)
	limit  int        // SetLimit's; 0: the pool's MaxWorkers
	err    *future.TaskError
}

// NewGroup returns an empty Group that runs its tasks on b, with a context
// derived from ctx that is cancelled, with the failure as its cause, when a
// task of the group fails, and once Wait returns.
func NewGroup[T any](ctx context.Context, b *Bulkhead) *Group[T] {
	if ctx == nil || b == nil {
		misuse("NewGroup", ctx, b)
	}
	g := &Group[T]{b: b}
	g.ctx, g.cancel = context.WithCancelCause(ctx)
	g.waitCtx = valuesOnly{g.ctx}
	return g
}

// valuesOnly is [context.WithoutCancel] as a pointer: the standard one's
// Value boxes it, an allocation for each wait (G4_FanOut/ours_pool_Group).
type valuesOnly struct{ context.Context }

func (*valuesOnly) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*valuesOnly) Done() <-chan struct{}       { return nil }
func (*valuesOnly) Err() error                  { return nil }

// SetLimit lets at most n of the group's tasks be in the pool at once,
// queued or running; Go waits for one of them to end before it submits
// more. The default is the pool's MaxWorkers. A negative n removes the
// group's own limit (the pool's bounds still apply, and the group may then
// fill the pool's queue). A new limit applies from the next Go; n == 0
// panics.
func (g *Group[T]) SetLimit(n int) {
	g.usable("SetLimit")
	if n == 0 {
		panic("pool: Group.SetLimit(0): a group that may hold no task in the pool could run nothing")
	}
	g.mu.Lock()
	g.limit = n
	g.mu.Unlock()
}

// Go submits fn as the group's next task. While the group is at its limit
// it waits for the oldest of the group's tasks in the pool to end (so a
// slow task holds back the ones after it); when the pool is full, it waits
// for room, first in, first out, as [Go] does. After the group has failed,
// or once its context has ended, Go returns at once and submits nothing; a
// failure to submit (the context ended, the pool closed) is the group's
// failure. Either way the task has its place in Wait's values.
func (g *Group[T]) Go(fn func(context.Context) (T, error)) {
	g.usable("Go")
	if fn == nil {
		panic("pool: Group.Go called with a nil function")
	}
	t := g.newTask(fn)
	g.mu.Lock()
	t.gi = len(g.ts)
	g.ts = append(g.ts, t)
	for !g.stoppedLocked() && !g.roomLocked() {
		oldest := g.oldestLocked()
		g.mu.Unlock()
		_, _ = oldest.p.Future().Wait(&g.waitCtx)
		// Let the other tasks about to end do so, so that the next check
		// finds room for several Go calls, not one: without it, at
		// GOMAXPROCS 1 each Go waits for one task, and
		// G4_FanOut/ours_pool_Group takes 3 to 4 times errgroup's.
		runtime.Gosched()
		g.mu.Lock()
	}
	if g.stoppedLocked() {
		g.mu.Unlock()
		g.refused(t, context.Cause(g.ctx), false)
		return
	}
	g.inPool++
	t.inGroup = true
	g.mu.Unlock()
	if err := g.b.enter(g.ctx, &t.node, true); err != nil {
		g.refused(t, err, true)
	}
}

// TryGo submits fn as the group's next task if it can without waiting, and
// reports whether it did. It returns false when the group is at its limit,
// has failed or its context has ended, or the pool refused the task (full,
// or closed); a task not submitted takes no place in Wait's values.
func (g *Group[T]) TryGo(fn func(context.Context) (T, error)) bool {
	g.usable("TryGo")
	if fn == nil {
		panic("pool: Group.TryGo called with a nil function")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stoppedLocked() || !g.roomLocked() {
		return false
	}
	t := g.newTask(fn)
	t.gi = len(g.ts)
	// Under g.mu, which Submit never waits on: the task's end waits for it.
	if g.b.enter(g.ctx, &t.node, false) != nil {
		return false
	}
	g.ts = append(g.ts, t)
	g.inPool++
	t.inGroup = true
	return true
}

// Wait waits until every task the group submitted has ended, then cancels
// the group's context and returns the tasks' values in Go order (the zero
// value where a task did not succeed) and the group's first failure: a
// [*future.TaskError] with that task's index, unwrapping to its error (a
// [*bulkhead.PanicError] for a panic). Wait returns nil if every task
// succeeded.
func (g *Group[T]) Wait() ([]T, error) {
	g.usable("Wait")
	g.mu.Lock()
	for i := g.next; i < len(g.ts); i++ {
		if t := g.ts[i]; t != nil {
			g.mu.Unlock()
			_, _ = t.p.Future().Wait(&g.waitCtx)
			g.mu.Lock()
		}
	}
	vals := make([]T, len(g.ts))
	for i, t := range g.ts {
		if t != nil {
			if v, err := t.p.Future().Result(); err == nil {
				vals[i] = v
			}
		}
	}
	err := g.err
	g.mu.Unlock()
	g.cancel(nil)
	if err == nil {
		return vals, nil
	}
	return vals, err
}

// usable panics for a nil or zero Group; name is the method called.
func (g *Group[T]) usable(name string) {
	if g == nil || g.b == nil {
		panic("pool: Group." + name + " called on a Group not made by NewGroup")
	}
}

func (g *Group[T]) newTask(fn func(context.Context) (T, error)) *task[T] {
	t := newTask(g.b, g.ctx, fn)
	t.grp = g
	return t
}

// end is what the pool calls for a task of the group: with its failure
// (err), first from the task's own worker, before its slot is freed and its
// future completed; then once it is out of the pool (out). A panic is a
// *bulkhead.PanicError, a runtime.Goexit an error too. The first failure
// stops the group: its tasks still queued leave the queue at once, then
// its context is cancelled, with the group's error as its cause (cancelling the
// context first would let the running tasks end and their workers start
// queued tasks meanwhile).
func (g *Group[T]) end(i int, err error, out bool) {
	g.mu.Lock()
	if out {
		g.inPool--
		g.ts[i].inGroup = false
	}
	first := err != nil && g.err == nil
	if first {
		g.err = &future.TaskError{Index: i, Err: err}
	}
	cause := g.err
	rest := g.ts[g.next:] // entries are never changed once appended
	g.mu.Unlock()
	if first {
		for _, t := range rest {
			if t != nil && t.gi != i {
				g.b.dropQueued(&t.node, context.Canceled, bulkhead.EventCancelled)
			}
		}
		g.cancel(cause)
	}
}

// refused completes task t, which the pool did not take, with err, and
// makes err the group's failure if it is the first.
func (g *Group[T]) refused(t *task[T], err error, counted bool) {
	g.end(t.gi, err, counted)
	t.err = err
	t.settle()
	t.drop()
}

// stoppedLocked reports whether Go must submit nothing more.
func (g *Group[T]) stoppedLocked() bool {
	if g.err != nil {
		return true
	}
	select {
	case <-g.ctx.Done():
		return true
	default:
		return false
	}
}

// roomLocked reports whether the group may put one more task in the pool.
func (g *Group[T]) roomLocked() bool {
	lim := g.limit
	if lim == 0 {
		lim = g.b.cfg.Load().MaxWorkers
	}
	return lim < 0 || g.inPool < lim
}

// oldestLocked returns the oldest task of the group in the pool. The group
// must be at its limit, so there is one.
func (g *Group[T]) oldestLocked() *task[T] {
	for ; g.ts[g.next] == nil || g.ts[g.next].ended(); g.next++ {
	}
	for _, t := range g.ts[g.next:] {
		if t != nil && t.inGroup {
			return t
		}
	}
	panic("pool: Group at its limit with no task in the pool")
}
