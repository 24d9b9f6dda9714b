package future

import (
	"context"
	"errors"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/bulkhead-go/bulkhead"
)

// ErrNotDone is what [Future.Result] returns for a future that has not
// completed yet.
var ErrNotDone = errors.New("future: not done")

// Canceler is what [Future.Cancel] asks to stop the work behind a pending
// future made by a [Promise]. Its Cancel must see to it that the future is
// completed (sooner or later); *Future itself is a Canceler.
type Canceler interface {
	Cancel()
}

const (
	unready    uint32 = iota // a Promise before Init
	pending                  // waiting for its result
	completing               // the result is being stored
	complete
)

// Future is the result of work that may not have finished yet: a value of
// type T or an error. It completes exactly once; any number of goroutines may
// wait on it. Futures come from a [Promise], [Completed], [Then] and from
// the pool bulkhead's Submit and Go; the zero Future is not usable.
type Future[T any] struct {
	state     atomic.Uint32
	cancelled atomic.Bool    // Cancel has called canceler
	wg        sync.WaitGroup // 1 while pending: Wait without a deadline parks here
	done      atomic.Value   // chan struct{}, made by the first Done (or Wait with a ctx that can end)
	val       T
	err       error
	canceler  Canceler
	// hooks are the callbacks to run on completion, oldest first. head is
	// read without the lock, so that completing a future nobody hooked
	// costs one atomic load; it and the links are changed under mu.
	mu   sync.Mutex
	head atomic.Pointer[hook]
	tail *hook
}

// hook is one callback waiting for a future to complete. Whoever hooks a
// future embeds a hook and sets x to itself, so that hooking costs no
// allocation of its own.
type hook struct {
	x          hookTarget
	idx        int // for x: which of its futures this hook watches
	prev, next *hook
	linked     bool // on a future's list; guarded by that future's mu
}

// hookTarget is what a hook calls when its future completes; failed reports
// whether it completed with an error.
type hookTarget interface {
	fire(idx int, failed bool)
}

// closedChan is the Done channel of futures made complete.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Wait blocks until the future completes or ctx ends, and returns the value
// and error it completed with, or the zero value and ctx.Err(). ctx ending
// stops the wait, not the work: call [Future.Cancel] for that. Wait does not
// allocate (see [Future.Done] for the one channel a future may make).
func (f *Future[T]) Wait(ctx context.Context) (T, error) {
	if f.state.Load() == complete {
		return f.val, f.err
	}
	cdone := ctx.Done()
	if cdone == nil { // ctx cannot end: no channel, no select
		f.wg.Wait()
		return f.val, f.err
	}
	done := f.Done()
	select {
	case <-done:
		return f.val, f.err
	case <-cdone:
		if f.state.Load() == complete { // both ready: the result wins
			return f.val, f.err
		}
		var zero T
		return zero, ctx.Err()
	}
}

// Done returns a channel that is closed when the future completes, for use in
// a select. A pending future makes this channel the first time it is asked
// for (by Done, or by Wait with a context that can end), so futures that are
// only waited for without a deadline never allocate one.
func (f *Future[T]) Done() <-chan struct{} {
	if d := f.done.Load(); d != nil {
		return d.(chan struct{})
	}
	if f.state.Load() == complete {
		return closedChan
	}
	c := make(chan struct{})
	if !f.done.CompareAndSwap(nil, c) {
		return f.done.Load().(chan struct{}) // another caller made it first
	}
	// complete may have run between the state check and the swap, and
	// missed c: then close it here (whoever swaps it out closes it).
	if f.state.Load() == complete && f.done.CompareAndSwap(c, closedChan) {
		close(c)
	}
	return c
}

// Result returns the value and error the future completed with, without
// blocking; before it completes it returns the zero value and [ErrNotDone].
func (f *Future[T]) Result() (T, error) {
	if f.state.Load() != complete {
		var zero T
		return zero, ErrNotDone
	}
	return f.val, f.err
}

// Cancel asks for the work behind a pending future to stop; it does nothing
// once the future has completed. A pool task still in the queue never runs
// and its future fails at once with [context.Canceled]; a running task has
// its context cancelled, and its future completes when it returns. A future
// of a [Promise] made with a Canceler calls that Canceler (the first time);
// one made without fails at once with context.Canceled.
func (f *Future[T]) Cancel() {
	if f.state.Load() != pending {
		return
	}
	if f.canceler == nil {
		var zero T
		f.complete(zero, context.Canceled)
		return
	}
	if f.cancelled.CompareAndSwap(false, true) {
		f.canceler.Cancel()
	}
}

