package pool

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/panjf2000/ants/v2"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/internal/clock"
	"github.com/bulkhead-go/bulkhead/internal/event"
)

// Bulkhead runs tasks on at most MaxWorkers worker goroutines, with a
// bounded first-in, first-out queue of tasks waiting for a worker, and
// rejects work at once when both are full. Submit tasks with [Submit] or
// [Bulkhead.TryGo], or wait for room with [Go] or [Bulkhead.Go]. A Bulkhead
// is safe for concurrent use; create one with [New] and stop it with
// [Bulkhead.Close].
type Bulkhead struct {
	// saturated is true while every worker is busy and the queue is full,
	// so that a rejection is decided from one atomic load. It is written
	// (under mu) only when it changes.
	saturated atomic.Bool
	closed    atomic.Bool   // set by Close, under mu
	rejected  atomic.Uint64 // counted without the lock, on the rejection fast path

	name string
	hub  event.Hub[bulkhead.Event]
	cfg  atomic.Pointer[Config]
	full atomic.Pointer[fullErrors]
	ants atomic.Pointer[ants.PoolWithFunc]
	// busy counts the goroutines doing the Bulkhead's work: workers from
	// invoke to the end of their task's callbacks, and the goroutines that
	// fail dropped tasks (their futures' callbacks run there). Close waits
	// for it to reach 0 (see workDone).
	busy atomic.Int64

	mu sync.Mutex // guards everything below and every node's links and state
	// active counts the tasks running; lent those of them that run in the
	// slot of a task that waits for them (see help), so that active-lent
	// slots are taken.
	active, lent int
	maxWorkers   int
	queueCap     int
	maxWait      time.Duration
	keepAlive    time.Duration
	// The queue's timeout: one timer, armed for the earliest deadline of a
	// queued task (see armLocked and expireQueued).
	timerAt  int64 // deadline (from now()) the latest timer was armed for; 0 = none
	unsorted bool  // a task was queued with an earlier deadline than one before it
	lastDL   int64 // the latest deadline of a task put in the queue
	timer    *time.Timer
	// counters; Rejected is above
	permitted, cancelled, finished, failed uint64
	waiting                                queue         // submitters' tasks waiting for room (Go), oldest first
	queue                                  queue         // waiting for a worker, oldest first
	running                                queue         // for Close to cancel
	loanEnded                              chan struct{} // closed when a loan ends, if a wait wants to know (see help)
	released                               chan struct{} // closed when Close is done: drained, and no goroutine busy
	releasing                              bool          // released is closed or being closed
}

type fullErrors struct{ now, waited *bulkhead.FullError }

// New returns a Bulkhead named name with the given configuration. It fails
// if the name is empty or a field is out of range. The Bulkhead owns an ants
// pool (two housekeeping goroutines, plus the workers while there is work);
// call Close to stop them.
func New(name string, cfg Config) (*Bulkhead, error) {
	if name == "" {
		return nil, errors.New("pool: name must not be empty")
	}
	if !utf8.ValidString(name) {
		return nil, fmt.Errorf("pool: name %q is not valid UTF-8", name)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("pool %q: %w", name, err)
	}
	b := &Bulkhead{name: name, released: make(chan struct{})}
	p, err := b.newAnts(cfg)
	if err != nil {
		return nil, fmt.Errorf("pool %q: %w", name, err)
	}
	b.ants.Store(p)
	b.keepAlive = cfg.keepAlive()
	b.apply(cfg)
	return b, nil
}

// rethrow is the ants pool's panic handler: a panic reaches ants only from
// a callback on a worker, and ends the program, as on any goroutine (ants
// would log it and carry on).
func rethrow(v any) { panic(v) }

// newAnts makes the ants pool of workers, unlimited: the Bulkhead's own count
// limits running tasks, and a worker stays busy a moment after its slot is
// freed (callbacks), so that a fixed size would fail although a slot is free.
func (b *Bulkhead) newAnts(cfg Config) (*ants.PoolWithFunc, error) {
	return ants.NewPoolWithFunc(-1, b.work, ants.WithExpiryDuration(cfg.keepAlive()), ants.WithPanicHandler(rethrow))
}

