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
	"github.com/bulkhead-go/bulkhead/internal/shed"
)

// Bulkhead runs tasks on at most MaxWorkers worker goroutines, with a
// bounded queue of tasks waiting for a worker (first in, first out unless
// the Config's QueueOrder says otherwise), and rejects work at once when
// both are full. Submit tasks with [Submit] or [Bulkhead.TryGo], or wait
// for room with [Go] or [Bulkhead.Go]. A Bulkhead is safe for concurrent
// use; create one with [New] and stop it with [Bulkhead.Close].
type Bulkhead struct {
	// saturated: every worker busy and the queue full, so that a rejection
	// is one atomic load (G2_Reject); written under mu when it changes.
	saturated atomic.Bool
	closed    atomic.Bool             // set by Close, under mu
	rejected  [nReasons]atomic.Uint64 // by reason; counted without the lock on the rejection fast path

	name  string
	epoch time.Time // for now()
	hub   event.Hub[bulkhead.Event]
	cfg   atomic.Pointer[Config]
	full  atomic.Pointer[fullErrors]
	ants  atomic.Pointer[ants.PoolWithFunc]
	// busy counts the goroutines doing the Bulkhead's work (workers, and
	// timers that drop queued tasks), callbacks included: Close waits for 0.
	busy atomic.Int64

	mu sync.Mutex // guards everything below and every node's links and state
	// active counts the tasks running, lent those of them in the slot of a
	// task that waits for them (see help): active-lent slots are taken.
	active, lent int
	// line is the queue's order and CoDel state (see Config); shedNodes
	// the tasks its rules dropped while mu was held, for the holder to fail
	// once it is released (takeShedLocked).
	line      shed.Line
	shedNodes []*node
	// counters; Rejected is above
	permitted, cancelled, finished, failed uint64
	waiting                                queue         // submitters' tasks waiting for room (Go), oldest first
	queue                                  queue         // waiting for a worker, oldest first
	running                                queue         // for Close to cancel
	loanEnded                              chan struct{} // closed when a loan ends, if a wait wants to know (see help)
	released                               chan struct{} // closed when Close is done: drained, and no goroutine busy
	releasing                              bool          // released is closed or being closed
	keys                                   *lanes        // a keyed pool's lanes (see Keyed) or the classes' (Priorities), nil for a plain one
	satQueue                               int           // the queue depth that saturates: QueueCapacity, or (Displace) never
	shadow                                 *shadow       // Config.Shadow's pool (shadow.go); nil if the Config never had one
}

// fullErrors are the errors of every rejection, by reason: [0] of a task
// refused at once, [1] of one refused after it waited.
type fullErrors [2][nReasons]bulkhead.FullError

// nReasons bounds the reasons a pool refuses with.
const nReasons = bulkhead.ReasonDisplaced + 1

// New returns a Bulkhead named name with the given configuration. It fails
// if the name is empty or a field is out of range. Call Close to stop its
// goroutines.
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
	b := &Bulkhead{name: name, epoch: time.Now(), released: make(chan struct{})}
	if cfg.Priorities != nil {
		b.keys = newClasses()
	}
	p, err := b.newAnts(cfg)
	if err != nil {
		return nil, fmt.Errorf("pool %q: %w", name, err)
	}
	b.ants.Store(p)
	b.apply(cfg)
	return b, nil
}

// rethrow is the ants pool's panic handler: a panic in a callback on a
// worker ends the program, as on any goroutine (ants would log it).
func rethrow(v any) { panic(v) }

// newAnts makes the ants pool, unlimited: the Bulkhead counts the running
// tasks, and a worker is busy a moment after its slot is freed (callbacks).
func (b *Bulkhead) newAnts(cfg Config) (*ants.PoolWithFunc, error) {
	return ants.NewPoolWithFunc(-1, b.work, ants.WithExpiryDuration(cfg.keepAlive()), ants.WithPanicHandler(rethrow))
}

// apply installs cfg's limits and rejection errors. b.mu must be held.
func (b *Bulkhead) apply(cfg Config) {
	if cfg = cfg.deep(); cfg.Priorities != nil {
		b.keys.prio.set(&cfg, b.now())
	}
	b.applyShadow(&cfg)
	b.line.Set(cfg.QueueOrder, cfg.LIFOThreshold, cfg.CoDel)
	b.satQueue = cfg.QueueCapacity
	if cfg.Displace { // a full queue may still take a task that displaces one
		b.satQueue = MaxLimit + 1
	}
	b.cfg.Store(&cfg)
	fe := new(fullErrors)
	for w := range fe {
		for r := range fe[w] {
			fe[w][r] = bulkhead.FullError{Name: b.name, Kind: bulkhead.Pool, MaxConcurrentCalls: cfg.MaxWorkers,
				QueueCapacity: cfg.QueueCapacity, MaxWaitDuration: cfg.QueueTimeout, Waited: w == 1, Reason: bulkhead.Reason(r)}
		}
	}
	b.full.Store(fe)
}

