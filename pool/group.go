package pool

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
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
	done   <-chan struct{} // ctx.Done()
	// waitCtx is ctx without its cancellation, for waiting on the group's
	// futures: a wait with it does not allocate, and inside a task of the
	// same pool it starts a queued task of the group in the waiting task's
	// slot (see "Waiting inside a task"). A failure cancels the futures
	// themselves, so these waits end with it.
	waitCtx valuesOnly

	goMu sync.Mutex          // held by Go and TryGo from their check for room to storing the future
	mu   sync.Mutex          // guards what follows
	fs   []*future.Future[T] // in Go order; nil where Go submitted nothing
	live []int               // indexes of fs whose tasks may still be in the pool, oldest first
	// limit is SetLimit's; 0 until then: the pool's MaxWorkers (read when needed).
	limit int
	err   *future.TaskError // the first failure
	// started[i/startedChunk][i%startedChunk] is set by task i when it
	// starts, so that a failure cancels the queued tasks before the
	// context: see unlock. Chunks, so that a task's flag never moves.
	started [][]atomic.Bool
	// stopping: err is set and stop has not run yet; unlock runs it.
	stopping bool
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
	g.done = g.ctx.Done()
	g.waitCtx = valuesOnly{g.ctx}
	return g
}

// valuesOnly is [context.WithoutCancel] as a pointer: the standard one's
// Value boxes it, an allocation for each wait of a Group
// (BenchmarkGroupFanOut).
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
// for room, first in, first out, as [Go] does. After the group has failed, or once its context has ended, Go
// returns at once and submits nothing; a failure to submit (the context
// ended, the pool closed) is the group's failure. Either way the task has
// its place in Wait's values.
func (g *Group[T]) Go(fn func(context.Context) (T, error)) {
	g.usable("Go")
	if fn == nil {
		panic("pool: Group.Go called with a nil function")
	}
	g.goMu.Lock()
	defer g.goMu.Unlock()
	g.mu.Lock()
	i := len(g.fs)
	g.fs = append(g.fs, nil)
	for !g.stoppedLocked() && !g.roomLocked() {
		oldest := g.fs[g.live[0]]
		g.mu.Unlock()
		_, _ = oldest.Wait(&g.waitCtx)
		// Let the other tasks that are about to end do so, so that the
		// next check finds room for several Go calls, not one: without
		// it, at GOMAXPROCS 1 each Go waits for one task, and the fan-out
		// of G4_FanOut/ours_pool_Group takes 3 to 4 times errgroup's.
		runtime.Gosched()
		g.mu.Lock()
	}
	if g.stoppedLocked() {
		g.failLocked(i, context.Cause(g.ctx))
		g.unlock()
		return
	}
	st := g.startedLocked(i)
	g.mu.Unlock()
	f, err := Go(g.ctx, g.b, g.task(i, st, fn))
	g.store(i, f, err)
}

// TryGo submits fn as the group's next task if it can without waiting, and
// reports whether it did. It returns false when the group is at its limit
// or busy in another Go, has failed or its context has ended, or the pool
// refused the task (full, or closed); a task not submitted takes no place in
// Wait's values.
func (g *Group[T]) TryGo(fn func(context.Context) (T, error)) bool {
	g.usable("TryGo")
	if fn == nil {
		panic("pool: Group.TryGo called with a nil function")
	}
	if !g.goMu.TryLock() {
		return false
	}
	defer g.goMu.Unlock()
	g.mu.Lock()
	ok := !g.stoppedLocked() && g.roomLocked()
	i := len(g.fs)
	st := g.startedLocked(i)
	g.unlock()
	if !ok {
		return false
	}
	f, err := Submit(g.ctx, g.b, g.task(i, st, fn))
	if err != nil {
		return false
	}
	g.mu.Lock()
	g.fs = append(g.fs, nil)
	g.mu.Unlock()
	g.store(i, f, nil)
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
	for {
		g.mu.Lock()
		g.popLocked()
		var oldest *future.Future[T]
		if len(g.live) > 0 {
			oldest = g.fs[g.live[0]]
		}
		g.unlock()
		if oldest != nil {
			_, _ = oldest.Wait(&g.waitCtx)
			continue
		}
		// Nothing left in the pool. Taking goMu waits for a Go that is
		// submitting meanwhile (from a task, or another goroutine).
		g.goMu.Lock()
		g.mu.Lock()
		if len(g.live) > 0 {
			g.mu.Unlock()
			g.goMu.Unlock()
			continue
		}
		vals := make([]T, len(g.fs))
		for i, f := range g.fs {
			if f != nil {
				if v, err := f.Result(); err == nil {
					vals[i] = v
				}
			}
		}
		err := g.err
		g.mu.Unlock()
		g.goMu.Unlock()
		g.cancel(nil)
		if err == nil {
			return vals, nil
		}
		return vals, err
	}
}