// apply installs cfg's limits and rejection errors. b.mu must be held, or b
// not yet shared.
func (b *Bulkhead) apply(cfg Config) {
	b.maxWorkers, b.queueCap, b.maxWait = cfg.MaxWorkers, cfg.QueueCapacity, cfg.QueueTimeout
	b.cfg.Store(&cfg)
	e := bulkhead.FullError{Name: b.name, Kind: bulkhead.Pool, MaxConcurrentCalls: cfg.MaxWorkers,
		QueueCapacity: cfg.QueueCapacity, MaxWaitDuration: cfg.QueueTimeout, Reason: bulkhead.ReasonFull}
	w := e
	w.Waited, w.Reason = true, bulkhead.ReasonTimeout
	b.full.Store(&fullErrors{now: &e, waited: &w})
}

// free reports whether a slot is free. b.mu must be held.
func (b *Bulkhead) free() bool { return b.active-b.lent < b.maxWorkers }

// storeSaturated publishes whether b is saturated, for the lock-free rejection
// check. b.mu must be held.
func (b *Bulkhead) storeSaturated() {
	if s := !b.free() && b.queue.len >= b.queueCap; s != b.saturated.Load() {
		b.saturated.Store(s)
	}
}

// Name returns the name the Bulkhead was created with.
func (b *Bulkhead) Name() string { return b.name }

// Config returns the configuration in force.
func (b *Bulkhead) Config() Config { return *b.cfg.Load() }

// String returns `pool bulkhead "name"`.
func (b *Bulkhead) String() string { return fmt.Sprintf("pool bulkhead %q", b.name) }

// Subscribe calls fn with every event of this Bulkhead until cancel is
// called. fn is a callback (see the root package's "Callbacks"): it runs with
// no lock held on the goroutine where the event happened (the submitter, the
// worker, the goroutine that dropped a queued task, the caller of
// Reconfigure); a task's future completes before its finished event.
func (b *Bulkhead) Subscribe(fn func(bulkhead.Event)) (cancel func()) {
	if fn == nil {
		panic("pool: Subscribe called with a nil function")
	}
	return b.hub.Subscribe(fn)
}

// Submit runs fn on a worker of b and returns its future, without blocking.
// If a worker is free, fn starts at once; if all are busy and the queue has
// room, it waits there, first in, first out; otherwise Submit returns a
// [*bulkhead.FullError] (matching [bulkhead.ErrBulkheadFull]). It returns
// ctx.Err() if ctx has already ended and [bulkhead.ErrClosed] after Close.
// To wait for room instead of being rejected, use [Go].
//
// fn's context is a child of ctx, cancelled also when the future is
// cancelled, when Close gives up waiting, and once fn returns. A task still
// queued when ctx ends or its future is cancelled leaves the queue at once;
// its future fails with the context's error. A panic in fn fails the future
// with a [*bulkhead.PanicError], a runtime.Goexit fails it too.
func Submit[T any](ctx context.Context, b *Bulkhead, fn func(context.Context) (T, error)) (*future.Future[T], error) {
	if fn == nil || ctx == nil || b == nil {
		misuse("Submit", ctx, b)
	}
	return submit(ctx, b, fn, nil, false)
}

// Go is [Submit] for fan-out that must run every task: with the queue full,
// it waits for room, first in, first out, as errgroup's Go waits, until ctx
// ends (ctx.Err(), counted Cancelled) or Close ([bulkhead.ErrClosed]).
// Waiting callers count in [bulkhead.Stats] Waiting. Called from a task of
// b with the task's context, it runs fn in the caller's slot instead, and
// returns once fn has finished (see "Waiting inside a task").
func Go[T any](ctx context.Context, b *Bulkhead, fn func(context.Context) (T, error)) (*future.Future[T], error) {
	if fn == nil || ctx == nil || b == nil {
		misuse("Go", ctx, b)
	}
	return submit(ctx, b, fn, nil, true)
}

// TryGo is [Submit] for a function that returns only an error: it never
// waits.
func (b *Bulkhead) TryGo(ctx context.Context, fn func(context.Context) error) (*future.Future[struct{}], error) {
	if fn == nil || ctx == nil || b == nil {
		misuse("TryGo", ctx, b)
	}
	return submit[struct{}](ctx, b, nil, fn, false)
}