// free reports whether a slot is free. b.mu must be held.
func (b *Bulkhead) free() bool { return b.active-b.lent < b.cfg.Load().MaxWorkers }

// storeSaturated updates saturated. b.mu must be held.
func (b *Bulkhead) storeSaturated() {
	if s := b.queue.len >= b.satQueue && !b.free(); s != b.saturated.Load() {
		b.saturated.Store(s)
	}
}

// Name returns the name the Bulkhead was created with.
func (b *Bulkhead) Name() string { return b.name }

// Config returns the configuration in force.
func (b *Bulkhead) Config() Config { return b.cfg.Load().deep() }

// deep returns c with its own copies of what its pointers point to: the
// caller's may change.
func (c Config) deep() Config {
	if c.CoDel != nil {
		v := *c.CoDel
		c.CoDel = &v
	}
	if c.Priorities != nil {
		v := *c.Priorities
		c.Priorities = &v
	}
	if c.Shadow != nil {
		v := *c.Shadow
		c.Shadow = &v
	}
	return c
}

// String returns `pool bulkhead "name"`.
func (b *Bulkhead) String() string { return fmt.Sprintf("pool bulkhead %q", b.name) }

// Subscribe calls fn with every event of this Bulkhead until cancel is
// called. fn is a callback (see the root package's "Callbacks"), run on the
// goroutine where the event happened; a task's future completes before its
// finished event.
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
// cancelled, when Close gives up waiting, and once fn returns; once the
// task is done it no longer carries ctx's values (see the package doc). A task still
// queued when ctx ends or its future is cancelled leaves the queue at once;
// its future fails with the context's error. A panic in fn fails the future
// with a [*bulkhead.PanicError], a runtime.Goexit fails it too.
func Submit[T any](ctx context.Context, b *Bulkhead, fn func(context.Context) (T, error)) (*future.Future[T], error) {
	return submit("Submit", ctx, b, fn, false)
}

// Go is [Submit] for fan-out that must run every task: with the queue full,
// it waits for room, first in, first out, as errgroup's Go waits, until ctx
// ends (ctx.Err(), counted Cancelled) or Close ([bulkhead.ErrClosed]).
// Waiting callers count in [bulkhead.Stats] Waiting. Called from a task of
// b with the task's context, it runs fn in the caller's slot instead, and
// returns once fn has finished (see "Waiting inside a task").
func Go[T any](ctx context.Context, b *Bulkhead, fn func(context.Context) (T, error)) (*future.Future[T], error) {
	return submit("Go", ctx, b, fn, true)
}

// TryGo is [Submit] for a function that returns only an error: it never
// waits.
func (b *Bulkhead) TryGo(ctx context.Context, fn func(context.Context) error) (*future.Future[struct{}], error) {
	return b.goErr("TryGo", ctx, fn, false)
}

// Go is [Go] for a function that returns only an error: it waits for room.
func (b *Bulkhead) Go(ctx context.Context, fn func(context.Context) error) (*future.Future[struct{}], error) {
	return b.goErr("Go", ctx, fn, true)
}

func (b *Bulkhead) goErr(name string, ctx context.Context, fn func(context.Context) error, wait bool) (*future.Future[struct{}], error) {
	if fn == nil {
		misuse(name, ctx, b)
	}
	return submit(name, ctx, b, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) }, wait)
}

// submit is Submit, Go, TryGo and Bulkhead.Go, named name for a misuse.
func submit[T any](name string, ctx context.Context, b *Bulkhead, fn func(context.Context) (T, error), wait bool) (*future.Future[T], error) {
	if fn == nil || ctx == nil || b == nil {
		misuse(name, ctx, b)
	}
	if err := b.precheck(ctx, wait); err != nil {
		return nil, err
	}
	t := newTask(b, ctx, fn)
	if err := b.admit(ctx, &t.node, wait); err != nil {
		return nil, err
	}
	return t.p.Future(), nil
}

// enter submits n, made with ctx: precheck, then admit.
func (b *Bulkhead) enter(ctx context.Context, n *node, wait bool) error {
	if err := b.precheck(ctx, wait); err != nil {
		return err
	}
	return b.admit(ctx, n, wait)
}

// misuse panics for a nil Context, *Bulkhead or function passed to name.
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

// reject is refuse for ReasonFull with constant indexes: 113 instructions
// in BenchmarkReject/serial, 123 through refuse.
func (b *Bulkhead) reject() error {
	fe := &b.full.Load()[0][bulkhead.ReasonFull]
	b.rejected[bulkhead.ReasonFull].Add(1)
	if b.hub.Active() {
		b.publish(bulkhead.EventRejected, fe, 0, 0)
	}
	return fe
}

// refuse counts and reports a rejection at submission for reason r.
func (b *Bulkhead) refuse(r bulkhead.Reason) error {
	fe := &b.full.Load()[0][r]
	b.rejected[r].Add(1)
	if b.hub.Active() {
		b.publish(bulkhead.EventRejected, fe, 0, 0)
	}
	return fe
}

