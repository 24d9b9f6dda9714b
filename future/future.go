package future

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/bulkhead-go/bulkhead/internal/join"
)

// ErrNotDone is what [Future.Result] and [Settle] report for a pending future.
var ErrNotDone = errors.New("future: not done")

var errThenExited = errors.New("future: the Then function panicked or called runtime.Goexit") // fails such a Then

// Canceler is what [Future.Cancel] asks to stop the work behind a pending
// future made by a [Promise]; its Cancel must see the future completed.
type Canceler interface{ Cancel() }

// The state word: the state in its low two bits, above them how many
// callers use the canceler (dropped once complete and unused).
const (
	unready    uint32 = iota // a Promise before Init
	pending                  // waiting for its result
	completing               // the result is being stored
	complete

	stateMask = 3
	oneUser   = 4
)

// Future is the result of work that may not have finished yet: a value of
// type T or an error, set once. Futures come from a [Promise], [Completed],
// [Then] and the pool bulkhead; the zero Future is not usable.
type Future[T any] struct {
	state     atomic.Uint32
	cancelled atomic.Bool            // Cancel has called canceler
	park      atomic.Pointer[parker] // where a Wait without a deadline parks; &woken once complete
	done      atomic.Value           // chan struct{}, made by the first Done (or Wait with a ctx that can end)
	val       T
	err       error
	canceler  Canceler
	mu        sync.Mutex // guards the hooks to run on completion, newest first (head is also read without it)
	head      atomic.Pointer[hook]
}

// hook is one callback waiting for a future, embedded by whoever hooks (x).
type hook struct {
	x          hookTarget
	prev, next *hook
	idx        int32 // for x: which of its futures this hook watches (40 bytes, not 48: G4_FanOut)
	linked     bool  // on a future's list; guarded by that future's mu
}

// hookTarget is what a hook calls; fire returns a future it completed, or nil.
type hookTarget interface {
	fire(idx int, failed bool) due
}

// due is a completed future whose hooks a completer fires (runHooks).
type due interface {
	take(drop, join bool) (*hook, bool)
}

var firing hook // ends a complete future's list while its completer fires it (onDone)

// closedChan is the Done channel of futures made complete.
var closedChan = make(chan struct{})

func init() { close(closedChan) }

func (f *Future[T]) isComplete() bool { return f.state.Load()&stateMask == complete }

// usable panics, naming the call, if f is nil or a zero Future.
func (f *Future[T]) usable(name string) {
	if f == nil {
		panic("future: " + name + " called on a nil *Future")
	}
	if f.state.Load() == unready {
		panic("future: " + name + " called on a zero Future (futures come from a Promise, Completed, Then or a pool)")
	}
}

// Wait blocks until the future completes or ctx ends, and returns its value
// and error, or the zero value and ctx.Err() (the work goes on). Inside a
// pool task, with the task's context, Wait on a queued task of the pool
// runs it in the task's slot (the pool package's "Waiting inside a task").
func (f *Future[T]) Wait(ctx context.Context) (v T, err error) {
	if ctx == nil || f == nil {
		f.usable("Wait")
		panic("future: Wait called with a nil Context")
	}
	if f.isComplete() {
		return f.val, f.err
	}
	f.usable("Wait")
	cdone := ctx.Done()
	if h, ok := ctx.Value(join.Key).(join.Helper); ok { // inside a pool task: see await
		for busy := h.Help(f.source(), nil); busy != nil; busy = h.Help(f.source(), nil) {
			select {
			case <-busy:
			case <-f.Done():
			case <-cdone:
			}
			if cdone != nil && !f.isComplete() && ctx.Err() != nil {
				break // ctx ended: the select below returns its error
			}
		}
	}
	if cdone == nil { // ctx cannot end: no channel, no select
		p := parkers.Get().(*parker)
		if p.state = &f.state; f.park.CompareAndSwap(nil, p) {
			for !f.isComplete() {
				p.c.Wait()
			}
		} else if !f.isComplete() { // another Wait parks there
			<-f.Done()
		}
		parkers.Put(p)
		return f.val, f.err
	}
	c, _ := f.own()                   // a pool task's own future, not a Then stage of one
	if s, ok := c.(join.Signal); ok { // maybe one channel for both ends
		if c := s.Signal(cdone); c != nil {
			if <-c; f.isComplete() {
				return f.val, f.err
			}
		}
	}
	select {
	case <-f.Done():
	case <-cdone:
		if !f.isComplete() { // both ready: the result wins
			return v, ctx.Err()
		}
	}
	return f.val, f.err
}