// Go is [Go] for a function that returns only an error: it waits for room.
func (b *Bulkhead) Go(ctx context.Context, fn func(context.Context) error) (*future.Future[struct{}], error) {
	if fn == nil || ctx == nil || b == nil {
		misuse("Go", ctx, b)
	}
	return submit[struct{}](ctx, b, nil, fn, true)
}

// submit is Submit, Go, TryGo and Bulkhead.Go once their arguments are
// checked: fn, or else fnErr, is the task's function.
func submit[T any](ctx context.Context, b *Bulkhead, fn func(context.Context) (T, error), fnErr func(context.Context) error, wait bool) (*future.Future[T], error) {
	if err := b.precheck(ctx, wait); err != nil {
		return nil, err
	}
	t := newTask(b, ctx, fn, fnErr)
	if err := b.admit(ctx, &t.node, wait); err != nil {
		t.cancel(context.Canceled)
		return nil, err
	}
	return t.p.Future(), nil
}

// misuse panics for a nil Context, *Bulkhead or function passed to name: a
// bug in the caller, reported before anything is counted.
func misuse(name string, ctx context.Context, b *Bulkhead) {
	switch {
	case ctx == nil:
		panic("pool: " + name + " called with a nil Context")
	case b == nil:
		panic("pool: " + name + " called with a nil *Bulkhead")
	}
	panic("pool: " + name + " called with a nil function")
}