// usable panics for a nil or zero Group; name is the method called.
func (g *Group[T]) usable(name string) {
	if g == nil || g.b == nil {
		panic("pool: Group." + name + " called on a Group not made by NewGroup")
	}
}

// task wraps fn so that its failure (an error, or a panic, recovered into a
// *bulkhead.PanicError as the pool would) fails the group at once, from
// the task's own goroutine, before its future completes. A task that calls
// runtime.Goexit fails the group once its future is seen.
func (g *Group[T]) task(i int, started *atomic.Bool, fn func(context.Context) (T, error)) func(context.Context) (T, error) {
	return func(ctx context.Context) (v T, err error) {
		started.Store(true)
		returned := false
		defer func() {
			if !returned {
				r := recover()
				if r == nil {
					return // runtime.Goexit: the pool fails the future
				}
				var zero T
				v, err = zero, &bulkhead.PanicError{Value: r, Stack: debug.Stack()}
			}
			if err != nil {
				g.mu.Lock()
				g.failLocked(i, err)
				g.unlock()
			}
		}()
		v, err = fn(ctx)
		returned = true
		return v, err
	}
}

// store records the outcome of submitting task i.
func (g *Group[T]) store(i int, f *future.Future[T], err error) {
	g.mu.Lock()
	if err != nil {
		g.failLocked(i, err)
	} else {
		g.fs[i] = f
		g.live = append(g.live, i)
		if g.err != nil && !g.stopping {
			defer f.Cancel() // the group failed while f was being submitted
		}
	}
	g.unlock()
}

// stoppedLocked reports whether Go must submit nothing more.
func (g *Group[T]) stoppedLocked() bool {
	if g.err != nil {
		return true
	}
	select {
	case <-g.done: // cheaper than g.ctx.Err(), which locks (G4_FanOut/ours_pool_Group)
		return true
	default:
		return false
	}
}

// roomLocked reports whether the group may put one more task in the pool,
// forgetting the oldest tasks while they have ended. (A later task that
// ended before an older one still counts until that one ends: the price
// of waiting on one future, the oldest, without allocating.)
func (g *Group[T]) roomLocked() bool {
	lim := g.limit
	if lim == 0 {
		lim = g.b.Config().MaxWorkers
	}
	if lim < 0 || len(g.live) < lim {
		return true
	}
	g.popLocked()
	return len(g.live) < lim
}

// popLocked forgets the oldest tasks while they have ended.
func (g *Group[T]) popLocked() {
	k := 0
	for k < len(g.live) && g.endedLocked(g.live[k]) {
		k++
	}
	if k > 0 { // in place, so that appending reuses the room
		g.live = g.live[:copy(g.live, g.live[k:])]
	}
}

// endedLocked reports whether task i's future has completed; a failure not
// reported by the task itself (it was dropped from the queue, or called
// runtime.Goexit) fails the group here.
func (g *Group[T]) endedLocked(i int) bool {
	_, err := g.fs[i].Result()
	if err == future.ErrNotDone {
		return false
	}
	if err != nil {
		g.failLocked(i, err)
	}
	return true
}

// failLocked records task i's failure if it is the group's first.
func (g *Group[T]) failLocked(i int, err error) {
	if g.err == nil {
		g.err = &future.TaskError{Index: i, Err: err}
		g.stopping = true
	}
}

// unlock releases g.mu and, after the group's first failure, stops the
// group: it cancels the group's tasks still in the pool (the queued ones
// leave the queue at once without running), then the context, with the
// failure as its cause.
func (g *Group[T]) unlock() {
	if !g.stopping {
		g.mu.Unlock()
		return
	}
	g.stopping = false
	err := g.err
	var queued []*future.Future[T]
	for _, i := range g.live {
		if !g.startedLocked(i).Load() {
			queued = append(queued, g.fs[i])
		}
	}
	g.mu.Unlock()
	// The queued tasks first: cancelling the context first would let the
	// running tasks end and their workers start queued tasks meanwhile.
	// The running ones end with the context, and see the failure as its
	// cause (a task that starts meanwhile is cancelled, and sees
	// context.Canceled).
	for _, f := range queued {
		f.Cancel()
	}
	g.cancel(err)
}

const startedChunk = 64

// startedLocked returns task i's started flag.
func (g *Group[T]) startedLocked(i int) *atomic.Bool {
	for len(g.started) <= i/startedChunk {
		g.started = append(g.started, make([]atomic.Bool, startedChunk))
	}
	return &g.started[i/startedChunk][i%startedChunk]
}