// tooLate reports whether a task submitted with ctx, that would have to
// wait, has less than MinDeadlineSlack left. b.mu must be held.
func (b *Bulkhead) tooLate(ctx context.Context) bool {
	slack := b.cfg.Load().MinDeadlineSlack
	if slack <= 0 {
		return false
	}
	d, ok := ctx.Deadline()
	return ok && time.Until(d) <= slack
}

// admit is the one admission decision for n, a new task: start it, queue
// it, (wait) wait for room or run it in its submitting task's slot, or reject it.
func (b *Bulkhead) admit(ctx context.Context, n *node, wait bool) error {
	b.mu.Lock()
	switch {
	case b.closed.Load():
		b.mu.Unlock()
		return bulkhead.ErrClosed
	case b.keys != nil:
		return b.admitPrioLocked(ctx, n, wait)
	case b.free():
		b.startLocked(n)
		b.mu.Unlock()
		b.invoke(n)
		return nil
	case b.queue.len < b.cfg.Load().QueueCapacity:
		return b.queueLocked(ctx, n)
	case !wait:
		b.mu.Unlock()
		return b.reject()
	}
	return b.waitLocked(ctx, n, true)
}

// queueLocked queues n, a new task, unless its submitter's deadline leaves
// less than MinDeadlineSlack (tooLate). b.mu must be held and the queue
// have room; it is released.
func (b *Bulkhead) queueLocked(ctx context.Context, n *node) error {
	if b.tooLate(ctx) {
		b.tidyLocked(n)
		b.mu.Unlock()
		return b.refuse(bulkhead.ReasonDeadline)
	}
	b.enqueueLocked(n)
	b.mu.Unlock()
	return nil
}

// waitLocked has n's submitter wait for room, or (lend) runs n in its
// submitting task's slot, or refuses it. b.mu must be held; it is released.
func (b *Bulkhead) waitLocked(ctx context.Context, n *node, lend bool) error {
	if by := b.caller(ctx); lend && by != nil && !by.lent {
		b.lendLocked(by, n)
		b.mu.Unlock()
		b.runLent(n)
		return nil
	}
	r := bulkhead.ReasonNone
	switch limit := b.cfg.Load().MaxWaitingCalls; {
	case b.tooLate(ctx):
		r = bulkhead.ReasonDeadline
	case limit <= 0 || b.waiting.len < limit:
	case b.keys != nil && b.keys.prio != nil: // a waiter of a lower class leaves the line, if any (prio.go)
		if !b.bumpPrioLocked(n) {
			r = bulkhead.ReasonWaiters
		}
	case b.line.LIFO(b.queue.len): // the oldest waiters leave the line
		for b.waiting.len >= limit {
			w := b.waiting.head
			b.unwaitLocked(w)
			b.bumpLocked(w, bulkhead.ReasonWaiters)
		}
	default:
		r = bulkhead.ReasonWaiters
	}
	if r != bulkhead.ReasonNone {
		b.tidyLocked(n)
		b.mu.Unlock()
		return b.refuse(r)
	}
	if b.hub.Active() {
		n.queuedAt = b.now()
	}
	var point time.Duration // until its deadline less MinDeadlineSlack, if it has one
	if slack := b.cfg.Load().MinDeadlineSlack; slack > 0 {
		if dl, ok := ctx.Deadline(); ok {
			point = time.Until(dl) - slack // > 0: tooLate said so
			n.byDeadline, n.ax().deadline = true, b.now()+int64(point)
		}
	}
	n.state = stWaiting
	ready := make(chan struct{})
	n.ax().ready = ready
	b.waiting.push(n)
	if n.lane != nil {
		n.lane.waiting++
	}
	b.mu.Unlock()
	return b.awaitRoom(ctx, n, ready, point)
}

// leaveLineLocked takes n out of the line of waiting submitters and
// reports whether it may be started or queued: not if its submitter's
// context has ended (its awaitRoom has yet to see it), which cancels it,
// nor if its deadline less MinDeadlineSlack has come, which refuses it.
// b.mu must be held.
func (b *Bulkhead) leaveLineLocked(n *node) bool {
	if n.parent.Err() != nil { // reported by awaitRoom
		b.cancelWaitLocked(n)
		close(n.x.ready)
		return false
	}
	b.unwaitLocked(n)
	if n.byDeadline && n.x.deadline <= b.now() {
		b.bumpLocked(n, bulkhead.ReasonDeadline)
		b.tidyLocked(n)
		return false
	}
	return true
}

// bumpLocked refuses n, a waiting submitter's task out of the line, for r;
// its submitter's awaitRoom reports it. b.mu must be held.
func (b *Bulkhead) bumpLocked(n *node, r bulkhead.Reason) {
	n.state, n.bumped, n.reason = stDone, true, r
	b.rejected[r].Add(1)
	close(n.x.ready)
}