// precheck refuses work without locking or allocating: a context that has
// ended, a closed bulkhead, or a full one (unless the caller will wait).
func (b *Bulkhead) precheck(ctx context.Context, wait bool) error {
	if b.cfg.Load() == nil {
		panic("pool: Bulkhead used without New")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.closed.Load() {
		return bulkhead.ErrClosed
	}
	if !wait && b.saturated.Load() {
		return b.reject()
	}
	return nil
}

// reject counts and reports a rejection at submission.
func (b *Bulkhead) reject() error {
	fe := b.full.Load()
	b.rejected.Add(1)
	if b.hub.Active() {
		b.publish(bulkhead.EventRejected, fe.now, 0, 0)
	}
	return fe.now
}

// admit is the one admission decision: it starts n, a new task, on a free
// worker, or queues it, or (wait) runs it in the slot of the task of b
// that submits it, or makes its submitter wait for room, or rejects it.
func (b *Bulkhead) admit(ctx context.Context, n *node, wait bool) error {
	b.mu.Lock()
	switch {
	case b.closed.Load():
		b.mu.Unlock()
		return bulkhead.ErrClosed
	case b.free():
		b.startLocked(n)
		b.mu.Unlock()
		b.invoke(n)
		return nil
	case b.queue.len < b.queueCap:
		b.enqueueLocked(n)
		b.mu.Unlock()
		return nil
	case !wait:
		b.mu.Unlock()
		return b.reject()
	}
	if by := b.caller(ctx); by != nil && !by.lent {
		b.lendLocked(by, n)
		b.mu.Unlock()
		b.runLent(n)
		return nil
	}
	if b.hub.Active() {
		n.queuedAt = now()
	}
	n.state = stWaiting
	n.ready = make(chan struct{})
	b.waiting.push(n)
	b.mu.Unlock()
	return b.awaitRoom(ctx, n)
}

// awaitRoom waits until n, the task of a submitter that waits for room, is
// admitted (started or queued) or refused by Close, or ctx ends.
func (b *Bulkhead) awaitRoom(ctx context.Context, n *node) error {
	select {
	case <-n.ready:
	case <-ctx.Done():
		b.mu.Lock()
		if n.state == stWaiting {
			b.waiting.remove(n)
			b.cancelled++
			n.state = stDone
			b.mu.Unlock()
			err := ctx.Err()
			if b.hub.Active() {
				b.publish(bulkhead.EventCancelled, err, sinceOrZero(n.queuedAt), 0)
			}
			return err
		}
		b.mu.Unlock() // admitted meanwhile: its context's end now drops it as usual
	}
	if n.refused {
		return bulkhead.ErrClosed
	}
	return nil
}

// startLocked counts n as running. b.mu must be held and a slot free (or
// lent to n).
func (b *Bulkhead) startLocked(n *node) {
	b.active++
	n.state = stRunning
	b.running.push(n)
	b.permitted++
	b.storeSaturated()
}

// enqueueLocked puts n at the back of the queue, and watches its
// submitter's context, so that n leaves the queue as soon as it ends. b.mu
// must be held and the queue have room.
func (b *Bulkhead) enqueueLocked(n *node) {
	if n.queuedAt == 0 && b.hub.Active() {
		n.queuedAt = now()
	}
	n.state = stQueued
	b.queue.push(n)
	b.storeSaturated()
	if b.maxWait > 0 {
		n.deadline = now() + int64(b.maxWait)
		if b.queue.len == 1 {
			b.unsorted = false
		} else if n.deadline < b.lastDL {
			b.unsorted = true // QueueTimeout was shortened: see expireQueued
		}
		b.lastDL = n.deadline
		b.armLocked(n.deadline)
	}
	if parent := n.tc.parent; parent.Done() != nil {
		n.stop = context.AfterFunc(parent, func() { b.parentDone(n) })
	}
}

// unqueueLocked takes n out of the queue, stops watching its submitter's
// context, and moves a waiting submitter's task into the room it leaves.
// b.mu must be held.
func (b *Bulkhead) unqueueLocked(n *node) {
	b.queue.remove(n)
	if n.stop != nil {
		n.stop()
		n.stop = nil
	}
	b.refillLocked()
}

// refillLocked moves waiting submitters' tasks into the queue while it has
// room. b.mu must be held.
func (b *Bulkhead) refillLocked() {
	for n := b.waiting.head; n != nil && b.queue.len < b.queueCap; n = b.waiting.head {
		b.waiting.remove(n)
		b.enqueueLocked(n)
		close(n.ready)
	}
	b.storeSaturated()
}

// popLocked takes the oldest waiting task, for the caller to start: the
// queue's head, else the oldest waiting submitter's, else nil. b.mu held.
func (b *Bulkhead) popLocked() *node {
	if n := b.queue.head; n != nil {
		b.unqueueLocked(n)
		return n
	}
	if n := b.waiting.pop(); n != nil {
		close(n.ready)
		return n
	}
	return nil
}

// armLocked makes the queue's one timer fire by deadline dl (deadlines come
// in queue order; an early firing finds nothing to do). b.mu must be held.
func (b *Bulkhead) armLocked(dl int64) {
	if b.timerAt != 0 && b.timerAt <= dl {
		return
	}
	b.timerAt = dl
	// A new timer each time, not Reset: the bulkhead may be used from a
	// testing/synctest bubble that an earlier timer does not belong to.
	b.timer = time.AfterFunc(time.Duration(dl-now()), func() { b.expireQueued(dl) })
}

// expireQueued drops the queued tasks whose QueueTimeout has passed, then
// arms the timer for the next deadline. at is the deadline the firing timer
// was armed for. The scan stops at the first task not due, unless a
// shortened QueueTimeout put later deadlines before earlier ones.
func (b *Bulkhead) expireQueued(at int64) {
	defer b.workDone()
	b.mu.Lock()
	b.busy.Add(1) // before a drop can find the bulkhead drained: see workDone
	if b.timerAt == at {
		b.timerAt = 0
	}
	t, next := now(), int64(0)
	var drop []*node
	for n := b.queue.head; n != nil; {
		nx := n.next // a task that dropLocked queues at the back arms the timer itself
		if n.deadline != 0 && n.deadline <= t {
			b.dropLocked(n)
			b.rejected.Add(1)
			drop = append(drop, n)
		} else if n.deadline != 0 {
			next = min(next, n.deadline)
			if next == 0 {
				next = n.deadline
			}
			if !b.unsorted {
				break // the rest come later
			}
		}
		n = nx
	}
	if next != 0 {
		b.armLocked(next)
	}
	b.mu.Unlock()
	if len(drop) > 0 {
		b.droppedAll(drop, bulkhead.EventRejected, b.full.Load().waited)
	}
}

// parentDone drops n, queued, when its submitter's context has ended.
func (b *Bulkhead) parentDone(n *node) {
	defer b.workDone()
	b.mu.Lock()
	b.busy.Add(1) // before a drop can find the bulkhead drained: see workDone
	if n.state != stQueued {
		b.mu.Unlock()
		return
	}
	b.dropLocked(n)
	b.cancelled++
	err := n.tc.parent.Err()
	b.mu.Unlock()
	b.dropped(n, bulkhead.EventCancelled, err)
}

// invoke hands n to an ants worker (Invoke fails only on a replaced pool).
func (b *Bulkhead) invoke(n *node) {
	b.busy.Add(1)
	for b.ants.Load().Invoke(n) != nil {
	}
}

// work is the ants pool's function: it runs n, then, while tasks wait and
// a slot is free, the oldest of them, on this goroutine.
func (b *Bulkhead) work(arg any) {
	defer b.workDone()
	for n := arg.(*node); n != nil; {
		n = b.run(n)
	}
}

// workDone ends a goroutine's work (counted by invoke, expireQueued or
// parentDone). After Close, the last one to end lets Close return.
func (b *Bulkhead) workDone() {
	// Close stores closed before it reads busy: either this sees closed,
	// or Close sees this decrement.
	if b.busy.Add(-1) == 0 && b.closed.Load() {
		b.releaseIfDone()
	}
}

// run runs n, which is counted running, on this goroutine, and returns the
// next task this worker should run. It publishes EventPermitted first; a
// panic or runtime.Goexit in the task fails its future; one in a subscriber
// of EventPermitted fails the task unrun, and goes on.
func (b *Bulkhead) run(n *node) (next *node) {
	var start time.Time
	started, returned := false, false
	defer func() {
		if returned {
			return
		}
		if started {
			if r := recover(); r != nil {
				n.j.setErr(&bulkhead.PanicError{Value: r, Stack: debug.Stack()})
				next = b.finish(n, start, false)
				return
			}
			n.j.setErr(errGoexit)
		} else {
			n.j.setErr(errNotRun)
		}
		b.finish(n, start, true) // this goroutine is ending
	}()
	if b.hub.Active() {
		start = clock.Now()
		var wait time.Duration
		if n.queuedAt != 0 { // the wait from the same clock read: now() at start
			wait = time.Duration((int64(start.Sub(epoch)) | 1) - n.queuedAt)
		}
		b.publishAt(bulkhead.EventPermitted, start, nil, wait, 0)
	}
	started = true
	n.j.exec()
	returned = true
	return b.finish(n, start, false)
}

// finish accounts for n (ending its loan), picks this worker's next task,
// then completes n's future and publishes EventFinished: whoever sees the
// future done sees the slot free. If a callback ends the goroutine, or it
// is leaving, the next task goes to another worker.
func (b *Bulkhead) finish(n *node, start time.Time, leaving bool) (next *node) {
	err := n.j.result()
	b.mu.Lock()
	b.finished++
	if err != nil {
		b.failed++
	}
	b.running.remove(n)
	n.state = stDone
	b.active--
	var loanEnded, ended chan struct{}
	if n.lender != nil {
		n.lender.lent = false
		n.lender = nil
		b.lent--
		ended, loanEnded, b.loanEnded = n.ended, b.loanEnded, nil
	}
	if b.free() {
		if next = b.popLocked(); next != nil {
			b.startLocked(next)
		}
	}
	b.storeSaturated()
	b.mu.Unlock()
	n.cancel(context.Canceled)
	pub := b.hub.Active()
	if next != nil && (leaving || pub) {
		b.invoke(next)
		next = nil
	}
	settled := false
	defer func() {
		// The lender resumes once n's callbacks (an All's or a First's
		// hook among them) have run, so that a gather decided by n starts
		// nothing more in its slot.
		if ended != nil {
			close(ended)
		}
		if loanEnded != nil {
			close(loanEnded)
		}
		if !settled && next != nil {
			b.invoke(next)
		}
		n.drop()
	}()
	n.j.settle() // runs the future's callbacks; n may be dropped from here on
	settled = true
	if pub {
		at := clock.Now()
		var run time.Duration
		if !start.IsZero() {
			run = at.Sub(start)
		}
		b.publishAt(bulkhead.EventFinished, at, err, 0, run)
	}
	return next
}

// cancel ends n because its future was cancelled: a queued task leaves the
// queue and fails with err; a running one has its context cancelled.
func (b *Bulkhead) cancel(n *node, err error) {
	b.mu.Lock()
	if n.state == stQueued {
		b.dropLocked(n)
		b.cancelled++
		b.mu.Unlock()
		b.dropped(n, bulkhead.EventCancelled, err)
		return
	}
	b.mu.Unlock()
	n.cancel(err)
}

// dropLocked takes a queued node out of the queue. b.mu must be held.
func (b *Bulkhead) dropLocked(n *node) {
	b.unqueueLocked(n)
	n.state = stDone
}

// dropped completes the future of a node that left the queue without
// running, then publishes typ.
func (b *Bulkhead) dropped(n *node, typ bulkhead.EventType, err error) {
	n.cancel(context.Canceled)
	n.j.fail(err)
	n.drop()
	if b.hub.Active() {
		b.publish(typ, err, sinceOrZero(n.queuedAt), 0)
	}
	if b.closed.Load() {
		b.releaseIfDone()
	}
}

// droppedAll fails the futures of nodes dropped together, every one even if
// a callback ends the goroutine, then publishes typ for each.
func (b *Bulkhead) droppedAll(ns []*node, typ bulkhead.EventType, err error) {
	failAll(ns, err)
	if b.hub.Active() {
		for _, n := range ns {
			b.publish(typ, err, sinceOrZero(n.queuedAt), 0)
		}
	}
}

func failAll(ns []*node, err error) {
	i := 0
	defer func() {
		if i < len(ns) {
			failAll(ns[i+1:], err)
		}
	}()
	for ; i < len(ns); i++ {
		ns[i].cancel(context.Canceled)
		ns[i].j.fail(err)
		ns[i].drop()
	}
}

// epoch anchors now, so that queue times are read from the monotonic clock.
var epoch = time.Now()

// now returns the time since epoch, never 0.
func now() int64 { return int64(time.Since(epoch)) | 1 }

// sinceOrZero returns the time since t (from now), or 0 if t is unset.
func sinceOrZero(t int64) time.Duration {
	if t == 0 {
		return 0
	}
	return time.Duration(now() - t)
}

func (b *Bulkhead) publish(typ bulkhead.EventType, err error, wait, run time.Duration) {
	b.publishAt(typ, clock.Now(), err, wait, run)
}

// publishAt publishes an event of type typ stamped at.
func (b *Bulkhead) publishAt(typ bulkhead.EventType, at time.Time, err error, wait, run time.Duration) {
	b.hub.Publish(bulkhead.Event{Name: b.name, Kind: bulkhead.Pool, Type: typ, Time: at,
		Err: err, Wait: wait, Run: run})
}

// Reconfigure applies cfg without blocking. More workers start waiting
// tasks at once; fewer let the running tasks finish and start no more until
// fewer than the new MaxWorkers run. A smaller queue keeps the tasks it holds
// but admits none until it is below the new capacity. A new QueueTimeout
// applies to tasks queued after the call (a task keeps the deadline it was
// queued with); a new KeepAlive to workers started after it. A change of
// MaxWorkers publishes [bulkhead.EventLimitChanged]. After Close it returns
// [bulkhead.ErrClosed].
func (b *Bulkhead) Reconfigure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("pool %q: %w", b.name, err)
	}
	b.mu.Lock()
	if b.closed.Load() {
		b.mu.Unlock()
		return bulkhead.ErrClosed
	}
	var old *ants.PoolWithFunc
	if ka := cfg.keepAlive(); ka != b.keepAlive {
		// ants cannot change a pool's expiry: start a new pool and let the
		// old one's workers finish what they run, then exit.
		p, err := b.newAnts(cfg)
		if err != nil {
			b.mu.Unlock()
			return fmt.Errorf("pool %q: %w", b.name, err)
		}
		old = b.ants.Swap(p)
		b.keepAlive = ka
	}
	changed := cfg.MaxWorkers != b.maxWorkers
	b.apply(cfg)
	var start []*node
	for b.free() {
		n := b.popLocked()
		if n == nil {
			break
		}
		b.startLocked(n)
		start = append(start, n)
	}
	b.refillLocked()
	b.mu.Unlock()
	if old != nil {
		old.Release() // does not wait: its busy workers exit once their tasks are done
	}
	for _, n := range start {
		b.invoke(n)
	}
	if changed && b.hub.Active() {
		b.hub.Publish(bulkhead.Event{Name: b.name, Kind: bulkhead.Pool, Type: bulkhead.EventLimitChanged,
			Time: clock.Now(), Limit: cfg.MaxWorkers})
	}
	return nil
}

