package reliability

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// pfModel is the pool bulkhead as a few lines of sequential code: a worker
// limit, the running tasks, a FIFO queue with deadlines, and the counters.
type pfModel struct {
	limit, qcap  int
	wait         time.Duration
	lifo         bool      // QueueOrder LIFO: the newest queued task starts first
	prio         bool      // Priorities (the defaults, no aging): ceilings per class, the queue served highest class first
	wceil, qcap4 [4]int    // with prio: each class's ceilings of taken workers and of queue slots (Sheddable first)
	active       int       // tasks counted running
	lent         int       // of those, the ones running in the slot of a task that waits for them
	running      []*pfTask // of those, the ones still running (quick ones finish at once)
	queue        []*pfTask
	permitted    uint64
	rejected     uint64
	by           [len(bulkhead.Reasons) + 1]uint64 // rejections by reason
	cancelled    uint64
	finished     uint64
	failed       uint64
	closed       bool
}

// pfTask is one accepted Submit.
type pfTask struct {
	id        int
	class     int                      // with prio: its class, 0 (Sheddable) to 3 (CriticalPlus)
	blocking  bool                     // waits for release or its context; else returns at once
	queued    bool                     // in the model's queue
	done      bool                     // the model says its future has completed
	want      string                   // when done: ok, fail, panic, cancelled, dropped, expired, closed
	deadline  time.Time                // zero: no QueueTimeout
	cancel    context.CancelFunc       // the submitter's context
	release   chan int                 // how a blocking task returns: 0 value, 1 error, 2 panic
	wait      chan *future.Future[int] // a blocking task waits for this future, then carries on
	f, then   *future.Future[int]      // its future, and a Then future of it
	runs      atomic.Int32             // times the function started
	thens     atomic.Int32             // times a Then callback on the future ran
	waitOn    *pfTask                  // the task whose future this one waits for, if not done
	lender    *pfTask                  // the task whose wait started this one in its slot
	loanEnded bool                     // the model has given the lender its slot back
	waiting   atomic.Bool              // blocked in a wait inside the task
	checked   bool
	v         int
	err       error
}

// start counts t running: it was admitted at once or left the queue.
func (m *pfModel) start(t *pfTask) {
	m.permitted++
	m.active++
	t.queued = false
	m.running = append(m.running, t)
}

// finish ends a running task with outcome; its worker takes the oldest
// queued task if a slot is free (counting the finishing task's, unless it
// ran in a lender's slot, which its lender takes back), as the pool does.
func (m *pfModel) finish(t *pfTask, outcome string) {
	m.finished++
	if outcome != "ok" {
		m.failed++
	}
	t.done, t.want = true, outcome
	for i, x := range m.running {
		if x == t {
			m.running = append(m.running[:i:i], m.running[i+1:]...)
			break
		}
	}
	if t.lender != nil && !t.loanEnded {
		m.lent--
		t.loanEnded = true
	}
	if m.prio {
		m.active--
		m.kick()
		return
	}
	if len(m.queue) > 0 && m.active-m.lent <= m.limit {
		h := m.pop()
		m.active--
		m.start(h)
		return
	}
	m.active--
}

// setCeilings computes the classes' ceilings of the limits in force, as
// the pool does (bulkhead.Priorities.Ceiling of the defaults).
func (m *pfModel) setCeilings() {
	var p bulkhead.Priorities
	for c := range 4 {
		m.wceil[c] = p.Ceiling(bulkhead.Sheddable+bulkhead.Priority(c), m.limit)
		m.qcap4[c] = p.Ceiling(bulkhead.Sheddable+bulkhead.Priority(c), m.qcap)
	}
}

// best returns the index in the queue of the task a prioritized pool
// starts next: the oldest of the highest class queued; -1 if none.
func (m *pfModel) best() int {
	b := -1
	for i, t := range m.queue {
		if b < 0 || t.class > m.queue[b].class {
			b = i
		}
	}
	return b
}

