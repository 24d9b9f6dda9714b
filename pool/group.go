package pool

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"time"

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
	// waitCtx is ctx without its cancellation, for waits on the group's
	// futures: they do not allocate, and inside a task of the pool they
	// help (see "Waiting inside a task"). A failure ends the futures.
	waitCtx valuesOnly

	mu sync.Mutex
	// ts are the tasks in Go order. ts[:next] have ended: Go moved their
	// values to vals and cleared their entries, so that an ended task is
	// garbage at once: a fan-out keeps about its limit of tasks alive, not
	// all of them, and the collector marks less (G4_FanOut/ours_pool_Group).
	ts   []*task[T]
	vals []T // len(vals) == next
	// pending are TryGo's tasks being submitted, not yet in ts: a task
	// takes its place only once the pool took it, or when it fails first.
	pending []*task[T]
	next    int
	inPool  int // tasks submitted and not yet out of the pool (see end)
	limit   int // SetLimit's; 0: the pool's MaxWorkers
	err     *future.TaskError
	// hand is the task of a Go waiting at the limit, for the worker of a
	// task of the group leaving the pool to start in that task's slot (see
	// take): no queue, no other worker (G4_FanOut/ours_pool_Group). Whoever
	// clears hand sends on handed whether it started the task. A group made
	// in a pool task's context waits on its oldest task instead, which helps.
	hand   *task[T]
	handed chan bool
	helps  bool
}

// NewGroup returns an empty Group that runs its tasks on b, with a context
// derived from ctx that is cancelled, with the failure as its cause, when a
// task of the group fails, and once Wait returns.
func NewGroup[T any](ctx context.Context, b *Bulkhead) *Group[T] {
	if ctx == nil || b == nil {
		misuse("NewGroup", ctx, b)
	}
	_, helps := ctx.Value(join.Key).(*node)
	g := &Group[T]{b: b, handed: make(chan bool, 1), helps: helps}
	g.ctx, g.cancel = context.WithCancelCause(ctx)
	g.waitCtx = valuesOnly{g.ctx}
	return g
}

// valuesOnly is [context.WithoutCancel] as a pointer: the standard one's
// Value boxes it, an allocation per wait (G4_FanOut/ours_pool_Group).
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
	g.usable("SetLimit", true)
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
//
// Do not call Go from one of the group's own tasks: at the limit, the task
// it waits for can be the caller itself, and it waits forever, as
// errgroup's Go does. Use TryGo there, or a Group made inside the task.
func (g *Group[T]) Go(fn func(context.Context) (T, error)) {
	g.usable("Go", fn != nil)
	t := newTask(g.b, g.ctx, fn)
	t.grp = g
	g.mu.Lock()
	t.gi = len(g.ts)
	g.ts = append(g.ts, t)
	g.harvestLocked()
	for !g.stoppedLocked() && !g.roomLocked() {
		if g.hand == nil && !g.helps {
			g.hand = t
			g.mu.Unlock()
			if <-g.handed { // started by take
				return
			}
			g.mu.Lock()
			continue
		}
		oldest := g.oldestLocked()
		g.mu.Unlock()
		_, _ = oldest.p.Future().Wait(&g.waitCtx)
		// Let the other tasks about to end do so, so that the next check
		// finds room for several Go calls: without it, at GOMAXPROCS 1
		// each Go waits for one task, and G4_FanOut/ours_pool_Group takes
		// 3 to 4 times errgroup's.
		runtime.Gosched()
		g.mu.Lock()
	}
	stopped := g.stoppedLocked()
	if !stopped {
		g.inPool++
		t.inGroup = true
	}
	g.mu.Unlock()
	if stopped {
		g.refused(t, context.Cause(g.ctx), false)
	} else if err := g.b.enter(g.ctx, &t.node, true); err != nil {
		g.refused(t, err, true)
	}
}

// TryGo submits fn as the group's next task if it can without waiting, and
// reports whether it did. It returns false when the group is at its limit,
// has failed or its context has ended, or the pool refused the task (full,
// or closed); a task not submitted takes no place in Wait's values.
func (g *Group[T]) TryGo(fn func(context.Context) (T, error)) bool {
	g.usable("TryGo", fn != nil)
	g.mu.Lock()
	if g.stoppedLocked() || !g.roomLocked() {
		g.mu.Unlock()
		return false
	}
	t := newTask(g.b, g.ctx, fn)
	t.grp, t.gi = g, -1
	g.inPool++
	t.inGroup = true
	g.pending = append(g.pending, t)
	g.mu.Unlock()
	// Submitted without the lock: the pool publishes its events on this
	// goroutine, and a subscriber may call the group.
	err := g.b.enter(g.ctx, &t.node, false)
	g.mu.Lock()
	g.pending = slices.DeleteFunc(g.pending, func(p *task[T]) bool { return p == t })
	if err != nil { // never in the pool: no place in Wait's values
		g.inPool--
		t.inGroup = false
		g.wakeLocked()
		g.mu.Unlock()
		t.err = err
		t.settle() // for a Go waiting for it as the oldest (oldestLocked)
		t.drop()
		return false
	}
	g.placeLocked(t)
	g.mu.Unlock()
	return true
}