// Stats returns a snapshot of the Bulkhead's state and counters. All fields
// but Rejected are read together, under the lock that guards them, so
// Permitted - Finished == InFlight in every snapshot. InFlight may exceed
// MaxWorkers after Reconfigure lowered it, and by the tasks that run in the
// slots of tasks that wait for them (see "Waiting inside a task" in the
// package documentation).
func (b *Bulkhead) Stats() bulkhead.Stats {
	b.mu.Lock()
	active, lent, queued, waiting, maxWorkers, queueCap := b.active, b.lent, b.queue.len, b.waiting.len, b.maxWorkers, b.queueCap
	permitted, cancelled, finished, failed := b.permitted, b.cancelled, b.finished, b.failed
	b.mu.Unlock()
	return bulkhead.Stats{
		Name:                     b.name,
		Kind:                     bulkhead.Pool,
		MaxConcurrentCalls:       maxWorkers,
		AvailableConcurrentCalls: max(0, maxWorkers-active+lent),
		InFlight:                 active,
		Waiting:                  waiting,
		QueueDepth:               queued,
		QueueCapacity:            queueCap,
		Permitted:                permitted,
		Rejected:                 b.rejected.Load(),
		Cancelled:                cancelled,
		Finished:                 finished,
		Failed:                   failed,
	}
}