// complete stores the result and releases the waiters, once; it reports
// whether this call did it.
func (f *Future[T]) complete(v T, err error) bool {
	if !f.state.CompareAndSwap(pending, completing) {
		return false
	}
	f.val, f.err = v, err
	f.state.Store(complete)
	// Close the Done channel if someone made one. Done checks the state
	// after making it, so one of the two sees the other.
	if d := f.done.Load(); d != nil {
		if c := d.(chan struct{}); c != closedChan && f.done.CompareAndSwap(c, closedChan) {
			close(c)
		}
	}
	f.wg.Done()
	// onDone links a hook before it looks at the state, and this looks at
	// the list after storing the state: one of the two sees the other.
	if f.head.Load() != nil {
		f.mu.Lock()
		h := f.head.Load()
		for x := h; x != nil; x = x.next {
			x.linked = false
		}
		f.head.Store(nil)
		f.tail = nil
		f.mu.Unlock()
		runHooks(h, err != nil)
	}
	return true
}

// runHooks fires h and the hooks after it, in order. If one panics or calls
// runtime.Goexit, the rest still run (from a deferred call) before the
// panic or Goexit goes on unwinding the goroutine.
func runHooks(h *hook, failed bool) {
	for ; h != nil; h = h.next {
		fireGuarded(h, failed)
	}
}

func fireGuarded(h *hook, failed bool) {
	normal := false
	defer func() {
		if !normal {
			runHooks(h.next, failed)
		}
	}()
	h.x.fire(h.idx, failed)
	normal = true
}

// onDone arranges for h to fire once the future has completed: at once on
// this goroutine if it already has, otherwise on the goroutine that
// completes it, after the hooks linked before it. It reports whether h was
// linked, for unhook.
func (f *Future[T]) onDone(h *hook) bool {
	f.mu.Lock()
	h.prev, h.next, h.linked = f.tail, nil, true
	if f.tail == nil {
		f.head.Store(h)
	} else {
		f.tail.next = h
	}
	f.tail = h
	if f.state.Load() == complete { // complete may not have seen h: fire it here
		f.unlinkLocked(h)
		f.mu.Unlock()
		h.x.fire(h.idx, f.err != nil)
		return false
	}
	f.mu.Unlock()
	return true
}

// unhook takes h off the future's list if it has not fired yet.
func (f *Future[T]) unhook(h *hook) {
	f.mu.Lock()
	if h.linked {
		f.unlinkLocked(h)
	}
	f.mu.Unlock()
}

func (f *Future[T]) unlinkLocked(h *hook) {
	if h.prev == nil {
		f.head.Store(h.next)
	} else {
		h.prev.next = h.next
	}
	if h.next == nil {
		f.tail = h.prev
	} else {
		h.next.prev = h.prev
	}
	h.prev, h.next, h.linked = nil, nil, false
}

// Promise is the writing side of a [Future]: whoever holds it completes the
// future, once. Make one with [NewPromise], or embed a Promise value in a
// larger struct and call [Promise.Init], so that one allocation holds both
// (the pool bulkhead does this for each task).
type Promise[T any] struct {
	f Future[T]
}

// NewPromise returns a Promise whose future is pending. c, which may be nil,
// is what [Future.Cancel] calls while the future is pending.
func NewPromise[T any](c Canceler) *Promise[T] {
	p := new(Promise[T])
	p.Init(c)
	return p
}

// Init prepares a Promise held by value, as [NewPromise] does. Call it once,
// before the Promise or its Future is used; calling it twice panics.
func (p *Promise[T]) Init(c Canceler) {
	if !p.f.state.CompareAndSwap(unready, pending) {
		panic("future: Promise.Init called twice")
	}
	p.f.canceler = c
	p.f.wg.Add(1)
}

// Future returns the future this Promise completes.
func (p *Promise[T]) Future() *Future[T] { return &p.f }

// Complete completes the future with v and err, and reports whether this
// call did so; every call after the first (or after Cancel completed the
// future) does nothing and returns false.
func (p *Promise[T]) Complete(v T, err error) bool {
	if p.f.state.Load() == unready {
		panic("future: Promise used before Init")
	}
	return p.f.complete(v, err)
}

// Completed returns a future that has already completed with v and err.
func Completed[T any](v T, err error) *Future[T] {
	f := &Future[T]{val: v, err: err}
	f.done.Store(closedChan)
	f.state.Store(complete)
	return f
}

// All waits for every future and returns their values in argument order.
// It returns early, with nil values, as soon as one of them fails: with the
// error of the first to fail in time (of those that had already failed when
// All was called, the first in argument order), or with ctx.Err() if ctx
// ends first. It does not cancel the others: cancel them if their results
// are no longer wanted. All starts no goroutine: it hooks each pending
// future, wakes once (when the last succeeds or the first fails), and takes
// its hooks off before it returns.
func All[T any](ctx context.Context, fs ...*Future[T]) ([]T, error) {
	i, err := await(ctx, fs, false)
	if err != nil {
		return nil, err
	}
	if i >= 0 {
		return nil, fs[i].err
	}
	out := make([]T, len(fs))
	for i, f := range fs {
		out[i] = f.val
	}
	return out, nil
}