// kick starts, with prio, queued tasks while a worker is free and the
// class of the next one has room under its ceiling.
func (m *pfModel) kick() {
	for len(m.queue) > 0 && m.active-m.lent < m.limit {
		i := m.best()
		if m.active-m.lent >= m.wceil[m.queue[i].class] {
			return
		}
		t := m.queue[i]
		m.queue = append(m.queue[:i:i], m.queue[i+1:]...)
		m.start(t)
	}
}

// pop takes the queued task a free worker starts: the oldest, or the
// newest in LIFO order, or with prio the best.
func (m *pfModel) pop() *pfTask {
	i := 0
	if m.lifo {
		i = len(m.queue) - 1
	}
	if m.prio {
		i = m.best()
	}
	h := m.queue[i]
	m.queue = append(m.queue[:i:i], m.queue[i+1:]...)
	return h
}

// settle lets every quick running task return.
func (m *pfModel) settle() {
	for again := true; again; {
		again = false
		for _, t := range m.running {
			if !t.blocking {
				m.finish(t, "ok")
				again = true
				break
			}
		}
	}
}

// busy reports whether t waits for a task that is not done.
func (t *pfTask) busy() bool { return t.waitOn != nil && !t.waitOn.done }

// reaches reports whether t's chain of waits leads to u.
func (t *pfTask) reaches(u *pfTask) bool {
	for ; t != nil; t = t.waitOn {
		if t == u {
			return true
		}
		if !t.busy() {
			return false
		}
	}
	return false
}

func (m *pfModel) unqueue(t *pfTask) {
	for i, x := range m.queue {
		if x == t {
			m.queue = append(m.queue[:i:i], m.queue[i+1:]...)
			t.queued = false
			return
		}
	}
}

// FuzzPoolStateMachine decodes its input into operations on a pool
// bulkhead and on pfModel: submit a quick or a blocking task, cancel a task
// (by its future or its submitter's context), let time pass (queued tasks
// expire), release a blocking task (it returns, fails or panics),
// reconfigure workers, queue, QueueTimeout and KeepAlive, close (giving
// up at once, or waiting on another goroutine), submit with a context
// already done, and make a blocking task wait, with its own context, for
// another task's future or Then future: a queued one is helped (started at
// once in the waiting task's slot), a running one awaited. After every step,
// once every goroutine is idle, it checks Stats against the model, that no
// task started with more tasks running than the limit in force (counted
// inside the tasks; a task blocked in a wait does not run, and a helped task
// must start only while its lender is blocked), that the queue only
// grows while under its capacity, and that every future has completed
// exactly when the model says, with the result it says, and that no task
// ran twice. At the end it drains and closes the pool and checks the
// at-rest invariants; synctest then checks that no goroutine is left. CI
// runs it briefly with
//
//	go test -run '^$' -fuzz '^FuzzPoolStateMachine$' -fuzztime 10s ./reliability
func FuzzPoolStateMachine(f *testing.F) {
	f.Add([]byte{1, 0, 1, 0, 0, 0, 4, 0, 4, 0})
	f.Add([]byte{5, 0x11, 1, 0, 1, 0, 1, 0, 1, 0, 3, 2, 4, 0x10, 2, 0, 2, 0x81, 6, 0})
	f.Add([]byte{5, 0x25, 1, 0, 1, 0, 0, 0, 1, 0, 5, 0x03, 5, 0x42, 4, 0, 3, 7, 6, 1, 4, 0, 0, 0})
	f.Add([]byte{5, 0xac, 1, 1, 1, 0, 1, 1, 1, 0, 4, 0, 4, 0, 4, 0, 3, 5, 5, 0xa0, 1, 1, 1, 1, 4, 0, 3, 9})
	// Helping: a task waits for a queued task (run in its slot), then for
	// a Then future of a queued quick task; a task waits for a running one
	// and is cancelled while waiting.
	f.Add([]byte{1, 0, 1, 0, 0, 0, 1, 0, 8, 0x08, 4, 0x01, 8, 0x80, 4, 0})
	f.Add([]byte{1, 0, 1, 0, 1, 0, 8, 0x08, 2, 0x80, 8, 0, 6, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 400 {
			data = data[:400]
		}
		defer kickScheduler()()
		synctest.Test(t, func(t *testing.T) { runPoolModel(t, data, false) })
	})
}