// Close stops the Bulkhead. New work and submitters still waiting for room
// get [bulkhead.ErrClosed] (the latter counted Cancelled); running and
// queued tasks go on, and Close returns nil once they and their callbacks
// are done (ants' goroutines exit right after). If ctx ends first, queued
// tasks fail with ErrClosed (counted Cancelled), running tasks' contexts
// are cancelled, and Close returns ctx.Err(); a later Close waits again.
func (b *Bulkhead) Close(ctx context.Context) error {
	if ctx == nil {
		panic("pool: Close called with a nil Context")
	}
	if b == nil || b.cfg.Load() == nil {
		panic("pool: Close called on a Bulkhead not made by New")
	}
	b.mu.Lock()
	var refused []*node
	if !b.closed.Load() {
		b.closed.Store(true)
		for n := b.waiting.pop(); n != nil; n = b.waiting.pop() {
			b.cancelled++
			n.state = stDone
			n.refused = true
			close(n.ready)
			refused = append(refused, n)
		}
	}
	b.mu.Unlock()
	b.releaseIfDone()
	if b.hub.Active() {
		for _, n := range refused {
			b.publish(bulkhead.EventCancelled, bulkhead.ErrClosed, sinceOrZero(n.queuedAt), 0)
		}
	}
	select {
	case <-b.released:
		return nil
	case <-ctx.Done():
		select {
		case <-b.released: // both ready: the release wins
			return nil
		default:
		}
	}
	b.mu.Lock()
	var drop []*node
	for n := b.queue.head; n != nil; n = b.queue.head {
		b.dropLocked(n)
		b.cancelled++
		drop = append(drop, n)
	}
	for n := b.running.head; n != nil; n = n.next {
		n.cancel(context.Canceled)
	}
	b.mu.Unlock()
	b.droppedAll(drop, bulkhead.EventCancelled, bulkhead.ErrClosed)
	b.releaseIfDone()
	return ctx.Err()
}

// releaseIfDone releases the ants pool and lets Close return once the
// Bulkhead is closed, holds no task, and no goroutine is busy with its work
// (callbacks included).
func (b *Bulkhead) releaseIfDone() {
	b.mu.Lock()
	if !b.closed.Load() || b.releasing || b.active > 0 || b.queue.len > 0 || b.busy.Load() != 0 {
		b.mu.Unlock()
		return
	}
	b.releasing = true
	if b.timer != nil {
		b.timer.Stop()
	}
	b.mu.Unlock()
	b.ants.Load().Release()
	close(b.released)
}
