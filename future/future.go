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
// completed (soon or later); *Future itself is a Canceler.
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
	hooks     atomic.Pointer[hook] // callbacks to run on completion; fired once run
}

// hook is one callback waiting for a future to complete.
type hook struct {
	fn   func()
	next *hook
}

// fired marks a future's hook list once the future has completed.
var fired = &hook{}

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
	for h := f.hooks.Swap(fired); h != nil; h = h.next {
		h.fn()
	}
	return true
}

// onDone calls fn once the future has completed: at once on this goroutine
// if it already has, otherwise on the goroutine that completes it.
func (f *Future[T]) onDone(fn func()) {
	h := &hook{fn: fn}
	for {
		head := f.hooks.Load()
		if head == fired {
			fn()
			return
		}
		h.next = head
		if f.hooks.CompareAndSwap(head, h) {
			return
		}
	}
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
	f.hooks.Store(fired)
	return f
}

// All waits for every future, in order, and returns their values in the same
// order. It returns early with the error of the first future (in argument
// order) that failed, or with ctx.Err() if ctx ends first. It does not cancel
// the others: cancel them if their results are no longer wanted.
func All[T any](ctx context.Context, fs ...*Future[T]) ([]T, error) {
	out := make([]T, len(fs))
	for i, f := range fs {
		v, err := f.Wait(ctx)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// errNoFutures is First's error when it is given nothing to wait for.
var errNoFutures = errors.New("future: First called with no futures")

// First waits for the first of the futures to complete and returns its value
// and error, whether it succeeded or failed; if several have completed, the
// one earliest in argument order wins. It returns ctx.Err() if ctx ends
// first, and an error if fs is empty. It does not cancel the others.
func First[T any](ctx context.Context, fs ...*Future[T]) (T, error) {
	var zero T
	if len(fs) == 0 {
		return zero, errNoFutures
	}
	for _, f := range fs {
		if f.state.Load() == complete {
			return f.val, f.err
		}
	}
	won := make(chan *Future[T], 1)
	for _, f := range fs {
		f.onDone(func() {
			select {
			case won <- f:
			default:
			}
		})
	}
	select {
	case f := <-won:
		return f.val, f.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Then returns a future that completes with fn's result once f succeeds, or
// with f's error (fn not called) once f fails. fn runs on the goroutine that
// completes f (a pool worker, a Promise's caller), or at once on the caller
// of Then if f has already completed, so keep it short and non-blocking; a
// panic in fn completes the new future with a [*bulkhead.PanicError].
// Cancelling the new future cancels f.
func Then[T, U any](f *Future[T], fn func(T) (U, error)) *Future[U] {
	p := NewPromise[U](f)
	f.onDone(func() {
		if f.err != nil {
			var zero U
			p.Complete(zero, f.err)
			return
		}
		v, err := callThen(fn, f.val)
		p.Complete(v, err)
	})
	return p.Future()
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