// parker is where a Wait without a deadline parks: a Cond, no mutex (Unlock,
// between Cond.Wait's ticket and sleep, broadcasts a completion missed).
// G3_Join/ours_pool_Submit_Wait: 130 instructions fewer than a WaitGroup.
type parker struct {
	c     sync.Cond
	state *atomic.Uint32 // of the future waited for
}

var parkers = sync.Pool{New: func() any { p := new(parker); p.c.L = p; return p }}

var woken parker // a complete future's park

func (p *parker) Lock() {}
func (p *parker) Unlock() {
	if p.state.Load()&stateMask == complete {
		p.c.Broadcast()
	}
}

// Done returns a channel that is closed when the future completes, for use in
// a select, made the first time it is asked for.
func (f *Future[T]) Done() <-chan struct{} {
	if d := f.done.Load(); d != nil {
		return d.(chan struct{})
	}
	if f.isComplete() {
		return closedChan
	}
	f.usable("Done")
	c := make(chan struct{})
	if !f.done.CompareAndSwap(nil, c) {
		return f.done.Load().(chan struct{}) // another caller made it first
	}
	// complete may have missed c: close it here (whoever swaps it out does).
	if f.isComplete() && f.done.CompareAndSwap(c, closedChan) {
		close(c)
	}
	return c
}

// Result returns the value and error the future completed with, without
// blocking; before it completes it returns the zero value and [ErrNotDone].
func (f *Future[T]) Result() (v T, err error) {
	if !f.isComplete() {
		return v, ErrNotDone
	}
	return f.val, f.err
}

// Cancel asks for the work behind a pending future to stop. A queued pool
// task fails at once with [context.Canceled], a running one has its context
// cancelled; a [Then] future fails at once, its source running on; a
// [Promise]'s future calls its Canceler once (without one, fails at once).
func (f *Future[T]) Cancel() {
	if !f.acquire() {
		return
	}
	c := f.canceler
	if c != nil && f.cancelled.CompareAndSwap(false, true) {
		c.Cancel()
	}
	if f.release(); c == nil {
		var zero T
		f.complete(zero, context.Canceled)
	}
}

// acquire lets the caller use f.canceler until release, if f is pending.
func (f *Future[T]) acquire() bool { return f.bump(oneUser) }

// bump adds d to the state word if f is pending, and reports whether it did.
func (f *Future[T]) bump(d uint32) bool {
	for s := f.state.Load(); s&stateMask == pending; s = f.state.Load() {
		if f.state.CompareAndSwap(s, s+d) {
			return true
		}
	}
	return false
}

// release ends a use of f.canceler (the last one drops it, if complete).
func (f *Future[T]) release() {
	if f.state.Add(^uint32(oneUser-1)) == complete {
		f.canceler = nil
	}
}

// source is what a wait inside a pool task hands to the pool: the canceler
// of a pending future, or of the source of a Then chain (a loop: any chain
// in constant stack).
func (f *Future[T]) source() any {
	c, up := f.own()
	for up != nil {
		c, up = up.own()
	}
	return c
}

// own returns the canceler of f if f is pending, and the future of which f
// is a Then stage, if it is one.
func (f *Future[T]) own() (any, stage) {
	if !f.acquire() {
		return nil, nil
	}
	defer f.release()
	if t, ok := f.canceler.(interface{ up() stage }); ok {
		return t, t.up()
	}
	return f.canceler, nil
}

// stage is a future seen from a Then stage of it (see source).
type stage interface{ own() (any, stage) }

// complete is settle, then the callbacks.
func (f *Future[T]) complete(v T, err error) bool {
	d, ok := f.settle(v, err)
	if d != nil { // no call without hooks (G3_Join/ours_pool_Submit_Wait)
		runHooks(d)
	}
	return ok
}

// settle stores the result and wakes the waiters, once; it returns f if hooks
// may be due (for runHooks), and whether this call completed f.
func (f *Future[T]) settle(v T, err error) (due, bool) {
	if !f.bump(1) { // pending → completing, users kept
		return nil, false
	}
	f.val, f.err = v, err
	if f.state.Add(1) == complete { // completing → complete, and nobody uses the canceler: forget it
		f.canceler = nil
	}
	// Done checks the state after making its channel: one of the two sees it.
	if ch, _ := f.done.Load().(chan struct{}); ch != nil && ch != closedChan && f.done.CompareAndSwap(ch, closedChan) {
		close(ch)
	}
	if p := f.park.Swap(&woken); p != nil {
		p.c.Broadcast()
	}
	if f.head.Load() == nil { // onDone links before it looks at the state: one of the two sees it
		return nil, true
	}
	return f, true
}