// errNoFutures is First's error when it is given nothing to wait for.
var errNoFutures = errors.New("future: First called with no futures")

// First waits for the first of the futures to complete and returns its value
// and error, whether it succeeded or failed; if several had completed when
// First was called, the one earliest in argument order wins. It returns
// ctx.Err() if ctx ends first, and an error if fs is empty. It does not
// cancel the others, and leaves no hook on them once it returns.
func First[T any](ctx context.Context, fs ...*Future[T]) (T, error) {
	var zero T
	if len(fs) == 0 {
		return zero, errNoFutures
	}
	i, err := await(ctx, fs, true)
	if err != nil {
		return zero, err
	}
	return fs[i].val, fs[i].err
}

// waiter is what All and First wait on: one hook on each pending future,
// and one wake-up once the outcome is known.
type waiter struct {
	anyDone bool          // First: the first completion decides; All: the first failure, or the last success
	left    atomic.Int64  // All: successes still awaited, plus one while hooks are being added
	first   atomic.Int64  // 1 + index of the deciding future; 0 until then
	wake    chan struct{} // buffered 1; only the decider, or the last success, sends
	hooks   []hook
}

func (w *waiter) fire(idx int, failed bool) {
	if failed || w.anyDone {
		if w.first.CompareAndSwap(0, int64(idx)+1) {
			w.wake <- struct{}{}
		}
		return
	}
	if w.left.Add(-1) == 0 {
		w.wake <- struct{}{}
	}
}

// await waits for the outcome of fs for All (anyDone false: every future
// succeeds, or one fails) or First (anyDone true: one completes). It
// returns the index of the deciding future, -1 if every one succeeded, or
// ctx.Err(). It leaves no hook behind.
func await[T any](ctx context.Context, fs []*Future[T], anyDone bool) (int, error) {
	var w *waiter
	unhook := func() {
		if w != nil {
			for i := range w.hooks {
				fs[w.hooks[i].idx].unhook(&w.hooks[i])
			}
		}
	}
	for i, f := range fs {
		if f.state.Load() == complete {
			if anyDone || f.err != nil {
				unhook()
				return i, nil
			}
			continue
		}
		if w == nil {
			// hooks never grows past this capacity: they are linked by address.
			w = &waiter{anyDone: anyDone, wake: make(chan struct{}, 1), hooks: make([]hook, 0, len(fs)-i)}
			w.left.Store(1) // held until every hook is on
		}
		w.hooks = append(w.hooks, hook{idx: i})
		h := &w.hooks[len(w.hooks)-1]
		h.x = w
		if !anyDone {
			w.left.Add(1)
		}
		f.onDone(h)
	}
	if w == nil {
		return -1, nil // All: every future had succeeded already
	}
	if !anyDone && w.left.Add(-1) == 0 {
		w.wake <- struct{}{}
	}
	select {
	case <-w.wake:
	case <-ctx.Done():
		select {
		case <-w.wake: // both ready: the result wins, as in Wait
		default:
			unhook()
			return 0, ctx.Err()
		}
	}
	unhook()
	if i := w.first.Load(); i > 0 {
		return int(i - 1), nil
	}
	return -1, nil
}

// Then returns a future that completes with fn's result once f succeeds, or
// with f's error (fn not called) once f fails. fn runs on the goroutine that
// completes f, or at once on the caller of Then if f has already completed.
// For a pool task that is the worker, after the task's slot has been freed
// but before the worker takes its next task, so fn must be quick and must
// not block. Callbacks on one future run in the order Then was called, and
// a panic or runtime.Goexit in one does not stop the others; a panic in fn
// completes the new future with a [*bulkhead.PanicError]. Cancelling the new
// future cancels f.
func Then[T, U any](f *Future[T], fn func(T) (U, error)) *Future[U] {
	t := &then[T, U]{src: f, fn: fn}
	t.p.Init(f)
	t.h.x = t
	f.onDone(&t.h)
	return t.p.Future()
}

// then is one Then: its hook on the source future and the new future, in
// one allocation.
type then[T, U any] struct {
	h   hook
	p   Promise[U]
	src *Future[T]
	fn  func(T) (U, error)
}

func (t *then[T, U]) fire(int, bool) {
	if err := t.src.err; err != nil {
		var zero U
		t.p.Complete(zero, err)
		return
	}
	v, err := callThen(t.fn, t.src.val)
	t.p.Complete(v, err)
}

func callThen[T, U any](fn func(T) (U, error), v T) (u U, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero U
			u, err = zero, &bulkhead.PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return fn(v)
}