// cancelWaitLocked takes n out of the line of waiting submitters, counted
// Cancelled: its submitter's context has ended, or Close refused it (which
// sets refused too). awaitRoom reports it. b.mu must be held.
func (b *Bulkhead) cancelWaitLocked(n *node) {
	b.unwaitLocked(n)
	b.tidyLocked(n)
	b.cancelled++
	n.state, n.bumped, n.reason = stDone, true, bulkhead.ReasonNone
}

// awaitRoom waits until n, a waiting submitter's task, is admitted or
// refused (by Close, bumpLocked, or after point > 0, when its deadline less
// MinDeadlineSlack comes), or ctx ends.
func (b *Bulkhead) awaitRoom(ctx context.Context, n *node, ready <-chan struct{}, point time.Duration) error {
	var late <-chan time.Time
	if point > 0 {
		tm := time.NewTimer(point)
		defer tm.Stop()
		late = tm.C
	}
	early := true // woken by the timer or ctx, not by ready: takes the lock
	select {
	case <-ready:
		early = false
	case <-late:
	case <-ctx.Done():
	}
	if early {
		err := ctx.Err()
		b.mu.Lock()
		switch {
		case n.state != stWaiting: // admitted or refused meanwhile: ready is closed
		case err == nil: // its deadline less MinDeadlineSlack has come
			n.x.deadline = b.now() // leaveLineLocked's point, whatever the clocks' rounding
			b.leaveLineLocked(n)
		default:
			b.cancelWaitLocked(n)
		}
		b.mu.Unlock()
	}
	if n.refused {
		return bulkhead.ErrClosed
	}
	if n.bumped && n.reason == bulkhead.ReasonNone { // its context ended: counted by cancelWaitLocked
		err := ctx.Err()
		if b.hub.Active() {
			b.publish(bulkhead.EventCancelled, err, b.sinceOrZero(n.queuedAt), 0)
		}
		return err
	}
	if n.bumped { // counted by bumpLocked; published here, not on its goroutine
		fe := &b.full.Load()[1][n.reason]
		if b.hub.Active() {
			b.publish(bulkhead.EventRejected, fe, b.sinceOrZero(n.queuedAt), 0)
		}
		return fe
	}
	return nil
}

// startLocked counts n running. b.mu must be held, a slot free or lent.
func (b *Bulkhead) startLocked(n *node) {
	b.active++
	if n.lane != nil {
		n.lane.running++
	}
	n.state = stRunning
	b.running.push(n)
	b.permitted++
	b.storeSaturated()
	if b.shadow != nil {
		b.shadowStart(n)
	}
}

// enqueueLocked puts n at the back of the queue, until QueueTimeout or its
// submitter's context ends. b.mu must be held and the queue have room.
func (b *Bulkhead) enqueueLocked(n *node) {
	if n.queuedAt == 0 && b.hub.Active() {
		n.queuedAt = b.now()
	}
	n.state = stQueued
	if b.shadow != nil {
		b.shadowAdmit(n, false)
	}
	if n.lane != nil {
		b.lanePushLocked(n)
	} else {
		b.queue.push(n)
	}
	b.storeSaturated()
	cfg := b.cfg.Load()
	if b.line.Clocked() {
		n.joined = b.now()
	}
	d, r := cfg.QueueTimeout, bulkhead.ReasonTimeout
	if n.byDeadline = false; n.x != nil {
		n.x.deadline = 0
	}
	if cfg.MinDeadlineSlack > 0 { // else no Deadline call per queued task
		if dl, ok := n.parent.Deadline(); ok {
			if w := time.Until(dl) - cfg.MinDeadlineSlack; d == 0 || w < d {
				d, r, n.byDeadline = max(w, 1), bulkhead.ReasonDeadline, true
			}
		}
	}
	if d > 0 {
		// popLocked compares deadline too: the timer's callback may not
		// have the lock yet when a worker frees.
		x := n.ax()
		x.deadline = b.now() + int64(d)
		x.expiry = time.AfterFunc(d, func() { b.dropBy(n, &b.full.Load()[1][r], bulkhead.EventRejected) })
	}
	if parent := n.parent; parent.Done() != nil && n.grp == nil { // a Group watches its context itself (Group.ended)
		// parent's own error: a Wait may have made n.parent a child of it
		// (Signal) that is not cancelled yet when this runs.
		n.ax().stop = context.AfterFunc(parent, func() { b.dropBy(n, parent.Err(), bulkhead.EventCancelled) })
	}
}

// unqueueLocked takes n out of the queue and lets a waiting submitter's
// task in. b.mu must be held.
func (b *Bulkhead) unqueueLocked(n *node) {
	if n.lane != nil {
		b.laneRemoveLocked(n)
	} else {
		b.queue.remove(n)
	}
	if b.queue.len == 0 {
		b.line.Empty() // an empty queue stands no more (CoDel)
	}
	if x := n.x; x != nil {
		if x.stop != nil {
			x.stop()
			x.stop = nil
		}
		if x.expiry != nil {
			x.expiry.Stop()
			x.expiry = nil
		}
	}
	b.refillLocked()
}