// take hands the completer the hooks due, oldest first; none left (or drop)
// ends the firing. A completer's first take (join) takes nothing if another
// fires f already (onDone's, racing complete's): that one takes the rest.
func (f *Future[T]) take(drop, join bool) (*hook, bool) {
	f.mu.Lock()
	for x := f.head.Load(); join && x != nil; x = x.next {
		if x == &firing {
			f.mu.Unlock()
			return nil, false
		}
	}
	var h *hook
	for x := f.head.Load(); x != nil && x != &firing; {
		next := x.next
		x.prev, x.next, x.linked = nil, h, false
		h, x = x, next
	}
	if f.head.Store(&firing); h == nil || drop {
		f.head.Store(nil)
	}
	f.mu.Unlock()
	return h, f.err != nil
}

// runHooks fires the hooks due on f, and those of the futures this completes,
// depth first, in a loop (constant stack). After a panic, those left miss it.
func runHooks(f due) {
	if f == nil {
		return
	}
	type rest struct {
		h      *hook
		failed bool
		f      due
	}
	later := make([]rest, 0, 2) // on the stack: completing allocates nothing (TestThenAndAllCosts)
	returned := false
	var h *hook // the one firing
	var failed bool
	defer func() {
		if !returned { // the gathers (All, Settle, First) after it still hear of it
			if h != nil {
				wake(h.next, failed)
			}
			for _, r := range append(later, rest{f: f}) {
				wake(r.h, r.failed)
				wake(r.f.take(true, false))
			}
		}
	}()
	join := true // f's first take
	for {
		h, failed = f.take(false, join)
		join = false
		if h == nil { // f is done: back to the one it interrupted
			if returned = len(later) == 0; returned {
				return
			}
			r := later[len(later)-1]
			later, h, failed, f = later[:len(later)-1], r.h, r.failed, r.f
		}
		for h != nil {
			next := h.next
			if nf := h.x.fire(int(h.idx), failed); nf != nil {
				if next == nil {
					next, _ = f.take(false, false) // f is done unless some joined
				}
				if next != nil {
					later = append(later, rest{next, failed, f})
				}
				f, join = nf, true
				break
			}
			h = next
		}
	}
}

// wake fires the gathers' hooks in chain h, for runHooks after a callback
// panicked or exited: no callback of the user's is among them.
func wake(h *hook, failed bool) {
	for ; h != nil; h = h.next {
		if w, ok := h.x.(*waiter); ok {
			w.fire(int(h.idx), failed)
		}
	}
}

// onDone has h fire once the future completes, after the hooks linked before it.
func (f *Future[T]) onDone(h *hook) {
	f.mu.Lock()
	h.prev, h.next, h.linked = nil, f.head.Load(), true
	if h.next != nil && h.next != &firing {
		h.next.prev = h
	}
	f.head.Store(h)
	here := f.isComplete() && h.next == nil // complete did not see h, nor fires any
	f.mu.Unlock()
	if here { // fire it here as complete does: hooks linked meanwhile run after it
		runHooks(f)
	}
}

// unhook takes h off f's list if it has not fired, and reports whether it did.
func (f *Future[T]) unhook(h *hook) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	linked := h.linked
	if linked {
		f.unlinkLocked(h)
	}
	return linked
}

func (f *Future[T]) unlinkLocked(h *hook) {
	if h.prev == nil {
		f.head.Store(h.next)
	} else {
		h.prev.next = h.next
	}
	if h.next != nil && h.next != &firing {
		h.next.prev = h.prev
	}
	h.prev, h.next, h.linked = nil, nil, false
}

// Promise is the writing side of a [Future]. Make one with [NewPromise], or
// embed it in a larger struct and call [Promise.Init] (one allocation).
type Promise[T any] struct {
	f Future[T]
}

// NewPromise returns a Promise whose future is pending; [Future.Cancel]
// calls c (which may be nil) until it completes, then the future drops c.
func NewPromise[T any](c Canceler) *Promise[T] {
	p := new(Promise[T])
	p.Init(c)
	return p
}

// Init prepares a Promise held by value, once, as [NewPromise] does.
func (p *Promise[T]) Init(c Canceler) {
	if !p.f.state.CompareAndSwap(unready, pending) {
		panic("future: Promise.Init called twice")
	}
	p.f.canceler = c
}

// Future returns the future this Promise completes.
func (p *Promise[T]) Future() *Future[T] { return &p.f }

