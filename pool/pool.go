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

// antsHeadroom is how many ants workers the pool may have per allowed task.
// An ants worker stays busy after its task's slot is freed: a moment inside
// ants, and while it completes the future and runs subscribers and future
// callbacks. The bulkhead's own count is what limits running tasks to
// MaxWorkers; the ants pool is non-blocking, and when it has no free worker
// the task starts on a goroutine of the bulkhead's own (see invoke).
const antsHeadroom = 2

// Bulkhead runs tasks on at most MaxWorkers worker goroutines, with a
// bounded first-in, first-out queue of tasks waiting for a worker, and
// rejects work at once when both are full. Submit tasks with [Submit] or
// [Bulkhead.Go], or wait for room with [SubmitWait] or [Bulkhead.GoWait]. A
// Bulkhead is safe for concurrent use; create one with [New] and stop it with
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
	// busy counts the goroutines running work: ants workers, our own when
	// ants has none free, and the queue's timer and context watches while
	// they fail dropped tasks (their futures' callbacks run there). Close
	// waits for it to reach 0 (see workDone and releaseLocked).
	busy atomic.Int64

	mu         sync.Mutex // guards everything below and every node's links and state
	active     int        // tasks running (or handed to a worker to run)
	queued     int
	nwaiting   int // SubmitWait callers waiting for room
	maxWorkers int
	queueCap   int
	maxWait    time.Duration
	keepAlive  time.Duration
	// The queue's timeout: one timer, armed for the earliest deadline of a
	// queued task (see armLocked and expireQueued).
	timerAt  int64 // deadline (from now()) the latest timer was armed for; 0 = none
	expiring bool  // expireQueued is scanning the queue: it arms the timer itself
	unsorted bool  // a task was queued with an earlier deadline than one before it
	lastDL   int64 // the latest deadline of a task put in the queue
	timer    *time.Timer
	// counters; Rejected is above
	permitted, cancelled, finished, failed uint64
	waiting                                list // SubmitWait callers' tasks waiting for room, oldest first
	queue                                  list // waiting for a worker, oldest first
	running                                list // active tasks, for Close to cancel
	watches                                map[<-chan struct{}]*watch
	releasing                              bool          // closed and drained: released closes once busy is 0
	releaseStarted                         bool          // the release goroutine has started
	helpFree                               chan struct{} // closed when a lent slot is given back, if a wait wants one (see help)
	released                               chan struct{} // closed when no worker of the bulkhead is left
}

type fullErrors struct{ now, waited *bulkhead.FullError }

// watch is one context.AfterFunc on a context shared by queued tasks (those
// whose contexts have the same Done channel), so that its end drops them all
// from one goroutine.
type watch struct {
	ctx  context.Context
	stop func() bool
	head *node // linked by wnext and wprev
}

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

// rethrow is the ants pool's panic handler. A panic reaches ants only from a
// callback (an event subscriber, a future callback) on a worker, since a
// task's own panic is recovered into its future; ants would log it and carry
// on, so it is raised again: like a panic on any goroutine, it ends the
// program (see the root package's "Callbacks").
func rethrow(v any) { panic(v) }