// placeLocked gives t, a task TryGo submitted, its index, once.
func (g *Group[T]) placeLocked(t *task[T]) {
	if t.gi < 0 {
		t.gi = len(g.ts)
		g.ts = append(g.ts, t)
	}
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
	for i := g.next; i < len(g.ts); i++ {
		if t := g.ts[i]; t != nil { // nil: a concurrent Go moved its value
			g.mu.Unlock()
			_, _ = t.p.Future().Wait(&g.waitCtx)
			g.mu.Lock()
		}
	}
	vals := make([]T, len(g.ts))
	copy(vals, g.vals)
	for i := g.next; i < len(g.ts); i++ {
		if t := g.ts[i]; t != nil {
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

// usable panics for a nil or zero Group, or (fnOK false) a nil function.
func (g *Group[T]) usable(name string, fnOK bool) {
	if g == nil || g.b == nil {
		panic("pool: Group." + name + " called on a Group not made by NewGroup")
	}
	if !fnOK {
		panic("pool: Group." + name + " called with a nil function")
	}
}

// end is what the pool calls for a task of the group: with its failure
// (err; a panic as a *bulkhead.PanicError), first from the task's worker
// before its slot is freed and its future completed; then once it is out
// of the pool (out). The first failure stops the group: its queued tasks
// leave the queue, then its context is cancelled with the group's error as
// the cause (the context first would let the running tasks end and their
// workers start queued tasks meanwhile).
func (g *Group[T]) end(n *node, err error, out bool) {
	g.mu.Lock()
	if out && n.inGroup { // else take started another task in its place
		g.inPool--
		n.inGroup = false
		g.wakeLocked()
	}
	first := err != nil && g.err == nil
	if first {
		if n.gi < 0 { // a TryGo's task that fails before TryGo returns
			g.placeLocked(g.pendingLocked(n))
		}
		g.err = &future.TaskError{Index: n.gi, Err: err}
		g.wakeLocked()
	}
	cause := g.err
	var rest []*task[T]
	if first {
		rest = slices.Concat(g.ts[g.next:], g.pending)
	}
	g.mu.Unlock()
	if first {
		for _, t := range rest {
			if &t.node != n {
				g.b.dropQueued(&t.node, context.Canceled, bulkhead.EventCancelled)
			}
		}
		g.cancel(cause)
	}
}

// take is what the worker of n, a task of the group leaving the pool,
// calls with the pool's lock held when the pool has nothing queued or
// waiting for its slot: it returns the task of a Go waiting at the limit,
// counted in the group's place of n, for the worker to start in n's slot
// (G4_FanOut/ours_pool_Group), or nil.
func (g *Group[T]) take(n *node) *node {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.hand
	if t == nil || !n.inGroup || g.stoppedLocked() {
		return nil
	}
	g.inPool--
	room := g.roomLocked()
	g.inPool++
	if !room {
		return nil
	}
	n.inGroup, t.inGroup, g.hand = false, true, nil
	g.handed <- true
	return &t.node
}

// wakeLocked wakes a Go waiting at the limit to look again.
func (g *Group[T]) wakeLocked() {
	if g.hand != nil {
		g.hand = nil
		g.handed <- false
	}
}

// pendingLocked returns the pending task whose node is n.
func (g *Group[T]) pendingLocked(n *node) *task[T] {
	for _, t := range g.pending {
		if &t.node == n {
			return t
		}
	}
	panic("pool: a Group task with no index is not pending")
}

// refused completes t, which the pool did not take, with err, the group's
// failure if it is the first.
func (g *Group[T]) refused(t *task[T], err error, counted bool) {
	g.end(&t.node, err, counted)
	t.err = err
	t.settle()
	t.drop()
}

// harvestLocked moves the values of the tasks at next that have ended to
// vals, and forgets the tasks. ts ends with a task of Go's that has not.
func (g *Group[T]) harvestLocked() {
	for ; ; g.next++ {
		v, err := g.ts[g.next].p.Future().Result()
		if err == future.ErrNotDone {
			return
		}
		if err != nil {
			v = *new(T)
		}
		g.vals = append(g.vals, v)
		g.ts[g.next] = nil
	}
}

// stoppedLocked reports whether Go must submit nothing more. Err is an
// atomic load; a select on Done would lock (G4_FanOut/ours_pool_Group).
func (g *Group[T]) stoppedLocked() bool {
	return g.err != nil || g.ctx.Err() != nil
}

// roomLocked reports whether the group may put one more task in the pool.
func (g *Group[T]) roomLocked() bool {
	lim := g.limit
	if lim == 0 {
		lim = g.b.cfg.Load().MaxWorkers
	}
	return lim < 0 || g.inPool < lim
}

// oldestLocked returns the oldest task of the group in the pool; the group
// is at its limit, so there is one.
func (g *Group[T]) oldestLocked() *task[T] {
	g.harvestLocked()
	for _, ts := range [2][]*task[T]{g.ts[g.next:], g.pending} {
		for _, t := range ts {
			if t.inGroup {
				return t
			}
		}
	}
	panic("pool: Group at its limit with no task in the pool")
}

// taker is the Group's side of the hook in finishMore.
type taker interface{ take(n *node) *node }