// Complete completes the future with v and err, once, and reports whether
// this call did; the future's callbacks run before it returns.
func (p *Promise[T]) Complete(v T, err error) bool {
	if p.f.state.Load() == unready {
		panic("future: Promise used before Init")
	}
	return p.f.complete(v, err)
}

// Completed returns a future that has already completed with v and err.
func Completed[T any](v T, err error) *Future[T] {
	f := &Future[T]{val: v, err: err}
	f.state.Store(complete) // Done returns closedChan
	return f
}

// TaskError is the error of [All] when one of its futures fails: Index is
// its position among All's arguments, Err its error.
type TaskError struct {
	Index int
	Err   error
}

// Error returns "future <index> failed: " followed by the future's error.
func (e *TaskError) Error() string {
	return "future " + strconv.Itoa(e.Index) + " failed: " + e.Err.Error()
}

// Unwrap returns the failed future's error.
func (e *TaskError) Unwrap() error { return e.Err }

// All waits for every future and returns their values in argument order.
// On the first failure (the first in argument order of those failed) it
// cancels the others pending and returns a [*TaskError] beside the values.
// If ctx ends first, it returns ctx.Err() and cancels nothing. Inside a
// pool task it helps as [Future.Wait] does, as Settle and First do.
func All[T any](ctx context.Context, fs ...*Future[T]) ([]T, error) {
	i, err := await(ctx, "All", fs, waitAll)
	out := make([]T, len(fs))
	for j, f := range fs {
		if f.isComplete() && f.err == nil {
			out[j] = f.val
		}
	}
	if err != nil {
		return out, err
	}
	if i >= 0 {
		for _, f := range fs {
			f.Cancel()
		}
		return out, &TaskError{Index: i, Err: fs[i].err}
	}
	return out, nil
}

// Settle waits until every future has completed, or ctx ends, and returns
// every value and error by index (ErrNotDone if still pending).
func Settle[T any](ctx context.Context, fs ...*Future[T]) (vals []T, errs []error) {
	_, _ = await(ctx, "Settle", fs, waitSettle)
	vals, errs = make([]T, len(fs)), make([]error, len(fs))
	for i, f := range fs {
		vals[i], errs[i] = f.Result()
	}
	return vals, errs
}

var errNoFutures = errors.New("future: First called with no futures")

// First waits for the first of the futures to complete and returns its value
// and error (the earliest in argument order of those complete), ctx.Err()
// if ctx ends first, or an error if fs is empty.
func First[T any](ctx context.Context, fs ...*Future[T]) (v T, err error) {
	if len(fs) == 0 {
		return v, errNoFutures
	}
	i, err := await(ctx, "First", fs, waitFirst)
	if err != nil {
		return v, err
	}
	return fs[i].val, fs[i].err
}

// waitMode says what decides an await.
type waitMode uint8

const (
	waitAll waitMode = iota
	waitFirst
	waitSettle
)

// waiter is what All, First and Settle wait on.
type waiter struct {
	mode  waitMode
	left  atomic.Int64  // completions still awaited (All: successes), plus one while hooks are being added
	first atomic.Int64  // 1 + index of the deciding future; 0 until then
	wake  chan struct{} // buffered 1; only the decider, or the last counted, sends
	hooks []hook        // never grows past its first capacity: linked by address
}

func (w *waiter) fire(idx int, failed bool) due {
	if w.mode == waitFirst || (failed && w.mode == waitAll) {
		if w.first.CompareAndSwap(0, int64(idx)+1) {
			w.wake <- struct{}{}
		}
	} else if w.left.Add(-1) == 0 {
		w.wake <- struct{}{}
	}
	return nil
}