// FuzzPoolPriorityStateMachine is FuzzPoolStateMachine on a pool with
// Priorities (the default ceilings, no aging) and a Shadow: each submit
// has a class (0 to 3 from its argument), a task starts while its class's
// ceiling of workers has room and none of its class is queued, queues
// while its class's ceiling of queue slots has room, and is refused with
// ReasonPriority (ReasonFull once the pool is full) otherwise; queued
// tasks start highest class first, first in, first out within a class,
// and any of them can be started in a waiting task's slot. Inside the tasks it checks that none started with more running
// than its class's ceiling; after every step, the model's Stats; and that
// the shadow, which must not change any of it, holds at most its one
// worker, and nothing once the pool is drained. CI runs it briefly with
//
//	go test -run '^$' -fuzz '^FuzzPoolPriorityStateMachine$' -fuzztime 30000x ./reliability
func FuzzPoolPriorityStateMachine(f *testing.F) {
	f.Add([]byte{1, 0, 1, 0, 0, 0, 4, 0, 4, 0})
	// Sheddable, Critical, Sheddable, CriticalPlus blocking tasks on 2
	// workers and 2 slots; releases; a reconfigure to 4 workers.
	f.Add([]byte{1, 0, 1, 1, 1, 0, 1, 3, 1, 2, 4, 0, 4, 0, 5, 0x07, 4, 0, 4, 0})
	f.Add([]byte{5, 0x0f, 1, 0, 1, 0, 1, 1, 1, 3, 0, 2, 3, 2, 8, 0x08, 4, 0x11, 2, 0x81, 6, 0})
	f.Add([]byte{1, 2, 1, 2, 1, 0, 1, 0, 8, 0x08, 4, 0x01, 8, 0x80, 4, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 400 {
			data = data[:400]
		}
		defer kickScheduler()()
		synctest.Test(t, func(t *testing.T) { runPoolModel(t, data, true) })
	})
}