// refillLocked moves waiting submitters' tasks into the queue while it has
// room.
func (b *Bulkhead) refillLocked() {
	if b.keys != nil {
		b.refillKeyedLocked()
		return
	}
	for n := b.waiting.head; n != nil && b.queue.len < b.cfg.Load().QueueCapacity; n = b.waiting.head {
		if b.leaveLineLocked(n) {
			b.enqueueLocked(n)
			close(n.x.ready)
		}
	}
	b.storeSaturated()
}

// popLocked takes the next waiting task, or nil, for the caller to start:
// the queue's next by the Config's order (its head, or its tail while
// LIFO), else the oldest waiting submitter's. The tasks takeLocked refuses
// on the way go to shedNodes, so that none starts or holds back the line.
func (b *Bulkhead) popLocked() *node {
	if b.keys != nil {
		return b.popKeyedLocked()
	}
	var t int64 // read once, for the rules that need the time
	for n := b.queue.head; n != nil; n = b.queue.head {
		head := n
		if b.line.LIFO(b.queue.len) {
			n = b.queue.tail
		}
		if b.takeLocked(n, head, &t) {
			return n
		}
	}
	for n := b.waiting.head; n != nil; n = b.waiting.head {
		if b.leaveLineLocked(n) {
			close(n.x.ready)
			return n
		}
	}
	return nil
}

// takeLocked takes n out of the queue and reports whether it may start
// (head is the queue's head, for CoDel's sojourn): not if its submitter's
// context has ended (the drop that context.AfterFunc runs may not have the
// lock yet), CoDel sheds it, or its deadline (QueueTimeout, or its
// context's less MinDeadlineSlack) has come; it then sheds it. *t is the
// time, read at the first rule that needs it.
func (b *Bulkhead) takeLocked(n, head *node, t *int64) bool {
	x := n.rd()
	if *t == 0 && (b.line.Clocked() || x.deadline != 0) {
		*t = b.now()
	}
	switch {
	case (x.stop != nil || n.grp != nil) && n.parent.Err() != nil:
		b.cancelled++ // failed with the context's error (droppedAll)
		b.shedLocked(n, bulkhead.ReasonNone)
	case b.line.Clocked() && b.line.Serve(*t, *t-n.joined, *t-head.joined):
		b.shedLocked(n, bulkhead.ReasonCoDel)
	case x.deadline != 0 && x.deadline <= *t && n.byDeadline:
		b.shedLocked(n, bulkhead.ReasonDeadline) // never started too late
	case x.deadline != 0 && x.deadline <= *t:
		b.shedLocked(n, bulkhead.ReasonTimeout)
	default:
		b.unqueueLocked(n)
		return true
	}
	return false
}

// shedLocked takes n out of the queue, refused for r (none: its context
// ended), for the caller to fail once b.mu is released (takeShedLocked).
func (b *Bulkhead) shedLocked(n *node, r bulkhead.Reason) {
	b.dropLocked(n)
	n.reason = r
	if r != bulkhead.ReasonNone {
		b.rejected[r].Add(1)
	}
	b.shedNodes = append(b.shedNodes, n)
}

// dropBy is dropQueued on a timer's goroutine (QueueTimeout, or n's
// submitter's context ended), counted busy.
func (b *Bulkhead) dropBy(n *node, err error, typ bulkhead.EventType) {
	b.busy.Add(1) // before the drop can find the bulkhead drained
	defer b.workDone()
	b.dropQueued(n, err, typ)
}

// invoke hands n to an ants worker (Invoke fails only on a replaced pool).
func (b *Bulkhead) invoke(n *node) {
	b.busy.Add(1)
	for b.ants.Load().Invoke(n) != nil {
	}
}

// work is the ants pool's function: it runs n, counted running, then the
// next tasks finish hands it. A panic or runtime.Goexit in a task fails its
// future; one in a subscriber of its EventPermitted fails it unrun. After a
// recovered panic the next task goes to another worker. One frame and one
// defer for all of it (G3_Join/ours_pool_Submit_Wait).
func (b *Bulkhead) work(arg any) {
	n := arg.(*node)
	var start time.Time
	started, returned := false, false
	defer func() {
		if returned {
			b.workDone()
			return
		}
		defer b.workDone() // also if a callback that finish runs calls runtime.Goexit
		n.err = errNotRun
		if started {
			n.err = errGoexit
			if r := recover(); r != nil {
				n.err = &bulkhead.PanicError{Value: r, Stack: debug.Stack()}
			}
		}
		b.finish(n, start, true) // the next task goes to another worker
	}()
	for n != nil {
		started, returned, start = false, false, time.Time{}
		if b.hub.Active() {
			start = clock.Now()
			var wait time.Duration
			if n.queuedAt != 0 { // the wait from the same clock read: b.now() at start
				wait = time.Duration((int64(start.Sub(b.epoch)) | 1) - n.queuedAt)
			}
			b.publishAt(bulkhead.EventPermitted, start, nil, wait, 0)
		}
		started = true
		n.j.exec()
		returned = true
		n = b.finish(n, start, false)
	}
}