func (b *Bulkhead) newAnts(cfg Config) (*ants.PoolWithFunc, error) {
	return ants.NewPoolWithFunc(antsHeadroom*cfg.MaxWorkers, b.work,
		ants.WithExpiryDuration(cfg.keepAlive()), ants.WithNonblocking(true), ants.WithPanicHandler(rethrow))
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

// storeSaturated publishes whether b is saturated, for the lock-free rejection
// check. b.mu must be held.
func (b *Bulkhead) storeSaturated() {
	if s := b.active >= b.maxWorkers && b.queued >= b.queueCap; s != b.saturated.Load() {
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
// no lock held on the goroutine where the event happened: the submitter (a
// rejection), the worker (a task permitted or finished), the goroutine that
// cancelled or dropped a queued task, the caller of Reconfigure (a limit
// changed). A task's future is completed before its finished event is
// published. On a worker, fn delays the worker's next task, so it must be
// quick. A panic in fn is not recovered: on a worker it ends the program,
// as a panic on any goroutine does.
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
// To wait for room instead of being rejected, use [SubmitWait].
//
// fn receives a context that carries ctx's values and deadline and is
// cancelled when ctx ends, when the future is cancelled, when Close gives up
// waiting, and once fn returns. So work that must outlive the request that
// started it (an email sent after the response) needs a ctx that does not
// end with the request: pass context.WithoutCancel(r.Context()). A task still
// queued when ctx ends or its future is cancelled leaves the queue at once
// and never runs; its future fails with the context's error. A panic in fn
// completes the future with a [*bulkhead.PanicError], and a runtime.Goexit
// in fn fails it too; the pool carries on.
//
// Waiting on the future of a task of the same pool from inside a task (with
// the task's context) never deadlocks the pool: if that task is still
// queued, it starts at once in the waiting task's slot (see "Waiting inside
// a task" in the package documentation).
func Submit[T any](ctx context.Context, b *Bulkhead, fn func(context.Context) (T, error)) (*future.Future[T], error) {
	if fn == nil || ctx == nil || b == nil {
		misuse("Submit", ctx, b)
	}
	return submit(ctx, b, fn, nil, false)
}

// SubmitWait is [Submit] for fan-out that must run every task: when every
// worker is busy and the queue is full, it waits for room instead of
// returning a FullError. Waiting submitters are served first in, first out;
// one whose ctx ends leaves at once with ctx.Err() (counted Cancelled), and
// Close sends those still waiting away with [bulkhead.ErrClosed]. While they
// wait they count in [bulkhead.Stats] Waiting, and the permitted event of
// their task reports the whole wait.
func SubmitWait[T any](ctx context.Context, b *Bulkhead, fn func(context.Context) (T, error)) (*future.Future[T], error) {
	if fn == nil || ctx == nil || b == nil {
		misuse("SubmitWait", ctx, b)
	}
	return submit(ctx, b, fn, nil, true)
}

// Go is [Submit] for a function that returns only an error.
func (b *Bulkhead) Go(ctx context.Context, fn func(context.Context) error) (*future.Future[struct{}], error) {
	if fn == nil || ctx == nil || b == nil {
		misuse("Go", ctx, b)
	}
	return submit[struct{}](ctx, b, nil, fn, false)
}

// GoWait is [SubmitWait] for a function that returns only an error.
func (b *Bulkhead) GoWait(ctx context.Context, fn func(context.Context) error) (*future.Future[struct{}], error) {
	if fn == nil || ctx == nil || b == nil {
		misuse("GoWait", ctx, b)
	}
	return submit[struct{}](ctx, b, nil, fn, true)
}

// submit is Submit, SubmitWait, Go and GoWait once their arguments are
// checked: fn, or else fnErr, is the task's function.
func submit[T any](ctx context.Context, b *Bulkhead, fn func(context.Context) (T, error), fnErr func(context.Context) error, wait bool) (*future.Future[T], error) {
	if err := b.precheck(ctx, wait); err != nil {
		return nil, err
	}
	t := &task[T]{fn: fn, fnErr: fnErr}
	t.j = t
	t.p = future.NewPromise[T](&t.node)
	if err := b.admit(ctx, &t.node, wait); err != nil {
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

// reject counts and reports a rejection at submission. (A Bulkhead not
// made by New is never saturated: admit reports it.)
func (b *Bulkhead) reject() error {
	fe := b.full.Load()
	b.rejected.Add(1)
	if b.hub.Active() {
		b.publish(bulkhead.EventRejected, fe.now, 0, 0)
	}
	return fe.now
}

// admit starts or queues n, a new task, or makes its submitter wait for
// room (wait), or rejects it.
func (b *Bulkhead) admit(ctx context.Context, n *node, wait bool) error {
	if b.cfg.Load() == nil {
		panic("pool: Bulkhead used without New")
	}
	n.b = b
	n.ctx.parent, n.ctx.hide = ctx, ctx.Done() != nil
	b.mu.Lock()
	switch {
	case b.closed.Load():
		b.mu.Unlock()
		return bulkhead.ErrClosed
	case b.active < b.maxWorkers:
		b.startLocked(n)
		b.mu.Unlock()
		b.invoke(n)
		return nil
	case b.queued < b.queueCap:
		if b.hub.Active() {
			n.queuedAt = now()
		}
		b.enqueueLocked(n)
		b.mu.Unlock()
		return nil
	case wait:
		if b.hub.Active() {
			n.queuedAt = now()
		}
		n.state = stWaiting
		n.ready = make(chan struct{})
		b.waiting.pushBack(n)
		b.nwaiting++
		b.mu.Unlock()
		return b.awaitRoom(ctx, n)
	}
	b.mu.Unlock()
	return b.reject()
}

// awaitRoom waits until n, a SubmitWait task, is admitted (started or
// queued) or refused by Close, or ctx ends.
func (b *Bulkhead) awaitRoom(ctx context.Context, n *node) error {
	select {
	case <-n.ready:
	case <-ctx.Done():
		b.mu.Lock()
		if n.state == stWaiting {
			b.unwaitLocked(n)
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

// startLocked counts n as running. b.mu must be held and a worker free.
func (b *Bulkhead) startLocked(n *node) {
	b.active++
	n.state = stRunning
	b.running.pushBack(n)
	b.permitted++
	b.storeSaturated()
}

// enqueueLocked puts n at the back of the queue. b.mu must be held and the
// queue have room.
func (b *Bulkhead) enqueueLocked(n *node) {
	n.state = stQueued
	b.queue.pushBack(n)
	b.queued++
	b.storeSaturated()
	if b.maxWait > 0 {
		n.deadline = now() + int64(b.maxWait)
		if b.queued == 1 {
			b.unsorted = false
		} else if n.deadline < b.lastDL {
			b.unsorted = true // QueueTimeout was shortened: see expireQueued
		}
		b.lastDL = n.deadline
		b.armLocked(n.deadline)
	}
	b.watchLocked(n)
}

// armLocked makes the queue's timer fire by deadline dl. Tasks are queued in
// FIFO order with the same QueueTimeout, so their deadlines come in order
// and the timer is armed for the head's; a timer left armed for a task that
// has since left the queue fires early and finds nothing to do. b.mu must be
// held.
func (b *Bulkhead) armLocked(dl int64) {
	if b.expiring || (b.timerAt != 0 && b.timerAt <= dl) {
		return
	}
	b.timerAt = dl
	// A new timer, not Reset: the bulkhead may be used from a testing/synctest
	// bubble that the previous timer does not belong to.
	b.timer = time.AfterFunc(time.Duration(dl-now()), func() { b.expireQueued(dl) })
}

// expireQueued drops the queued tasks whose QueueTimeout has passed, then
// arms the timer for the next deadline. at is the deadline the firing timer
// was armed for.
func (b *Bulkhead) expireQueued(at int64) {
	defer b.workDone()
	b.mu.Lock()
	b.busy.Add(1) // before a drop can find the bulkhead drained: see workDone
	if b.timerAt == at {
		b.timerAt = 0
	}
	b.expiring = true
	t := now()
	var drop []*node
	var next int64
	// Dropping a task may move a SubmitWait caller's task into the queue,
	// at its back: the scan goes on from prev, so that it sees those too.
	var prev *node
	for n := b.queue.head; n != nil; {
		switch {
		case n.deadline != 0 && n.deadline <= t:
			b.dropLocked(n)
			b.rejected.Add(1)
			drop = append(drop, n)
			if prev == nil {
				n = b.queue.head
			} else {
				n = prev.next
			}
			continue
		case n.deadline == 0: // queued while there was no QueueTimeout
		case next == 0 || n.deadline < next:
			next = n.deadline
		}
		if next != 0 && !b.unsorted {
			break // the rest come later
		}
		prev, n = n, n.next
	}
	b.expiring = false
	if next != 0 {
		b.armLocked(next)
	}
	b.mu.Unlock()
	if len(drop) > 0 {
		b.droppedAll(drop, bulkhead.EventRejected, b.full.Load().waited)
	}
}

// popLocked takes the task that has waited longest for a worker, and leaves
// it for the caller to start: the queue's head (the oldest waiting
// submitter then moves into the queue), or, with the queue empty, the oldest
// waiting submitter's task. It returns nil if nothing waits. b.mu must be
// held.
func (b *Bulkhead) popLocked() *node {
	if n := b.queue.head; n != nil {
		b.unqueueLocked(n)
		b.refillLocked()
		return n
	}
	if n := b.waiting.head; n != nil {
		b.unwaitLocked(n)
		close(n.ready)
		return n
	}
	return nil
}

// unwaitLocked takes n out of the line of SubmitWait callers waiting for
// room. b.mu must be held.
func (b *Bulkhead) unwaitLocked(n *node) {
	b.waiting.remove(n)
	b.nwaiting--
}

// unqueueLocked takes n out of the queue and its watch. b.mu must be held.
func (b *Bulkhead) unqueueLocked(n *node) {
	b.queue.remove(n)
	b.queued--
	b.unwatchLocked(n)
	b.storeSaturated()
}

// refillLocked moves waiting submitters' tasks into the queue while it has
// room. b.mu must be held.
func (b *Bulkhead) refillLocked() {
	for b.queued < b.queueCap && b.waiting.head != nil {
		n := b.waiting.head
		b.unwaitLocked(n)
		b.enqueueLocked(n)
		close(n.ready)
	}
}

// watchLocked makes n leave the queue as soon as its submitter's context
// ends. Queued tasks whose contexts share a Done channel share one watch.
// b.mu must be held.
func (b *Bulkhead) watchLocked(n *node) {
	if !n.ctx.hide {
		return // the context cannot end
	}
	d := n.ctx.parent.Done()
	w := b.watches[d]
	if w == nil {
		if b.watches == nil {
			b.watches = make(map[<-chan struct{}]*watch)
		}
		w = &watch{ctx: n.ctx.parent}
		b.watches[d] = w
		w.stop = context.AfterFunc(n.ctx.parent, func() { b.parentDone(w) })
	}
	n.w, n.wprev, n.wnext = w, nil, w.head
	if w.head != nil {
		w.head.wprev = n
	}
	w.head = n
}

// unwatchLocked takes n off its watch, and stops the watch if n was the
// last on it. b.mu must be held.
func (b *Bulkhead) unwatchLocked(n *node) {
	w := n.w
	if w == nil {
		return
	}
	if n.wprev == nil {
		w.head = n.wnext
	} else {
		n.wprev.wnext = n.wnext
	}
	if n.wnext != nil {
		n.wnext.wprev = n.wprev
	}
	n.w, n.wprev, n.wnext = nil, nil, nil
	if w.head == nil {
		w.stop()
		delete(b.watches, w.ctx.Done())
	}
}

// parentDone drops every task still queued under w, whose context has ended,
// from the one goroutine context.AfterFunc started.
func (b *Bulkhead) parentDone(w *watch) {
	defer b.workDone()
	b.mu.Lock()
	b.busy.Add(1) // before a drop can find the bulkhead drained: see workDone
	var drop []*node
	for w.head != nil {
		n := w.head
		b.dropLocked(n)
		b.cancelled++
		drop = append(drop, n)
	}
	b.mu.Unlock()
	b.droppedAll(drop, bulkhead.EventCancelled, w.ctx.Err())
}

// invoke hands a started node to a worker, without blocking: an idle ants
// worker if there is one, else a new goroutine of the bulkhead's own. The
// ants pool may have no idle worker although fewer than MaxWorkers tasks
// run, since its workers stay busy after their tasks' slots are freed (see
// antsHeadroom).
func (b *Bulkhead) invoke(n *node) {
	b.busy.Add(1)
	for {
		p := b.ants.Load()
		err := p.Invoke(n)
		if err == nil {
			return
		}
		if err == ants.ErrPoolClosed && b.ants.Load() != p {
			continue // Reconfigure replaced the pool under us
		}
		go b.work(n)
		return
	}
}

// work is the ants pool's function: it runs n, then, while tasks wait and
// the worker limit allows, the oldest of them, on this goroutine.
func (b *Bulkhead) work(arg any) {
	defer b.workDone()
	for n := arg.(*node); n != nil; {
		n = b.run(n)
	}
}

// workDone ends a goroutine's work (counted by invoke, expireQueued or
// parentDone). The last one to end after Close starts the release.
func (b *Bulkhead) workDone() {
	// Close stores closed before drainedLocked reads busy: either this
	// sees closed, or drainedLocked sees this decrement.
	if b.busy.Add(-1) == 0 && b.closed.Load() {
		b.mu.Lock()
		b.releaseLocked()
		b.mu.Unlock()
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

// finish accounts for a task that has run (giving back the slot it was lent,
// if help started it), picks the next waiting task for this worker (unless
// leaving: this goroutine is ending), completes n's future and publishes
// EventFinished. The accounting comes
// first, so whoever sees the future done also sees the worker free. No
// callback runs while this goroutine owes anything: if any will run, the
// next task goes to another worker first.
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
	if n.helpedBy != nil {
		// The slot goes back to its lender only once n's future has
		// completed (and its callbacks, an All's or a First's hook among
		// them, have run), so that a gather decided by n starts nothing
		// more in it. Deferred, so that a callback that panics or calls
		// runtime.Goexit gives it back all the same.
		defer b.helpEnded(n)
	}
	if b.active < b.maxWorkers {
		if next = b.popLocked(); next != nil {
			b.startLocked(next)
		}
	}
	if next == nil {
		b.storeSaturated()
		b.drainedLocked()
	}
	b.mu.Unlock()
	n.ctx.finish()
	pub := b.hub.Active()
	if next != nil && (leaving || pub) {
		b.invoke(next)
		next = nil
	}
	n.handoff = next // BeforeCallbacks hands it on if the future has callbacks
	n.j.settle()
	next, n.handoff = n.handoff, nil
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

// help starts n, a task of b still in the queue whose future a task running
// on b (by) waits for, on a worker of its own, ahead of the queue: by is
// blocked waiting for it (unless the wait is on another goroutine of by's:
// see the package documentation), so by lends n its slot, and n counts in
// InFlight beside by while it runs. n is permitted, runs and finishes like
// any task on a worker (its panics, runtime.Goexit and callbacks stay on
// its own goroutine). A task lends its slot to one task at a time: while a
// task started in its slot runs, help starts nothing more for it and
// returns a channel that is closed when a lent slot of b is given back, for
// the waiter to try again then. It returns nil once it has started n, or if
// n is not queued or by not running.
func (b *Bulkhead) help(by, n *node, decided func() bool) <-chan struct{} {
	b.mu.Lock()
	if n.state != stQueued || by.state != stRunning {
		b.mu.Unlock()
		return nil
	}
	if by.helping {
		// One channel for the whole pool: a wait woken by the end of
		// another task's loan only tries again.
		if b.helpFree == nil {
			b.helpFree = make(chan struct{})
		}
		c := b.helpFree
		b.mu.Unlock()
		return c
	}
	if decided != nil && decided() {
		// A gather decided meanwhile (by a task whose slot came back just
		// now: it completed before its lender's slot was given back).
		b.mu.Unlock()
		return nil
	}
	b.unqueueLocked(n)
	b.refillLocked()
	by.helping = true
	n.helpedBy = by
	b.startLocked(n)
	b.mu.Unlock()
	b.invoke(n)
	return nil
}

// helpEnded gives back the slot that n, a task started by help, was lent,
// and wakes the waits that want a lent slot back.
func (b *Bulkhead) helpEnded(n *node) {
	b.mu.Lock()
	n.helpedBy.helping = false
	n.helpedBy = nil
	freed := b.helpFree
	b.helpFree = nil
	b.mu.Unlock()
	if freed != nil {
		close(freed)
	}
}

// cancel ends n because its future was cancelled or its submitter's context
// ended: a queued task leaves the queue and fails with err; a running one has
// its context cancelled.
func (b *Bulkhead) cancel(n *node, err error) {
	b.mu.Lock()
	switch n.state {
	case stQueued:
		b.dropLocked(n)
		b.cancelled++
		b.mu.Unlock()
		b.dropped(n, bulkhead.EventCancelled, err)
		return
	case stNew, stRunning:
		n.ctx.cancel(err)
	}
	b.mu.Unlock()
}

// dropLocked takes a queued node out of the queue. b.mu must be held.
func (b *Bulkhead) dropLocked(n *node) {
	b.unqueueLocked(n)
	n.state = stDone
	b.refillLocked()
	b.drainedLocked()
}

// dropped completes the future of a node that left the queue without
// running, then publishes typ.
func (b *Bulkhead) dropped(n *node, typ bulkhead.EventType, err error) {
	n.ctx.finish()
	n.j.fail(err)
	if b.hub.Active() {
		b.publish(typ, err, sinceOrZero(n.queuedAt), 0)
	}
}

// droppedAll completes the futures of nodes that left the queue together,
// then publishes typ for each. The futures all complete even if a callback
// of one panics or calls runtime.Goexit (a deferred call completes the rest
// before the panic goes on), so that one bad callback leaves no other
// caller waiting forever.
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
		ns[i].ctx.finish()
		ns[i].j.fail(err)
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

//go:noinline
func (b *Bulkhead) publish(typ bulkhead.EventType, err error, wait, run time.Duration) {
	b.publishAt(typ, clock.Now(), err, wait, run)
}

// publishAt publishes an event of type typ stamped at.
//
//go:noinline
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
	} else {
		b.ants.Load().Tune(antsHeadroom * cfg.MaxWorkers)
	}
	changed := cfg.MaxWorkers != b.maxWorkers
	b.apply(cfg)
	var start []*node
	for b.active < b.maxWorkers {
		n := b.popLocked()
		if n == nil {
			break
		}
		b.startLocked(n)
		start = append(start, n)
	}
	b.refillLocked()
	b.storeSaturated()
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
// MaxWorkers after Reconfigure lowered it, and by the tasks started in the
// slots of tasks that wait for them (see "Waiting inside a task" in the
// package documentation).
func (b *Bulkhead) Stats() bulkhead.Stats {
	b.mu.Lock()
	active, queued, waiting, maxWorkers, queueCap := b.active, b.queued, b.nwaiting, b.maxWorkers, b.queueCap
	permitted, cancelled, finished, failed := b.permitted, b.cancelled, b.finished, b.failed
	b.mu.Unlock()
	return bulkhead.Stats{
		Name:                     b.name,
		Kind:                     bulkhead.Pool,
		MaxConcurrentCalls:       maxWorkers,
		AvailableConcurrentCalls: max(0, maxWorkers-active),
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

// Close stops the Bulkhead. New work gets [bulkhead.ErrClosed] at once, and
// so do SubmitWait callers still waiting for room (counted Cancelled);
// running and queued tasks go on to finish, and Close waits for them and for
// the workers to be done with them (their callbacks included), then returns
// nil. The goroutines of the Bulkhead's ants pool exit at once after,
// without being waited for. If ctx ends first, the tasks still queued fail
// with ErrClosed (counted Cancelled), the running tasks' contexts are
// cancelled, and Close returns ctx.Err() without waiting for them; a later
// Close waits for them. Close may be called any number of times.
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
		for b.waiting.head != nil {
			n := b.waiting.head
			b.unwaitLocked(n)
			b.cancelled++
			n.state = stDone
			n.refused = true
			close(n.ready)
			refused = append(refused, n)
		}
		b.drainedLocked()
	}
	b.mu.Unlock()
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
	for b.queue.head != nil {
		n := b.queue.head
		b.dropLocked(n)
		b.cancelled++
		drop = append(drop, n)
	}
	for n := b.running.head; n != nil; n = n.next {
		n.ctx.cancel(context.Canceled)
	}
	b.mu.Unlock()
	b.droppedAll(drop, bulkhead.EventCancelled, bulkhead.ErrClosed)
	return ctx.Err()
}

// drainedLocked starts the release of the ants pool once the Bulkhead is
// closed and holds no task. b.mu must be held.
func (b *Bulkhead) drainedLocked() {
	if !b.closed.Load() || b.releasing || b.active > 0 || b.queued > 0 {
		return
	}
	b.releasing = true
	if b.timer != nil {
		b.timer.Stop()
		b.timerAt = 0
	}
	b.releaseLocked()
}

// releaseLocked releases the ants pool and then closes released, once the
// Bulkhead is drained and no goroutine runs its work (their callbacks
// included). ants' ReleaseContext busy-waits for its goroutines to exit;
// Release does not wait at all; it runs on a goroutine of its own since
// the caller may be one of those goroutines. b.mu must be held.
func (b *Bulkhead) releaseLocked() {
	if !b.releasing || b.releaseStarted || b.busy.Load() != 0 {
		return
	}
	b.releaseStarted = true
	p := b.ants.Load()
	go func() {
		p.Release()
		close(b.released)
	}()
}
