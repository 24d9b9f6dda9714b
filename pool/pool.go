package pool

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/ants/v2"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
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
// [Bulkhead.Go]. A Bulkhead is safe for concurrent use; create one with
// [New] and stop it with [Bulkhead.Close].
type Bulkhead struct {
	// load packs active<<32 | queued and limits packs maxWorkers<<32 |
	// queueCap, so that a rejection is decided from two atomic loads.
	load     atomic.Uint64
	limits   atomic.Uint64
	closed   atomic.Bool
	rejected atomic.Uint64 // counted without the lock, on the rejection fast path

	name string
	hub  event.Hub[bulkhead.Event]
	cfg  atomic.Pointer[Config]
	full atomic.Pointer[fullErrors]
	ants atomic.Pointer[ants.PoolWithFunc]

	mu         sync.Mutex // guards everything below and every node's links and state
	active     int        // tasks running (or handed to a worker to run)
	queued     int
	maxWorkers int
	queueCap   int
	maxWait    time.Duration
	keepAlive  time.Duration
	// counters; Rejected is above
	permitted, cancelled, finished, failed uint64
	queue                                  list // waiting for a worker, oldest first
	running                                list // active tasks, for Close to cancel
	closing                                bool
	releasing                              bool           // the release goroutine has started
	released                               chan struct{}  // closed when every goroutine of the bulkhead is gone
	retired                                sync.WaitGroup // releases of ants pools replaced by Reconfigure
	spill                                  sync.WaitGroup // goroutines started when ants had no free worker
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

func (b *Bulkhead) newAnts(cfg Config) (*ants.PoolWithFunc, error) {
	return ants.NewPoolWithFunc(antsHeadroom*cfg.MaxWorkers, b.work,
		ants.WithExpiryDuration(cfg.keepAlive()), ants.WithNonblocking(true))
}

// apply installs cfg's limits and rejection errors. b.mu must be held, or b
// not yet shared.
func (b *Bulkhead) apply(cfg Config) {
	b.maxWorkers, b.queueCap, b.maxWait = cfg.MaxWorkers, cfg.QueueCapacity, cfg.QueueTimeout
	b.limits.Store(uint64(cfg.MaxWorkers)<<32 | uint64(cfg.QueueCapacity))
	b.cfg.Store(&cfg)
	e := bulkhead.FullError{Name: b.name, Kind: bulkhead.Pool, MaxConcurrentCalls: cfg.MaxWorkers,
		QueueCapacity: cfg.QueueCapacity, MaxWaitDuration: cfg.QueueTimeout}
	w := e
	w.Waited = true
	b.full.Store(&fullErrors{now: &e, waited: &w})
}

// storeLoad publishes active and queued for the lock-free rejection check
// and Stats. b.mu must be held.
func (b *Bulkhead) storeLoad() { b.load.Store(uint64(b.active)<<32 | uint64(b.queued)) }

// Name returns the name the Bulkhead was created with.
func (b *Bulkhead) Name() string { return b.name }

// Config returns the configuration in force.
func (b *Bulkhead) Config() Config { return *b.cfg.Load() }

// String returns `pool bulkhead "name"`.
func (b *Bulkhead) String() string { return fmt.Sprintf("pool bulkhead %q", b.name) }

// Subscribe calls fn with every event of this Bulkhead until cancel is
// called. fn runs with no lock held on the goroutine where the event
// happened (the submitter, a worker, a timer). On a worker, the finished
// event comes after the task's slot has been freed, but before the worker
// takes its next task, so fn must be quick and must not block. A panic in fn
// is recovered and ignored; a runtime.Goexit in fn ends that goroutine but
// loses no task or future.
func (b *Bulkhead) Subscribe(fn func(bulkhead.Event)) (cancel func()) {
	return b.hub.Subscribe(fn)
}

// Submit runs fn on a worker of b and returns its future, without blocking.
// If a worker is free, fn starts at once; if all are busy and the queue has
// room, it waits there, first in, first out; otherwise Submit returns a
// [*bulkhead.FullError] (matching [bulkhead.ErrBulkheadFull]). It returns
// ctx.Err() if ctx has already ended and [bulkhead.ErrClosed] after Close.
//
// fn receives a context that carries ctx's values and deadline and is
// cancelled when ctx ends, when the future is cancelled, when Close gives up
// waiting, and once fn returns. A task still queued when ctx ends or its
// future is cancelled leaves the queue at once and never runs; its future
// fails with the context's error. A panic in fn completes the future with a
// [*bulkhead.PanicError]; the worker carries on.
//
// The task's context is cheap when unused: it starts watching ctx only when
// the task is queued or first asks for its Done channel, and makes its view
// of ctx's values on the first Value call.
func Submit[T any](ctx context.Context, b *Bulkhead, fn func(context.Context) (T, error)) (*future.Future[T], error) {
	if fn == nil || ctx == nil {
		misuse("Submit", ctx == nil)
	}
	if err := b.precheck(ctx); err != nil {
		return nil, err
	}
	t := &task[T]{fn: fn}
	if err := b.admit(ctx, t); err != nil {
		return nil, err
	}
	return t.p.Future(), nil
}

// Go is [Submit] for a function that returns only an error.
func (b *Bulkhead) Go(ctx context.Context, fn func(context.Context) error) (*future.Future[struct{}], error) {
	if fn == nil || ctx == nil {
		misuse("Go", ctx == nil)
	}
	if err := b.precheck(ctx); err != nil {
		return nil, err
	}
	t := &task[struct{}]{fnErr: fn}
	if err := b.admit(ctx, t); err != nil {
		return nil, err
	}
	return t.p.Future(), nil
}

// misuse panics for a nil Context or function passed to name: a bug in the
// caller, reported before anything is counted.
func misuse(name string, nilContext bool) {
	if nilContext {
		panic("pool: " + name + " called with a nil Context")
	}
	panic("pool: " + name + " called with a nil function")
}

// precheck refuses work without locking or allocating: a context that has
// ended, a closed bulkhead, or a full one.
func (b *Bulkhead) precheck(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.closed.Load() {
		return bulkhead.ErrClosed
	}
	l, m := b.load.Load(), b.limits.Load()
	if l>>32 >= m>>32 && uint32(l) >= uint32(m) {
		return b.reject()
	}
	return nil
}

// reject counts and reports a rejection at submission.
func (b *Bulkhead) reject() error {
	b.rejected.Add(1)
	fe := b.full.Load().now
	if b.hub.Active() {
		b.publish(bulkhead.EventRejected, fe, 0, 0)
	}
	return fe
}

// admit starts or queues t, or rejects it.
func (b *Bulkhead) admit(ctx context.Context, t interface {
	job
	base() *node
	init()
}) error {
	t.init()
	n := t.base()
	n.b, n.j = b, t
	n.ctx.n, n.ctx.parent, n.ctx.hide = n, ctx, ctx.Done() != nil
	b.mu.Lock()
	switch {
	case b.closing:
		b.mu.Unlock()
		return bulkhead.ErrClosed
	case b.active < b.maxWorkers:
		b.startLocked(n)
		b.mu.Unlock()
		b.start(n)
		return nil
	case b.queued < b.queueCap:
		n.state = stQueued
		b.queue.pushBack(n)
		b.queued++
		b.storeLoad()
		if b.maxWait > 0 {
			n.timer = time.AfterFunc(b.maxWait, n.expire)
		}
		if b.hub.Active() {
			n.queuedAt = now()
		}
		b.mu.Unlock()
		// A queued task leaves the queue as soon as ctx ends. If it has
		// already started by now, or even finished, watch sorts that out.
		n.ctx.watch()
		return nil
	}
	b.mu.Unlock()
	return b.reject()
}

func (t *task[T]) base() *node { return &t.node }
func (t *task[T]) init()       { t.p.Init(&t.node) }

// startLocked counts n as running. b.mu must be held and a worker free.
func (b *Bulkhead) startLocked(n *node) {
	b.active++
	n.state = stRunning
	b.running.pushBack(n)
	b.permitted++
	b.storeLoad()
}

// start hands n, just counted running, to a worker, after publishing
// EventPermitted if anyone listens. A subscriber that calls runtime.Goexit
// does not strand n.
func (b *Bulkhead) start(n *node) {
	if b.hub.Active() {
		defer b.invoke(n)
		b.publish(bulkhead.EventPermitted, nil, sinceOrZero(n.queuedAt), 0)
		return
	}
	b.invoke(n)
}

// each calls fn for every node of ns, and goes on with the rest even if fn
// calls runtime.Goexit (a subscriber or a future callback may), before the
// goroutine ends.
func each(ns []*node, fn func(*node)) {
	for i, n := range ns {
		normal := false
		func() {
			defer func() {
				if !normal {
					each(ns[i+1:], fn)
				}
			}()
			fn(n)
			normal = true
		}()
	}
}

// invoke hands a started node to a worker, without blocking: an idle ants
// worker if there is one, else a new goroutine that Close waits for. The
// ants pool may have no idle worker although fewer than MaxWorkers tasks
// run, since its workers stay busy after their tasks' slots are freed (see
// antsHeadroom).
func (b *Bulkhead) invoke(n *node) {
	for {
		p := b.ants.Load()
		err := p.Invoke(n)
		if err == nil {
			return
		}
		if err == ants.ErrPoolClosed && b.ants.Load() != p {
			continue // Reconfigure replaced the pool under us
		}
		b.spill.Add(1) // the bulkhead is not released while n is counted running
		go func() {
			defer b.spill.Done()
			b.work(n)
		}()
		return
	}
}

// work is the ants pool's function: it runs n, then, while tasks are
// queued and the worker limit allows, the oldest of them, on this goroutine.
func (b *Bulkhead) work(arg any) {
	for n := arg.(*node); n != nil; {
		n = b.run(n)
	}
}

// run runs one task and returns the next one this worker should run.
func (b *Bulkhead) run(n *node) (next *node) {
	var start time.Time
	if b.hub.Active() {
		start = time.Now()
	}
	returned := false
	defer func() {
		if returned {
			return
		}
		if r := recover(); r != nil {
			n.j.setErr(&bulkhead.PanicError{Value: r, Stack: debug.Stack()})
			next = b.finish(n, start)
			return
		}
		// runtime.Goexit: this goroutine is ending; pass the queue on.
		n.j.setErr(errGoexit)
		if nx := b.finish(n, start); nx != nil {
			b.invoke(nx)
		}
	}()
	n.j.exec()
	returned = true
	return b.finish(n, start)
}

// finish accounts for a task that has run, picks the next queued task for
// this worker (or lets the worker go idle), and completes the future. The
// accounting comes first, so whoever sees the future done also sees the
// worker free.
func (b *Bulkhead) finish(n *node, start time.Time) (next *node) {
	err := n.j.result()
	b.mu.Lock()
	b.finished++
	if err != nil {
		b.failed++
	}
	b.running.remove(n)
	n.state = stDone
	if b.queued > 0 && b.active <= b.maxWorkers {
		next = b.queue.popFront()
		b.queued--
		b.active-- // startLocked counts it again
		b.startLocked(next)
		if next.timer != nil {
			next.timer.Stop()
		}
	} else {
		b.active--
		b.storeLoad()
		b.drainedLocked()
	}
	b.mu.Unlock()
	n.ctx.end(context.Canceled, true)
	normal := false
	defer func() {
		if !normal {
			// A subscriber or a future callback called runtime.Goexit, and
			// this goroutine is ending: complete the future (if that is not
			// what was running) and hand next to another worker first.
			n.j.settle()
			if next != nil {
				b.invoke(next)
			}
		}
	}()
	if b.hub.Active() {
		var run time.Duration
		if !start.IsZero() {
			run = time.Since(start)
		}
		b.publish(bulkhead.EventFinished, err, 0, run)
		if next != nil {
			b.publish(bulkhead.EventPermitted, nil, sinceOrZero(next.queuedAt), 0)
		}
	}
	n.j.settle()
	normal = true
	return next
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

// expire drops n if it is still queued after QueueTimeout.
func (b *Bulkhead) expire(n *node) {
	b.mu.Lock()
	if n.state != stQueued {
		b.mu.Unlock()
		return
	}
	b.dropLocked(n)
	b.rejected.Add(1)
	b.mu.Unlock()
	b.dropped(n, bulkhead.EventRejected, b.full.Load().waited)
}

// dropLocked takes a queued node out of the queue. b.mu must be held.
func (b *Bulkhead) dropLocked(n *node) {
	b.queue.remove(n)
	b.queued--
	n.state = stDone
	b.storeLoad()
	if n.timer != nil {
		n.timer.Stop()
	}
	b.drainedLocked()
}

// dropped completes the future of a node that left the queue without running.
func (b *Bulkhead) dropped(n *node, typ bulkhead.EventType, err error) {
	n.ctx.end(context.Canceled, true)
	if b.hub.Active() {
		defer n.j.fail(err) // even if a subscriber calls runtime.Goexit
		b.publish(typ, err, sinceOrZero(n.queuedAt), 0)
		return
	}
	n.j.fail(err)
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
	b.hub.Publish(bulkhead.Event{Name: b.name, Kind: bulkhead.Pool, Type: typ, Time: time.Now(),
		Err: err, Wait: wait, Run: run})
}

// Reconfigure applies cfg without blocking. More workers start queued tasks
// at once; fewer let the running tasks finish and start no more until fewer
// than the new MaxWorkers run. A smaller queue keeps the tasks it holds but
// admits none until it is below the new capacity. A new QueueTimeout
// applies to tasks queued after the call; a new KeepAlive to workers started
// after it. After Close it returns [bulkhead.ErrClosed].
func (b *Bulkhead) Reconfigure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("pool %q: %w", b.name, err)
	}
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return bulkhead.ErrClosed
	}
	if ka := cfg.keepAlive(); ka != b.keepAlive {
		// ants cannot change a pool's expiry: start a new pool and let the
		// old one's workers finish what they run, then exit.
		p, err := b.newAnts(cfg)
		if err != nil {
			b.mu.Unlock()
			return fmt.Errorf("pool %q: %w", b.name, err)
		}
		old := b.ants.Swap(p)
		b.keepAlive = ka
		b.retired.Add(1)
		go func() {
			defer b.retired.Done()
			_ = old.ReleaseContext(context.Background())
		}()
	} else {
		b.ants.Load().Tune(antsHeadroom * cfg.MaxWorkers)
	}
	b.apply(cfg)
	var start []*node
	for b.queued > 0 && b.active < b.maxWorkers {
		n := b.queue.popFront()
		b.queued--
		b.startLocked(n)
		if n.timer != nil {
			n.timer.Stop()
		}
		start = append(start, n)
	}
	b.storeLoad()
	b.mu.Unlock()
	each(start, b.start)
	return nil
}