// workDone ends a busy goroutine's work. Close stores closed before it
// reads busy: either this sees closed, or Close sees this decrement.
func (b *Bulkhead) workDone() {
	if b.busy.Add(-1) == 0 && b.closed.Load() {
		b.releaseIfDone()
	}
}

// finish frees n's slot (ending its loan), picks this worker's next task,
// ends n's context, then completes n's future and publishes EventFinished.
// If a callback ends the goroutine, or it is leaving, the next task goes to
// another worker. n's Group hears of its failure before the slot is freed
// (see Group.end).
func (b *Bulkhead) finish(n *node, start time.Time, leaving bool) (next *node) {
	if n.grp != nil || n.lane != nil || n.x != nil && n.x.lender != nil { // x is not written while n runs
		return b.finishMore(n, start, leaving)
	}
	// A task of no Group, lane or loan: the same steps with fewer values
	// kept across calls (G3_Join/ours_pool_Submit_Wait).
	b.mu.Lock()
	b.finished++
	if n.err != nil {
		b.failed++
	}
	b.running.remove(n)
	n.state = stDone
	if b.shadow != nil {
		b.shadowDone(n)
	}
	b.active--
	if b.queue.len+b.waiting.len > 0 && b.free() {
		if next = b.popLocked(); next != nil {
			b.startLocked(next)
		}
	}
	b.storeSaturated()
	sh := b.takeShedLocked()
	b.mu.Unlock()
	n.drop()
	pub := b.hub.Active()
	if next == nil && sh == nil && !pub {
		n.j.settle()
		return nil
	}
	if next != nil && (leaving || pub) {
		b.invoke(next)
		next = nil
	}
	return b.settle(n, next, nil, nil, sh, pub, start, n.err)
}

// finishMore is finish for a task of a Group, of a lane or in a lent slot.
func (b *Bulkhead) finishMore(n *node, start time.Time, leaving bool) (next *node) {
	err := n.err
	grp := n.grp
	if grp != nil && err != nil {
		grp.end(n, err)
	}
	b.mu.Lock()
	b.finished++
	if err != nil {
		b.failed++
	}
	b.running.remove(n)
	n.state = stDone
	if b.shadow != nil {
		b.shadowDone(n)
	}
	b.active--
	var loanEnded, ended chan struct{}
	if n.lane != nil {
		n.lane.running--
		b.tidyLocked(n)
	}
	if x := n.x; x != nil && x.lender != nil {
		x.lender.lent = false
		x.lender = nil
		b.lent--
		ended, loanEnded, b.loanEnded = x.ready, b.loanEnded, nil
	}
	if b.queue.len+b.waiting.len > 0 && b.free() {
		if next = b.popLocked(); next != nil {
			b.startLocked(next)
		}
	}
	if next == nil && grp != nil && b.keys == nil && b.free() && !b.closed.Load() {
		// A Go waiting at grp's limit starts in n's slot: see Group.take.
		if next = grp.take(n); next != nil {
			b.startLocked(next)
		}
	}
	var more []*node // a keyed pool's tasks that may start too
	if n.lane != nil {
		more = b.kickLocked()
	}
	b.storeSaturated()
	sh := b.takeShedLocked()
	b.mu.Unlock()
	n.drop()
	pub := b.hub.Active()
	if next != nil && (leaving || pub) {
		b.invoke(next)
		next = nil
	}
	for _, m := range more {
		b.invoke(m)
	}
	if next == nil && ended == nil && sh == nil && !pub {
		// Nothing is left to do if a callback ends the goroutine: no defer
		// (G3_Join/ours_pool_Submit_Wait).
		n.j.settle()
		return nil
	}
	return b.settle(n, next, ended, loanEnded, sh, pub, start, err)
}

