package pool

import (
	"context"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// A pool with Config.Priorities keeps its queue in the lanes of a keyed
// pool's scheduler, one per class, and serves them highest class first
// (prio below) instead of round robin.

// classes is a prioritized pool's part of its lanes. b.mu guards it.
type classes struct {
	lanes        [4]lane // Sheddable first
	workers, qus [4]int  // each class's ceilings of taken workers and queue slots
	aging        time.Duration
	since        int64 // from now(): when Aging was switched on; no task ages from before it
	displace     bool  // Config.Displace
	// tick re-checks the queue and the line at the next aging step of a
	// task a ceiling holds back beside a free worker or queue slot (see
	// ageLocked), at (from now()); at is 0 while it is not armed.
	tick *time.Timer
	at   int64
}

// newClasses returns the lanes of a pool with priorities.
func newClasses() *lanes {
	ks := &lanes{prio: new(classes), perRun: MaxLimit, perQueue: MaxLimit}
	for c := range ks.prio.lanes {
		ks.prio.lanes[c].class = int8(c)
	}
	return ks
}

// set installs cfg's ceilings at t, from now(). b.mu must be held (or b
// unshared).
func (cs *classes) set(cfg *Config, t int64) {
	for c := range cs.lanes {
		p := bulkhead.Sheddable + bulkhead.Priority(c)
		cs.workers[c] = cfg.Priorities.Ceiling(p, cfg.MaxWorkers)
		cs.qus[c] = cfg.Priorities.Ceiling(p, cfg.QueueCapacity)
	}
	if cs.aging == 0 && cfg.Priorities.Aging > 0 {
		cs.since = t // the tasks queued before age from now, not from when they joined
	}
	cs.aging, cs.displace = cfg.Priorities.Aging, cfg.Displace
}

// victimLocked returns the task a task of class c displaces from a full
// queue: the newest queued task of the lowest class (raised by Aging)
// below c, or nil. A lane's tail has aged the least of its tasks, and
// only the lanes below c hold tasks of a class below c.
func (b *Bulkhead) victimLocked(c int) *node {
	cs := b.keys.prio
	t := cs.now(b)
	var v *node
	vc := c
	for l := range c {
		if n := cs.lanes[l].q.tail; n != nil {
			if e := cs.class(n, t); e < vc || e == vc && v != nil && n.joined > v.joined {
				v, vc = n, e
			}
		}
	}
	return v
}

// bumpPrioLocked makes room for n in a full line of submitters waiting
// for room (MaxWaitingCalls) of a pool with priorities: it refuses the
// newest waiter of the lowest class (raised by Aging) below n's, with
// ReasonDisplaced if Displace is on, else ReasonWaiters; false if nobody
// lower waits. b.mu must be held.
func (b *Bulkhead) bumpPrioLocked(n *node) bool {
	cs := b.keys.prio
	t := cs.now(b)
	var v *node
	vc := int(n.lane.class) // n has not waited yet
	for w := b.waiting.tail; w != nil; w = w.prev {
		if c := cs.class(w, t); c < vc {
			v, vc = w, c
		}
	}
	if v == nil {
		return false
	}
	r := bulkhead.ReasonWaiters
	if cs.displace {
		r = bulkhead.ReasonDisplaced
	}
	b.unwaitLocked(v)
	b.bumpLocked(v, r)
	return true
}

// classOf returns p's lane index, p clamped to the four classes.
func classOf(p bulkhead.Priority) int {
	return int(min(max(p, bulkhead.Sheddable), bulkhead.CriticalPlus) - bulkhead.Sheddable)
}

// admitPrioLocked is admit for n of a pool with priorities: n's class is
// its context's priority; it starts while fewer workers are taken than its
// class's ceiling, is queued while fewer queue slots are, and is refused
// with ReasonPriority if what is left is reserved for higher classes. b.mu
// must be held; it is released.
func (b *Bulkhead) admitPrioLocked(ctx context.Context, n *node, wait bool) error {
	cs := b.keys.prio
	if cs.at != 0 && cs.at <= b.now() { // an aging step is due: serve it before n (aged)
		b.mu.Unlock()
		b.aged()
		b.mu.Lock()
		if b.closed.Load() {
			b.mu.Unlock()
			return bulkhead.ErrClosed
		}
	}
	c := classOf(bulkhead.PriorityFrom(ctx))
	n.lane = &cs.lanes[c]
	switch {
	case b.free() && n.lane.q.len == 0 && b.active-b.lent < cs.workers[c]:
		b.startLocked(n)
		b.mu.Unlock()
		b.invoke(n)
		return nil
	case b.queue.len < cs.qus[c]:
		if b.tooLate(ctx) {
			b.mu.Unlock()
			return b.refuse(bulkhead.ReasonDeadline)
		}
		b.enqueueLocked(n)
		if cs.aging > 0 && b.free() { // held back by its class's ceiling
			b.ageLocked()
		}
		b.mu.Unlock()
		return nil
	case cs.displace && b.victimLocked(c) != nil:
		if b.tooLate(ctx) {
			b.mu.Unlock()
			return b.refuse(bulkhead.ReasonDeadline)
		}
		v := b.victimLocked(c)
		b.enqueueLocked(n) // first, so that v's slot goes to n, not to a waiting submitter
		b.shedLocked(v, bulkhead.ReasonDisplaced)
		sh := b.takeShedLocked()
		b.mu.Unlock()
		// v's future completes, and its event is published, on a goroutine
		// of the pool's (counted busy by takeShedLocked, so Close waits for
		// it), not on n's submitter's: a callback that panics there cannot
		// lose n's future.
		go b.refusedAll(sh)
		return nil
	case !wait:
		r := bulkhead.ReasonFull
		if b.free() || b.queue.len < b.cfg.Load().QueueCapacity {
			r = bulkhead.ReasonPriority
		}
		b.mu.Unlock()
		return b.refuse(r)
	}
	if cs.aging > 0 {
		n.joined = b.now() // a waiting submitter ages too (class), from now
		if s := cs.step(n, n.joined); s != 0 && (b.free() || b.queue.len < b.cfg.Load().QueueCapacity) {
			cs.arm(b, s, n.joined) // held back by its class's ceiling
		}
	}
	return b.waitLocked(ctx, n, true)
}

// step returns the time (from now()) of queued or waiting n's next aging
// step after t, or 0 if its class cannot rise any more.
func (cs *classes) step(n *node, t int64) int64 {
	start := max(n.joined, cs.since)
	k := (t - start) / int64(cs.aging)
	if int(n.lane.class)+int(k) >= len(cs.lanes)-1 {
		return 0
	}
	return start + (k+1)*int64(cs.aging)
}

// ageLocked arms the tick (aged) for the earliest next aging step of the
// tasks a class's ceiling holds back beside a free worker (the lanes'
// heads, the waiting submitters) or a free queue slot (the waiting
// submitters), or stops it: Aging takes effect when a class rises, not at
// the next finish or arrival. b.mu must be held.
func (b *Bulkhead) ageLocked() {
	cs := b.keys.prio
	if cs.aging <= 0 || b.queue.len == 0 && b.waiting.len == 0 {
		cs.arm(b, 0, 0)
		return
	}
	t := b.now()
	var next int64
	earliest := func(s int64) {
		if s != 0 && (next == 0 || s < next) {
			next = s
		}
	}
	free := b.free()
	if free {
		for c := range len(cs.lanes) - 1 { // CriticalPlus rises no more
			if n := cs.lanes[c].q.head; n != nil {
				earliest(cs.step(n, t))
			}
		}
	}
	if free || b.queue.len < b.cfg.Load().QueueCapacity {
		for n := b.waiting.head; n != nil; n = n.next {
			earliest(cs.step(n, t))
		}
	}
	cs.arm(b, next, t)
}

// arm has the tick fire at next (from now(), t being now), unless it is
// armed earlier already; next 0 stops it. b.mu must be held.
func (cs *classes) arm(b *Bulkhead, next, t int64) {
	switch {
	case next == 0:
		if cs.at != 0 {
			cs.tick.Stop()
			cs.at = 0
		}
		return
	case cs.at != 0 && cs.at <= next:
		return
	}
	cs.at = next
	d := time.Duration(next - t) // at worst 1ns early (now() rounds up): aged then arms again
	if cs.tick == nil {
		cs.tick = time.AfterFunc(d, b.aged)
	} else {
		cs.tick.Reset(d)
	}
}

// aged is the tick: it refills the queue and starts what the classes'
// ceilings now admit, then arms the next step. It runs on the timer's
// goroutine, counted busy, or in an admission that finds a step due.
func (b *Bulkhead) aged() {
	b.busy.Add(1) // before the work can find the bulkhead drained
	defer b.workDone()
	b.mu.Lock()
	b.keys.prio.at = 0
	b.refillLocked()
	more := b.kickLocked()
	b.ageLocked()
	sh := b.takeShedLocked()
	b.mu.Unlock()
	b.startAll(more, sh)
}

// stopAgingLocked stops the tick of a pool with priorities (Close, once
// drained). b.mu must be held.
func (b *Bulkhead) stopAgingLocked() {
	if b.keys != nil && b.keys.prio != nil {
		b.keys.prio.arm(b, 0, 0)
	}
}

// now is b.now() for class, or 0 without Aging, which needs no time.
func (cs *classes) now(b *Bulkhead) int64 {
	if cs.aging > 0 {
		return b.now()
	}
	return 0
}

// class returns queued or waiting n's class, raised by one per Aging it
// has waited at t (for room, then in the queue), counted from when Aging
// was switched on if that is later.
func (cs *classes) class(n *node, t int64) int {
	c := int(n.lane.class)
	if cs.aging > 0 {
		c = min(c+int((t-max(n.joined, cs.since))/int64(cs.aging)), len(cs.lanes)-1)
	}
	return c
}

// popPrioLocked is popLocked for a pool with priorities: the oldest queued
// task of the highest class (raised by Aging) if its ceiling admits it,
// else the oldest waiting submitter's of the highest class admitted.
func (b *Bulkhead) popPrioLocked() *node {
	cs := b.keys.prio
	taken := b.active - b.lent
	t := cs.now(b)
	for {
		var best *node
		bc := -1
		for c := len(cs.lanes) - 1; c >= 0; c-- {
			if n := cs.lanes[c].q.head; n != nil {
				if e := cs.class(n, t); e > bc || e == bc && n.joined < best.joined {
					best, bc = n, e
				}
			}
		}
		if best == nil || taken >= cs.workers[bc] {
			break
		}
		if b.takeLocked(best, best, &t) {
			return best
		}
	}
	for c := len(cs.lanes) - 1; c >= 0 && taken < cs.workers[c]; c-- {
		for n := b.waiting.head; n != nil; {
			next := n.next
			if cs.class(n, t) == c && b.leaveLineLocked(n) {
				close(n.x.ready)
				return n
			}
			n = next
		}
	}
	if cs.aging > 0 {
		b.ageLocked()
	}
	return nil
}

// refillPrioLocked is refillLocked for a pool with priorities: it moves
// waiting submitters' tasks into the queue, highest class (raised by
// Aging) first and the oldest first within a class, while their class's
// ceiling has room.
func (b *Bulkhead) refillPrioLocked() {
	cs := b.keys.prio
	var t int64
	if b.waiting.len > 0 {
		t = cs.now(b)
	}
	for c := len(cs.lanes) - 1; c >= 0; c-- {
		for n := b.waiting.head; n != nil && b.queue.len < cs.qus[c]; {
			next := n.next
			if cs.class(n, t) == c && b.leaveLineLocked(n) {
				b.enqueueLocked(n)
				close(n.x.ready)
			}
			n = next
		}
	}
	if cs.aging > 0 || cs.at != 0 {
		b.ageLocked()
	}
	b.storeSaturated()
}