// await waits for the outcome of fs in the given mode and returns the index
// of the deciding future (-1 if none) or ctx.Err(), leaving no hook behind.
func await[T any](ctx context.Context, name string, fs []*Future[T], mode waitMode) (int, error) {
	if ctx == nil {
		panic("future: " + name + " called with a nil Context")
	}
	for i, f := range fs {
		if f == nil {
			panic("future: " + name + " called with a nil *Future at index " + strconv.Itoa(i))
		}
		f.usable(name)
	}
	var w *waiter
	unhook := func() {
		for i := 0; w != nil && i < len(w.hooks); i++ {
			fs[w.hooks[i].idx].unhook(&w.hooks[i])
		}
	}
	for i, f := range fs {
		if f.isComplete() {
			if mode == waitFirst || (mode == waitAll && f.err != nil) {
				unhook()
				return i, nil
			}
			continue
		}
		if w == nil {
			w = &waiter{mode: mode, wake: make(chan struct{}, 1), hooks: make([]hook, 0, len(fs)-i)}
			w.left.Store(1) // held until every hook is on
		}
		w.hooks = append(w.hooks, hook{x: w, idx: int32(i)})
		if mode != waitFirst {
			w.left.Add(1)
		}
		f.onDone(&w.hooks[len(w.hooks)-1])
	}
	if w == nil {
		return -1, nil // every future had completed (and succeeded, for All)
	}
	if mode != waitFirst && w.left.Add(-1) == 0 {
		w.wake <- struct{}{}
	}
	// Inside a pool task, the pool runs its own queued tasks among fs (join.Helper).
	h, _ := ctx.Value(join.Key).(join.Helper)
	var decided func() bool
	if h != nil {
		decided = func() bool { return w.first.Load() != 0 }
	}
	for next := 0; ; {
		var busy <-chan struct{}
		// Once decided (First's winner, All's failure), start nothing more.
		for ; h != nil && next < len(fs) && busy == nil && w.first.Load() == 0; next++ {
			busy = h.Help(fs[next].source(), decided)
		}
		if busy != nil {
			next-- // ask again for the same future
		}
		select {
		case <-w.wake:
		case <-busy:
			select {
			case <-w.wake: // decided meanwhile: start nothing more
			default:
				continue
			}
		case <-ctx.Done():
			select {
			case <-w.wake: // both ready: the result wins, as in Wait
			default:
				unhook()
				return 0, ctx.Err()
			}
		}
		break
	}
	if mode == waitFirst || w.left.Load() != 0 { // else every hook has fired: none to take off (G4_FanOut)
		unhook()
	}
	if i := w.first.Load(); i > 0 {
		return int(i - 1), nil
	}
	return -1, nil
}

// OnComplete calls fn with the future's value and error once it completes,
// on the goroutine that completes it after the callbacks registered before,
// or at once if those have run (see the root package's "Callbacks").
func (f *Future[T]) OnComplete(fn func(T, error)) {
	if fn == nil {
		panic("future: OnComplete called with a nil function")
	}
	f.usable("OnComplete")
	c := &onComplete[T]{f: f, fn: fn}
	c.h.x = c
	f.onDone(&c.h)
}

// onComplete is one OnComplete: its hook and its function.
type onComplete[T any] struct {
	h  hook
	f  *Future[T]
	fn func(T, error)
}

func (c *onComplete[T]) fire(int, bool) due {
	c.fn(c.f.val, c.f.err)
	return nil
}

// Then returns a future that completes with fn's result once f succeeds, or
// with f's error. fn is a callback, as for [Future.OnComplete] (if it
// panics, the new future fails and the panic goes on). Cancelling the new
// future leaves f running. Any chain completes in constant stack.
func Then[T, U any](f *Future[T], fn func(T) (U, error)) *Future[U] {
	if f == nil {
		panic("future: Then called with a nil *Future")
	}
	if fn == nil {
		panic("future: Then called with a nil function")
	}
	f.usable("Then")
	t := &then[T, U]{src: f, fn: fn}
	t.p.Init(t)
	t.h.x = t
	f.onDone(&t.h)
	return t.p.Future()
}

// then is one Then: its hook and the new future, in one allocation.
type then[T, U any] struct {
	h   hook
	p   Promise[U]
	src *Future[T]
	fn  func(T) (U, error)
}

// Cancel is the new future's Canceler, the source running on; fn is forgotten here if it will not fire.
func (t *then[T, U]) Cancel() {
	if t.src.unhook(&t.h) {
		t.fn = nil
	}
	var zero U
	t.p.f.complete(zero, context.Canceled)
}

func (t *then[T, U]) up() stage { return t.src }

// fire runs the stage holding the new future's canceler (t), forgetting fn.
func (t *then[T, U]) fire(int, bool) due {
	f, fn := &t.p.f, t.fn
	t.fn = nil
	if !f.acquire() { // cancelled: fn is not wanted
		return nil
	}
	d, _ := f.settle(t.call(fn))
	f.release()
	return d
}

// call is fn's result, or the source's error; if fn exits, the new future fails first.
func (t *then[T, U]) call(fn func(T) (U, error)) (U, error) {
	var zero U
	if t.src.err != nil {
		return zero, t.src.err
	}
	returned := false
	defer func() {
		if !returned {
			d, _ := t.p.f.settle(zero, errThenExited)
			t.p.f.release()
			runHooks(d)
		}
	}()
	u, err := fn(t.src.val)
	returned = true
	return u, err
}