// settle is the rest of finish: it completes n's future, then ends n's
// loan, hands next to another worker if a callback ends the goroutine,
// fails the tasks sh that the queue's rules refused, and publishes
// EventFinished if pub.
func (b *Bulkhead) settle(n, next *node, ended, loanEnded chan struct{}, sh []*node, pub bool, start time.Time, err error) *node {
	settled := false
	defer func() {
		// The lender resumes after n's callbacks (a gather's hook), so
		// that a gather decided by n starts nothing more in its slot.
		if ended != nil {
			close(ended)
		}
		if loanEnded != nil {
			close(loanEnded)
		}
		if !settled && next != nil {
			b.invoke(next)
		}
		b.refusedAll(sh)
	}()
	n.j.settle() // runs the future's callbacks
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

// dropQueued takes n out of the queue, if it is there, counted as typ says
// (EventCancelled or EventRejected), and fails it with err (nil: its
// submitter's context's error). It reports whether n was queued.
func (b *Bulkhead) dropQueued(n *node, err error, typ bulkhead.EventType) bool {
	b.mu.Lock()
	if n.state != stQueued {
		b.mu.Unlock()
		return false
	}
	b.dropLocked(n)
	more, sh := b.kickLocked(), b.takeShedLocked() // a keyed pool's next tasks
	if fe, ok := err.(*bulkhead.FullError); ok {
		b.rejected[fe.Reason].Add(1)
	} else {
		b.cancelled++
	}
	if err == nil {
		err = n.parent.Err()
	}
	b.mu.Unlock()
	b.startAll(more, sh)
	b.droppedAll([]*node{n}, typ, err)
	if b.closed.Load() {
		b.releaseIfDone()
	}
	return true
}

// takeShedLocked returns the tasks shed (shedLocked), counting a busy
// goroutine that refusedAll ends: Close waits for their futures. b.mu must be held.
func (b *Bulkhead) takeShedLocked() []*node {
	sh := b.shedNodes
	if sh != nil {
		b.shedNodes = nil
		b.busy.Add(1)
	}
	return sh
}

// startAll hands the tasks started under b.mu to workers, and fails those
// shed (refusedAll), once b.mu is released.
func (b *Bulkhead) startAll(start, shed []*node) {
	for _, n := range start {
		b.invoke(n)
	}
	b.refusedAll(shed)
}

// refusedAll fails the tasks shed (droppedAll) and ends takeShedLocked's
// busy count; nil does nothing.
func (b *Bulkhead) refusedAll(ns []*node) {
	if ns == nil {
		return
	}
	defer b.workDone()
	b.droppedAll(ns, 0, nil)
}

// dropLocked takes a queued node out of the queue. b.mu must be held.
func (b *Bulkhead) dropLocked(n *node) {
	b.unqueueLocked(n)
	n.state = stDone
	if b.shadow != nil {
		b.shadowDone(n)
	}
	b.tidyLocked(n)
}

// droppedAll fails the futures of tasks dropped unrun with err and
// publishes typ for each, every one even if a callback ends the goroutine.
// A nil err takes each task's from its reason (see shedLocked): its
// reason's error, or its submitter's context's if that ended.
func (b *Bulkhead) droppedAll(ns []*node, typ bulkhead.EventType, err error) {
	i := 0
	defer func() {
		if i < len(ns) {
			b.droppedAll(ns[i+1:], typ, err)
		}
	}()
	for ; i < len(ns); i++ {
		n, t, e := ns[i], typ, err
		switch {
		case e != nil:
		case n.reason == bulkhead.ReasonNone:
			t, e = bulkhead.EventCancelled, n.parent.Err()
		default:
			t, e = bulkhead.EventRejected, &b.full.Load()[1][n.reason]
		}
		if n.grp != nil {
			n.grp.end(n, e)
		}
		n.err = e
		n.drop()
		n.j.settle()
		if b.hub.Active() {
			b.publish(t, e, b.sinceOrZero(n.queuedAt), 0)
		}
	}
}

// now returns the monotonic time since the Bulkhead was made, never 0:
// a stamp from it is positive, in a testing/synctest bubble too.
func (b *Bulkhead) now() int64 { return int64(time.Since(b.epoch)) | 1 }

// sinceOrZero returns the time since t (from now), or 0 if t is 0.
func (b *Bulkhead) sinceOrZero(t int64) time.Duration {
	if t == 0 {
		return 0
	}
	return time.Duration(b.now() - t)
}

// publish and publishAt publish an event of type typ.
func (b *Bulkhead) publish(typ bulkhead.EventType, err error, wait, run time.Duration) {
	b.publishAt(typ, clock.Now(), err, wait, run)
}

func (b *Bulkhead) publishAt(typ bulkhead.EventType, at time.Time, err error, wait, run time.Duration) {
	b.hub.Publish(bulkhead.Event{Name: b.name, Kind: bulkhead.Pool, Type: typ, Time: at,
		Err: err, Wait: wait, Run: run})
}

// Reconfigure applies cfg without blocking. More workers start waiting
// tasks at once; fewer let the running tasks finish and start no more until
// fewer than the new MaxWorkers run. A smaller queue keeps the tasks it holds
// but admits none until it is below the new capacity. A new QueueTimeout
// applies to tasks queued after the call (a task keeps the deadline it was
// queued with); CoDel switched on counts the queued tasks' sojourn from the
// call; a new KeepAlive applies to workers started after it. A change of
// MaxWorkers publishes [bulkhead.EventLimitChanged]. After Close it returns
// [bulkhead.ErrClosed].
func (b *Bulkhead) Reconfigure(cfg Config) error {
	return b.ReconfigureFunc(func(Config) (Config, bool) { return cfg, true })
}

// ReconfigureFunc applies, as Reconfigure does, the configuration that f
// returns given the one in force, or changes nothing if f returns false. f
// runs under the Bulkhead's lock, so nothing changes the configuration
// between its read and the change; it must not call the Bulkhead.
func (b *Bulkhead) ReconfigureFunc(f func(Config) (Config, bool)) error {
	old, start, shed, limit, err := b.reconfigureLocked(f)
	if old != nil {
		old.Release() // does not wait: its busy workers exit once their tasks are done
	}
	b.startAll(start, shed)
	if limit > 0 && b.hub.Active() {
		b.hub.Publish(bulkhead.Event{Name: b.name, Kind: bulkhead.Pool, Type: bulkhead.EventLimitChanged,
			Time: clock.Now(), Limit: limit})
	}
	return err
}

// reconfigureLocked applies f's configuration under b.mu. It returns the
// ants pool replaced, the tasks to start, the tasks its rules refused and
// the new MaxWorkers if that changed.
func (b *Bulkhead) reconfigureLocked(f func(Config) (Config, bool)) (old *ants.PoolWithFunc, start, shed []*node, limit int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return nil, nil, nil, 0, bulkhead.ErrClosed
	}
	cfg, ok := f(b.Config())
	if !ok {
		return nil, nil, nil, 0, nil
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, nil, 0, fmt.Errorf("pool %q: %w", b.name, err)
	}
	if on := b.keys != nil && b.keys.prio != nil; (cfg.Priorities != nil) != on {
		return nil, nil, nil, 0, fmt.Errorf("pool %q: priorities cannot be switched on or off by Reconfigure (in force: %v)", b.name, on)
	}
	if cfg.keepAlive() != b.cfg.Load().keepAlive() {
		// ants cannot change a pool's expiry: start a new pool and let the
		// old one's workers finish what they run, then exit.
		p, err := b.newAnts(cfg)
		if err != nil {
			return nil, nil, nil, 0, fmt.Errorf("pool %q: %w", b.name, err)
		}
		old = b.ants.Swap(p)
	}
	if cfg.MaxWorkers != b.cfg.Load().MaxWorkers {
		limit = cfg.MaxWorkers
	}
	clocked := b.line.Clocked()
	b.apply(cfg)
	if !clocked && b.line.Clocked() { // CoDel from now: a task's sojourn from now, not from 0
		t := b.now()
		for n := b.queue.head; n != nil; n = n.next {
			n.joined = t
		}
	}
	start = b.kickQueuedLocked()
	b.refillLocked()
	start = append(start, b.kickLocked()...) // a keyed pool's waiters refilled into lanes that may start
	return old, start, b.takeShedLocked(), limit, nil
}