func runPoolModel(t *testing.T, data []byte, prio bool) {
	m := &pfModel{limit: 2, qcap: 2, prio: prio}
	cfg := pool.Config{MaxWorkers: m.limit, QueueCapacity: m.qcap, KeepAlive: time.Second}
	// the shadow: one worker, and a queue timeout shorter than any the
	// fuzzer configures, so that it stays valid whatever it reconfigures
	shadow := &pool.Shadow{MaxWorkers: 1, QueueTimeout: 500 * time.Microsecond}
	var ceilInForce [4]atomic.Int64 // with prio: each class's ceiling of tasks running
	if prio {
		cfg.Priorities, cfg.Shadow = &bulkhead.Priorities{}, shadow
		m.setCeilings()
		for c := range ceilInForce {
			ceilInForce[c].Store(int64(m.wceil[c]))
		}
	}
	b, err := pool.New("fuzz", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var limitInForce atomic.Int64 // the largest number of tasks that may run now
	limitInForce.Store(int64(m.limit))
	var runningNow atomic.Int64
	var overLimit atomic.Value // string: the first violation seen inside a task
	var all []*pfTask
	var accepted, immediate uint64
	var closer chan error // a Close waiting on another goroutine
	var trace strings.Builder
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("after %s: %s", trace.String(), fmt.Sprintf(format, args...))
	}
	lastDepth := 0

	submit := func(blocking bool, arg byte) {
		ctx, cancel := context.WithCancel(context.Background())
		pt := &pfTask{id: len(all), blocking: blocking, cancel: cancel, release: make(chan int, 1), wait: make(chan *future.Future[int])}
		kind := map[bool]string{false: "quick", true: "block"}[blocking]
		fmt.Fprintf(&trace, "submit-%s#%d ", kind, pt.id)
		if prio {
			pt.class = int(arg % 4)
			ctx = bulkhead.WithPriority(ctx, bulkhead.Sheddable+bulkhead.Priority(pt.class))
			fmt.Fprintf(&trace, "(class %d) ", pt.class)
		}
		fut, err := pool.Submit(ctx, b, func(ctx context.Context) (int, error) {
			pt.runs.Add(1)
			n, l := runningNow.Add(1), limitInForce.Load()
			switch {
			case pt.lender != nil: // started in the slot of a task blocked waiting for it
				if !pt.lender.waiting.Load() {
					overLimit.CompareAndSwap(nil, fmt.Sprintf("task %d started in the slot of task %d, which is not waiting", pt.id, pt.lender.id))
				}
			case n > l:
				overLimit.CompareAndSwap(nil, fmt.Sprintf("task %d started with %d running, limit %d", pt.id, n, l))
			case prio && n > ceilInForce[pt.class].Load():
				overLimit.CompareAndSwap(nil, fmt.Sprintf("task %d of class %d started with %d running, its ceiling %d", pt.id, pt.class, n, ceilInForce[pt.class].Load()))
			}
			defer runningNow.Add(-1)
			if !blocking {
				return pt.id, nil
			}
			for {
				select {
				case how := <-pt.release:
					switch how {
					case 1:
						return 0, errWork
					case 2:
						panic("fuzz")
					}
					return pt.id, nil
				case f := <-pt.wait:
					// Blocked in Wait, this task does not run: the task it
					// helps may run in its slot.
					pt.waiting.Store(true)
					runningNow.Add(-1)
					f.Wait(ctx)
					runningNow.Add(1)
					pt.waiting.Store(false)
					if err := ctx.Err(); err != nil {
						return 0, err
					}
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}
		})
		switch {
		case m.closed:
			if err != bulkhead.ErrClosed {
				fail("Submit after Close = %v, want ErrClosed", err)
			}
			trace.WriteString("(closed) ")
			cancel()
			return
		case prio && m.active-m.lent < m.limit && m.active-m.lent < m.wceil[pt.class] && !slices.ContainsFunc(m.queue, func(x *pfTask) bool { return x.class == pt.class }):
			if err != nil {
				fail("Submit of class %d with a free worker under its ceiling = %v", pt.class, err)
			}
			all = append(all, pt)
			m.start(pt)
		case prio && len(m.queue) < m.qcap4[pt.class]:
			if err != nil {
				fail("Submit of class %d with room in the queue under its ceiling = %v", pt.class, err)
			}
			all = append(all, pt)
			pt.queued = true
			if m.wait > 0 {
				pt.deadline = time.Now().Add(m.wait)
			}
			m.queue = append(m.queue, pt)
		case prio:
			r := bulkhead.ReasonPriority
			if m.active-m.lent >= m.limit && len(m.queue) >= m.qcap {
				r = bulkhead.ReasonFull
			}
			var fe *bulkhead.FullError
			if !errors.As(err, &fe) || fe.Waited || fe.Reason != r {
				fail("Submit of class %d = %v, want an immediate FullError for %v", pt.class, err, r)
			}
			m.rejected++
			m.by[r]++
			immediate++
			fmt.Fprintf(&trace, "(%v) ", r)
			cancel()
			return
		case m.active-m.lent < m.limit:
			if err != nil {
				fail("Submit with a free worker = %v", err)
			}
			all = append(all, pt)
			m.start(pt)
		case len(m.queue) < m.qcap:
			if err != nil {
				fail("Submit with room in the queue = %v", err)
			}
			all = append(all, pt)
			pt.queued = true
			if m.wait > 0 {
				pt.deadline = time.Now().Add(m.wait)
			}
			m.queue = append(m.queue, pt)
		default:
			var fe *bulkhead.FullError
			if !errors.As(err, &fe) || fe.Waited {
				fail("Submit on a full pool = %v, want an immediate FullError", err)
			}
			m.rejected++
			m.by[bulkhead.ReasonFull]++
			immediate++
			trace.WriteString("(full) ")
			cancel()
			return
		}
		accepted++
		pt.f = fut
		pt.then = future.Then(fut, func(v int) (int, error) { pt.thens.Add(1); return v, nil })
		m.settle()
	}

	check := func() {
		t.Helper()
		synctest.Wait() // every goroutine has done what it can
		if v := overLimit.Load(); v != nil {
			fail("%s", v)
		}
		for _, pt := range all {
			if pt.runs.Load() > 1 {
				fail("task %d ran %d times", pt.id, pt.runs.Load())
			}
			if pt.checked {
				continue
			}
			select {
			case <-pt.f.Done():
			default:
				if pt.done {
					fail("task %d: future pending, model says %s", pt.id, pt.want)
				}
				if pt.thens.Load() != 0 {
					fail("task %d: a Then callback ran on a pending future", pt.id)
				}
				continue
			}
			if !pt.done {
				fail("task %d: future completed while the model says it is pending", pt.id)
			}
			v, err := pt.f.Result()
			var fe *bulkhead.FullError
			var pe *bulkhead.PanicError
			ran := int32(1)
			ok := true
			switch pt.want {
			case "ok":
				ok = v == pt.id && err == nil
			case "fail":
				ok = err == errWork
			case "panic":
				ok = errors.As(err, &pe) && pe.Value == "fuzz"
			case "cancelled":
				ok = err == context.Canceled
			case "dropped":
				ok, ran = err == context.Canceled, 0
			case "expired":
				ok, ran = errors.As(err, &fe) && fe.Waited, 0
			case "closed":
				ok, ran = err == bulkhead.ErrClosed, 0
			}
			if !ok {
				fail("task %d completed with %v, %v; model says %s", pt.id, v, err, pt.want)
			}
			if pt.runs.Load() != ran {
				fail("task %d ran %d times, model says %s", pt.id, pt.runs.Load(), pt.want)
			}
			if want := map[bool]int32{true: 1, false: 0}[pt.want == "ok"]; pt.thens.Load() != want {
				fail("task %d: Then callback ran %d times", pt.id, pt.thens.Load())
			}
			pt.checked, pt.v, pt.err = true, v, err
		}
		s := b.Stats()
		want := bulkhead.Stats{Name: "fuzz", Kind: bulkhead.Pool, MaxConcurrentCalls: m.limit,
			AvailableConcurrentCalls: max(0, m.limit-m.active+m.lent), InFlight: m.active,
			QueueDepth: len(m.queue), QueueCapacity: m.qcap, Permitted: m.permitted, Rejected: m.rejected, RejectedBy: m.by, LIFO: m.lifo,
			Cancelled: m.cancelled, Finished: m.finished, Failed: m.failed}
		if s != want {
			fail("stats\n got %+v\nwant %+v", s, want)
		}
		if s.QueueDepth > s.QueueCapacity && s.QueueDepth > lastDepth {
			fail("the queue grew to %d over its capacity %d", s.QueueDepth, s.QueueCapacity)
		}
		lastDepth = s.QueueDepth
		if prio {
			ss, ok := b.ShadowStats()
			if !ok || ss.InUse < 0 || ss.InUse > 1 || ss.QueueDepth < 0 || ss.WouldWait+ss.WouldReject > accepted {
				fail("shadow %+v (%v), want at most its 1 worker held and at most %d tasks counted", ss, ok, accepted)
			}
		}
		if closer != nil {
			select {
			case err := <-closer:
				if m.active > 0 || len(m.queue) > 0 {
					fail("Close returned %v with tasks still running or queued", err)
				}
				if err != nil {
					fail("Close = %v once drained", err)
				}
				closer = nil
			default:
				if m.active == 0 && len(m.queue) == 0 {
					fail("Close still waits on a drained pool")
				}
			}
		}
	}
	pending := func() []*pfTask {
		var ps []*pfTask
		for _, pt := range all {
			if !pt.done && !pt.queued {
				ps = append(ps, pt) // running
			}
		}
		return append(ps, m.queue...)
	}

	for i := 0; i+1 < len(data); i += 2 {
		op, arg := data[i]%9, data[i+1]
		switch op {
		case 0, 1:
			submit(op == 1, arg)
		case 2: // cancel a pending task, by its future or its context
			// (not one that lends its slot: it ends only once the task in
			// its slot has, which the model does not follow)
			var ps []*pfTask
			for _, pt := range pending() {
				if !pt.busy() || pt.waitOn.lender != pt {
					ps = append(ps, pt)
				}
			}
			if len(ps) == 0 {
				continue
			}
			pt := ps[int(arg&0x7f)%len(ps)]
			if arg&0x80 != 0 {
				fmt.Fprintf(&trace, "cancel-ctx#%d ", pt.id)
				pt.cancel()
			} else {
				fmt.Fprintf(&trace, "cancel-future#%d ", pt.id)
				pt.f.Cancel()
			}
			if pt.queued {
				m.unqueue(pt)
				m.cancelled++
				pt.done, pt.want = true, "dropped"
				if prio {
					m.kick()
					m.settle()
				}
			} else {
				m.finish(pt, "cancelled")
				m.settle()
			}
		case 3: // let time pass: queued tasks past their deadline expire
			d := time.Duration(1+arg%8) * time.Millisecond
			fmt.Fprintf(&trace, "sleep(%v) ", d)
			end := time.Now().Add(d)
			time.Sleep(d)
			for _, pt := range append([]*pfTask(nil), m.queue...) {
				if !pt.deadline.IsZero() && !pt.deadline.After(end) {
					m.unqueue(pt)
					m.rejected++
					m.by[bulkhead.ReasonTimeout]++
					pt.done, pt.want = true, "expired"
				}
			}
			if prio {
				m.kick()
				m.settle()
			}
		case 4: // a blocking running task returns, fails or panics
			var rs []*pfTask
			for _, pt := range m.running {
				if pt.blocking && !pt.busy() {
					rs = append(rs, pt)
				}
			}
			if len(rs) == 0 {
				continue
			}
			pt := rs[int(arg&0x0f)%len(rs)]
			how := int(arg>>4) % 3
			fmt.Fprintf(&trace, "release#%d(%d) ", pt.id, how)
			pt.release <- how
			m.finish(pt, []string{"ok", "fail", "panic"}[how])
			m.settle()
		case 5: // Reconfigure
			nc := pool.Config{MaxWorkers: 1 + int(arg%4), QueueCapacity: int(arg>>2) % 4,
				QueueTimeout: []time.Duration{0, time.Millisecond, 3 * time.Millisecond, 0}[arg>>4%4],
				KeepAlive:    cfg.KeepAlive}
			if arg&0x40 != 0 {
				nc.KeepAlive = 3*time.Second - cfg.KeepAlive // 1s <-> 2s: a new ants pool
			}
			if arg&0x80 != 0 && nc.QueueTimeout > 0 && nc.QueueCapacity > 0 && !prio {
				nc.QueueOrder = bulkhead.LIFO
			}
			var ceil [4]int
			if prio {
				nc.Priorities, nc.Shadow = &bulkhead.Priorities{}, shadow
				var p bulkhead.Priorities
				for c := range ceil {
					ceil[c] = p.Ceiling(bulkhead.Sheddable+bulkhead.Priority(c), nc.MaxWorkers)
					if int64(ceil[c]) > ceilInForce[c].Load() {
						ceilInForce[c].Store(int64(ceil[c]))
					}
				}
			}
			fmt.Fprintf(&trace, "reconfigure(%d,%d,%v,%v,%v) ", nc.MaxWorkers, nc.QueueCapacity, nc.QueueTimeout, nc.KeepAlive, nc.QueueOrder)
			if int64(nc.MaxWorkers) > limitInForce.Load() {
				limitInForce.Store(int64(nc.MaxWorkers)) // before: Reconfigure may start tasks
			}
			err := b.Reconfigure(nc)
			if m.closed {
				if err != bulkhead.ErrClosed {
					fail("Reconfigure after Close = %v", err)
				}
				continue
			}
			if err != nil {
				fail("Reconfigure: %v", err)
			}
			limitInForce.Store(int64(nc.MaxWorkers)) // after: nothing starts until under it
			for c := range ceil {
				if prio {
					ceilInForce[c].Store(int64(ceil[c]))
				}
			}
			cfg = nc
			m.limit, m.qcap, m.wait, m.lifo = nc.MaxWorkers, nc.QueueCapacity, nc.QueueTimeout, nc.QueueOrder == bulkhead.LIFO
			if prio {
				m.setCeilings()
				m.kick()
			}
			for len(m.queue) > 0 && m.active-m.lent < m.limit && !prio {
				m.start(m.pop())
			}
			m.settle()
		case 6: // Close
			if arg%2 == 1 {
				if closer != nil || m.closed {
					continue
				}
				fmt.Fprintf(&trace, "close-wait ")
				closer = make(chan error, 1)
				go func() { closer <- b.Close(context.Background()) }()
				synctest.Wait() // Close has refused new work and waits
				m.closed = true
				break
			}
			fmt.Fprintf(&trace, "close-now ")
			idle := m.active == 0 && len(m.queue) == 0
			ended, cancel := context.WithCancel(context.Background())
			cancel()
			err := b.Close(ended)
			if err != context.Canceled && !(idle && err == nil) {
				fail("Close(ended ctx) = %v (idle %v)", err, idle)
			}
			m.closed = true
			for _, pt := range m.queue {
				m.cancelled++
				pt.queued, pt.done, pt.want = false, true, "closed"
			}
			m.queue = nil
			for len(m.running) > 0 {
				m.finish(m.running[0], "cancelled")
			}
		case 7: // a context already done: refused, counted nowhere
			fmt.Fprintf(&trace, "submit(done ctx) ")
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := pool.Submit(ctx, b, func(context.Context) (int, error) { return 0, nil }); err != context.Canceled {
				fail("Submit(done ctx) = %v", err)
			}
		case 8: // a blocking running task waits, with its context, for another task's future or Then future
			var ws []*pfTask
			for _, pt := range m.running {
				if pt.blocking && !pt.busy() {
					ws = append(ws, pt)
				}
			}
			if len(ws) == 0 {
				continue
			}
			w := ws[int(arg&0x07)%len(ws)]
			var ts []*pfTask // queued ones twice, so that it helps more often than not
			for _, pt := range append(append([]*pfTask(nil), m.queue...), pending()...) {
				if !pt.reaches(w) {
					ts = append(ts, pt)
				}
			}
			if len(ts) == 0 {
				continue
			}
			pt := ts[int(arg>>3&0x0f)%len(ts)]
			f, via := pt.f, "future"
			if arg&0x80 != 0 {
				f, via = pt.then, "then"
			}
			fmt.Fprintf(&trace, "wait#%d-on-%s#%d ", w.id, via, pt.id)
			w.waitOn = pt
			if pt.queued { // helped, whatever its class and place: it starts at once in w's slot
				pt.lender = w
				m.lent++
				m.unqueue(pt)
				m.start(pt)
				if prio {
					m.kick() // the queue's head may now be of a class with room
				}
			}
			w.wait <- f
			m.settle()
		}
		check()
	}

	// Drain: cancel the queue, release every running task, close, and the
	// bulkhead must be at rest with every Submit accounted for.
	fmt.Fprintf(&trace, "| drain")
	for _, pt := range append([]*pfTask(nil), m.queue...) {
		pt.f.Cancel()
		m.unqueue(pt)
		m.cancelled++
		pt.done, pt.want = true, "dropped"
	}
	for len(m.running) > 0 {
		pt := m.running[0]
		pt.release <- 0
		m.finish(pt, "ok")
	}
	check()
	if err := b.Close(context.Background()); err != nil {
		fail("final Close: %v", err)
	}
	m.closed = true
	check()
	s := b.Stats()
	if s.InFlight != 0 || s.QueueDepth != 0 || s.AvailableConcurrentCalls != s.MaxConcurrentCalls || s.Permitted != s.Finished {
		fail("not at rest: %+v", s)
	}
	if ss, ok := b.ShadowStats(); prio && (!ok || ss.InUse != 0 || ss.QueueDepth != 0) {
		fail("the drained pool's shadow holds %+v", ss)
	}
	if s.Permitted+s.Rejected+s.Cancelled != accepted+immediate {
		fail("accepted %d + refused at once %d != Permitted %d + Rejected %d + Cancelled %d",
			accepted, immediate, s.Permitted, s.Rejected, s.Cancelled)
	}
	for _, pt := range all {
		if v, err := pt.f.Result(); v != pt.v || err != pt.err {
			fail("task %d's result changed from %v, %v to %v, %v", pt.id, pt.v, pt.err, v, err)
		}
		pt.cancel()
	}
}