// Stats returns a snapshot of the Bulkhead's state and counters. All fields
// but Rejected are read together, under the lock that guards them.
func (b *Bulkhead) Stats() bulkhead.Stats {
	b.mu.Lock()
	active, queued, maxWorkers, queueCap := b.active, b.queued, b.maxWorkers, b.queueCap
	permitted, cancelled, finished, failed := b.permitted, b.cancelled, b.finished, b.failed
	b.mu.Unlock()
	return bulkhead.Stats{
		Name:                     b.name,
		Kind:                     bulkhead.Pool,
		MaxConcurrentCalls:       maxWorkers,
		AvailableConcurrentCalls: max(0, maxWorkers-active),
		InFlight:                 active,
		QueueDepth:               queued,
		QueueCapacity:            queueCap,
		Permitted:                permitted,
		Rejected:                 b.rejected.Load(),
		Cancelled:                cancelled,
		Finished:                 finished,
		Failed:                   failed,
	}
}

// Close stops the Bulkhead. New work gets [bulkhead.ErrClosed] at once;
// running and queued tasks go on to finish, and Close waits for them and for
// every goroutine of the Bulkhead to exit, then returns nil. If ctx ends
// first, the tasks still queued fail with ErrClosed (counted Cancelled), the
// running tasks' contexts are cancelled, and Close returns ctx.Err() without
// waiting for them; the goroutines exit once those tasks return, and a later
// Close waits for that. Close may be called any number of times.
func (b *Bulkhead) Close(ctx context.Context) error {
	b.mu.Lock()
	if !b.closing {
		b.closing = true
		b.closed.Store(true)
		b.drainedLocked()
	}
	b.mu.Unlock()
	select {
	case <-b.released: // checked first: once released, Close returns nil whatever ctx
		return nil
	default:
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
	each(drop, func(n *node) { b.dropped(n, bulkhead.EventCancelled, bulkhead.ErrClosed) })
	return ctx.Err()
}

// drainedLocked starts the release of the ants pool once the Bulkhead is
// closed and holds no task. b.mu must be held.
func (b *Bulkhead) drainedLocked() {
	if !b.closing || b.releasing || b.active > 0 || b.queued > 0 {
		return
	}
	b.releasing = true
	p := b.ants.Load()
	go func() {
		// This waits for the ants workers and housekeeping goroutines to
		// exit; it may have been started by one of those workers.
		_ = p.ReleaseContext(context.Background())
		b.retired.Wait()
		b.spill.Wait()
		close(b.released)
	}()
}