// Stats returns a snapshot of the Bulkhead's state and counters, all but
// Rejected read together, so Permitted - Finished == InFlight. InFlight may
// exceed MaxWorkers after Reconfigure lowered it, and by the tasks that run
// in the slots of tasks waiting for them ("Waiting inside a task").
func (b *Bulkhead) Stats() bulkhead.Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.cfg.Load()
	var by [len(bulkhead.Reasons) + 1]uint64
	var rejected uint64
	for r := range b.rejected {
		by[r] = b.rejected[r].Load()
		rejected += by[r]
	}
	return bulkhead.Stats{Name: b.name, Kind: bulkhead.Pool, MaxConcurrentCalls: c.MaxWorkers,
		AvailableConcurrentCalls: max(0, c.MaxWorkers-b.active+b.lent), InFlight: b.active,
		Waiting: b.waiting.len, QueueDepth: b.queue.len, QueueCapacity: c.QueueCapacity,
		Permitted: b.permitted, Rejected: rejected, RejectedBy: by, Cancelled: b.cancelled,
		Finished: b.finished, Failed: b.failed, Overloaded: b.line.Overloaded(), LIFO: b.line.LIFO(b.queue.len)}
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
		for n := b.waiting.head; n != nil; n = b.waiting.head {
			b.cancelWaitLocked(n)
			n.refused = true
			close(n.x.ready)
			refused = append(refused, n)
		}
	}
	b.mu.Unlock()
	b.releaseIfDone()
	if b.hub.Active() {
		for _, n := range refused {
			b.publish(bulkhead.EventCancelled, bulkhead.ErrClosed, b.sinceOrZero(n.queuedAt), 0)
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
	for n := b.firstQueuedLocked(); n != nil; n = b.firstQueuedLocked() {
		b.dropLocked(n)
		b.cancelled++
		drop = append(drop, n)
	}
	for n := b.running.head; n != nil; n = n.next {
		n.end()
	}
	b.mu.Unlock()
	b.droppedAll(drop, bulkhead.EventCancelled, bulkhead.ErrClosed)
	b.releaseIfDone()
	return ctx.Err()
}

// releaseIfDone lets Close return once the Bulkhead is closed, holds no
// task, and no goroutine is busy with its work.
func (b *Bulkhead) releaseIfDone() {
	b.mu.Lock()
	if !b.closed.Load() || b.releasing || b.active > 0 || b.queue.len > 0 || b.busy.Load() != 0 {
		b.mu.Unlock()
		return
	}
	b.releasing = true
	b.stopAgingLocked()
	b.mu.Unlock()
	b.ants.Load().Release()
	close(b.released)
}
