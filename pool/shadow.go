package pool

import (
	"cmp"
	"fmt"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// Shadow is a smaller pool evaluated on live traffic and never enforced: it
// is tighter than the Config, or equal, field by field (no more workers, no
// more queue slots, no longer a QueueTimeout; any timeout is tighter than
// none), and tighter in one at least. Each task the pool admits also takes a
// place in the shadow, as it would in a pool of the shadow's size: a shadow
// worker if one is free, else a shadow queue slot if one is free (counted
// WouldWait), else nothing (counted WouldReject: the shadow would have
// refused it, or, for [Go], kept its submitter waiting for room). It gives
// the place back when it ends, whatever its outcome, and a shadow worker
// freed goes to the oldest task holding a shadow queue slot. A task counts
// WouldTimeOut if the shadow's QueueTimeout passes before both the shadow
// gave it a worker and the pool started it (a smaller pool starts no task
// sooner than a larger one), and then holds nothing more; a QueueTimeout
// switched on by Reconfigure counts from then. Which task a
// smaller pool would have started next, and so how long the shadow's tasks
// would have run, cannot be known: the figures are an estimate
// ([Bulkhead.ShadowStats]). The shadow ignores Priorities' classes.
type Shadow struct {
	// MaxWorkers is the shadow's workers, at most the Config's; 0 means
	// the Config's.
	MaxWorkers int
	// QueueCapacity is the shadow's queue slots, at most the Config's; 0
	// means the Config's.
	QueueCapacity int
	// QueueTimeout is the shadow's queue timeout, at most the Config's if
	// that is positive; 0 means the Config's.
	QueueTimeout time.Duration
}

// validateShadow reports what is wrong with c's Shadow.
func (c Config) validateShadow() error {
	sh := c.Shadow
	switch {
	case sh == nil:
		return nil
	case sh.MaxWorkers < 0 || sh.MaxWorkers > c.MaxWorkers:
		return fmt.Errorf("shadow.maxWorkers must be from 0 (maxWorkers) to maxWorkers %d, got %d", c.MaxWorkers, sh.MaxWorkers)
	case sh.QueueCapacity < 0 || sh.QueueCapacity > c.QueueCapacity:
		return fmt.Errorf("shadow.queueCapacity must be from 0 (queueCapacity) to queueCapacity %d, got %d", c.QueueCapacity, sh.QueueCapacity)
	case sh.QueueTimeout < 0 || c.QueueTimeout > 0 && sh.QueueTimeout > c.QueueTimeout:
		return fmt.Errorf("shadow.queueTimeout must be from 0 (queueTimeout) to queueTimeout %v, got %v", c.QueueTimeout, sh.QueueTimeout)
	case cmp.Or(sh.MaxWorkers, c.MaxWorkers) == c.MaxWorkers && cmp.Or(sh.QueueCapacity, c.QueueCapacity) == c.QueueCapacity &&
		cmp.Or(sh.QueueTimeout, c.QueueTimeout) == c.QueueTimeout:
		return fmt.Errorf("shadow %+v is the enforced pool itself: it would count nothing", *sh)
	}
	return nil
}

// shadow is a Bulkhead's shadow pool, made when a Config first has a Shadow
// and kept (off while the Config has none), so that the tasks holding its
// places give them back. b.mu guards it.
type shadow struct {
	on            bool
	workers, qcap int           // the limits, the Config's filled in
	timeout       time.Duration // 0: none
	since         int64         // from now(): when the timeout was switched on; no task waits from before it
	inUse         int           // shadow workers held
	queue         slotList      // the tasks holding a shadow queue slot, oldest first
	idle          slotList      // the tasks holding a shadow worker that the pool still queues
	free          *slot         // slots of ended tasks, for reuse (linked by next)
	// slots holds each admitted task's place. A field of node's would put
	// a task[int] in the next size class, 288 bytes instead of 256, in
	// every pool (G3_Join/ours_pool_Submit_Wait).
	slots                 map[*node]*slot
	reject, wait, timeOut uint64
}

// slot is a task's place in its pool's shadow (shadow.slots).
type slot struct {
	hold       uint8 // what it holds: none, a worker (idle or not) or a queue slot
	started    bool  // the pool has started the task
	decided    bool  // counted WouldTimeOut, or known not to be
	at         int64 // from now(): when the pool admitted it (with a timeout)
	prev, next *slot // in shadow.queue or shadow.idle
}

const (
	holdNone   uint8 = iota
	holdWorker       // a shadow worker, and the pool has started the task
	holdIdle         // a shadow worker, and the pool still queues the task (shadow.idle)
	holdQueue        // a shadow queue slot (shadow.queue)
)

// slotList is a list of slots with O(1) removal, as queue is of nodes.
type slotList struct {
	head, tail *slot
	len        int
}

func (l *slotList) push(s *slot) {
	s.prev, s.next = l.tail, nil
	if l.tail == nil {
		l.head = s
	} else {
		l.tail.next = s
	}
	l.tail = s
	l.len++
}

func (l *slotList) remove(s *slot) {
	if s.prev == nil {
		l.head = s.next
	} else {
		s.prev.next = s.next
	}
	if s.next == nil {
		l.tail = s.prev
	} else {
		s.next.prev = s.prev
	}
	s.prev, s.next = nil, nil
	l.len--
}

// applyShadow installs cfg's Shadow (apply copied it). b.mu must be held (or b
// unshared).
func (b *Bulkhead) applyShadow(cfg *Config) {
	if cfg.Shadow == nil {
		if b.shadow != nil {
			b.shadow.on = false
		}
		return
	}
	sh := b.shadow
	if sh == nil {
		sh = &shadow{slots: make(map[*node]*slot)}
		b.shadow = sh
	}
	b.shadowSettle() // under the old configuration
	c := cfg.Shadow
	sh.on = true
	sh.workers, sh.qcap = cmp.Or(c.MaxWorkers, cfg.MaxWorkers), cmp.Or(c.QueueCapacity, cfg.QueueCapacity)
	t := cmp.Or(c.QueueTimeout, cfg.QueueTimeout)
	if sh.timeout == 0 && t > 0 {
		sh.since = b.now() // the tasks holding places wait from now, not from when they came
	}
	sh.timeout = t
	b.shadowPromote(0) // more shadow workers start queued tasks
}

// ShadowStats returns what the Config's Shadow would have done to the tasks
// so far, and false if the Config has none. Limit is the shadow's
// MaxWorkers, InUse the shadow workers held, QueueDepth the shadow queue
// slots held. The counts are exact for the rule [Shadow] states; the rule
// is an estimate of what a pool of the shadow's size would have done.
func (b *Bulkhead) ShadowStats() (bulkhead.ShadowStats, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	sh := b.shadow
	if sh == nil || !sh.on {
		return bulkhead.ShadowStats{}, false
	}
	b.shadowExpire(b.now())
	return bulkhead.ShadowStats{Limit: sh.workers, InUse: sh.inUse, QueueDepth: sh.queue.len, QueueCapacity: sh.qcap,
		WouldReject: sh.reject, WouldWait: sh.wait, WouldTimeOut: sh.timeOut}, true
}

// shadowAdmit gives n, a task the pool admits (queues, or starts now if
// start), its place in the shadow. b.mu must be held (as for all the
// shadow's functions) and b.shadow not nil.
func (b *Bulkhead) shadowAdmit(n *node, start bool) {
	sh := b.shadow
	if !sh.on {
		return
	}
	// Reused, not allocated: BenchmarkShadowSubmitWait/shadowed 5.1k instead
	// of 5.4k instructions per join (callgrind, GOMAXPROCS 1; plain 4.9k).
	s := sh.free
	if s != nil {
		sh.free, s.next = s.next, nil
	} else {
		s = new(slot)
	}
	sh.slots[n] = s
	s.started = start
	if sh.timeout > 0 {
		s.at = b.now()
		b.shadowExpire(s.at) // the shadow's queue slots of tasks its timeout would have dropped by now are free
	}
	switch {
	case n.rd().lender != nil: // runs in its submitter's slot, in the shadow too
		s.decided = true
	case sh.inUse < sh.workers:
		b.shadowGive(s)
	case sh.queue.len < sh.qcap:
		s.hold = holdQueue
		sh.queue.push(s)
		sh.wait++
	default:
		s.decided = true
		sh.reject++
	}
}

// shadowGive gives s a shadow worker: decided if the pool has started its
// task (before the timeout: the callers made sure), else idle until it does.
func (b *Bulkhead) shadowGive(s *slot) {
	b.shadow.inUse++
	if s.started {
		s.hold, s.decided = holdWorker, true
		return
	}
	s.hold = holdIdle
	b.shadow.idle.push(s)
}

// shadowStart is shadowAdmit for n, which the pool starts now, or, if it
// was queued, settles whether the shadow would have timed it out.
func (b *Bulkhead) shadowStart(n *node) {
	b.shadowSettle()
	s := b.shadow.slots[n]
	if s == nil {
		b.shadowAdmit(n, true)
		return
	}
	s.started = true
	switch {
	case s.decided:
	case n.rd().lender != nil: // a queued task started in a waiting task's slot: the shadow would lend it too
		b.shadowDecide(s)
		b.shadowRelease(s, 0)
	case s.hold == holdIdle:
		b.shadow.idle.remove(s)
		s.hold = holdWorker
		b.shadowDecide(s)
	case s.hold == holdQueue && b.shadowLate(s, 0):
		b.shadowTimedOut(s, 0)
	}
}

// shadowDone gives back n's place in the shadow, and its slot for reuse:
// n has finished, or left the queue unrun.
func (b *Bulkhead) shadowDone(n *node) {
	b.shadowSettle()
	s := b.shadow.slots[n]
	if s == nil {
		return
	}
	if !s.decided && (s.hold == holdQueue || !s.started) && b.shadowLate(s, 0) {
		b.shadow.timeOut++ // the shadow's timeout came while it waited
	}
	b.shadowRelease(s, 0)
	*s = slot{next: b.shadow.free}
	b.shadow.free = s
	delete(b.shadow.slots, n)
}

// shadowLate reports whether the shadow's QueueTimeout has passed, at
// time at (from now(); 0: now), since s was admitted or, if later, since
// the timeout was switched on.
func (b *Bulkhead) shadowLate(s *slot, at int64) bool {
	if b.shadow.timeout == 0 {
		return false
	}
	if at == 0 {
		at = b.now()
	}
	return at >= b.shadowDue(s)
}

// shadowDue is when, from now(), the shadow's QueueTimeout passes for s.
func (b *Bulkhead) shadowDue(s *slot) int64 {
	return max(s.at, b.shadow.since) + int64(b.shadow.timeout)
}

// shadowDecide settles whether s, now both started and given a shadow
// worker, waited past the shadow's QueueTimeout.
func (b *Bulkhead) shadowDecide(s *slot) {
	if b.shadowLate(s, 0) {
		b.shadowTimedOut(s, 0)
	}
	s.decided = true
}

// shadowTimedOut counts s timed out by the shadow at time at (from now();
// 0: now), which holds no place for it any more.
func (b *Bulkhead) shadowTimedOut(s *slot, at int64) {
	b.shadow.timeOut++
	s.decided = true
	b.shadowRelease(s, at)
}

// shadowRelease frees what s holds at time at (from now(); 0: now), a
// shadow worker going to the oldest task then holding a shadow queue slot.
func (b *Bulkhead) shadowRelease(s *slot, at int64) {
	sh := b.shadow
	hold := s.hold
	s.hold = holdNone
	switch hold {
	case holdIdle:
		sh.idle.remove(s)
		fallthrough
	case holdWorker:
		sh.inUse--
		b.shadowPromote(at)
	case holdQueue:
		sh.queue.remove(s)
	}
}

// shadowPromote gives free shadow workers, at time at (from now(); 0:
// now), to the oldest tasks holding a shadow queue slot, and times out
// those the shadow's timeout would have dropped by then.
func (b *Bulkhead) shadowPromote(at int64) {
	sh := b.shadow
	for s := sh.queue.head; s != nil && sh.inUse < sh.workers; s = sh.queue.head {
		if b.shadowLate(s, at) {
			b.shadowTimedOut(s, at)
			continue
		}
		sh.queue.remove(s)
		b.shadowGive(s)
	}
}

// shadowSettle times out the tasks holding an idle shadow worker whose
// shadow QueueTimeout has passed, so that each worker went on when it did,
// before anything else changes the shadow.
func (b *Bulkhead) shadowSettle() {
	if b.shadow.idle.head != nil {
		b.shadowExpire(b.now())
	}
}

// shadowExpire times out, as of now (from now()), the tasks holding a
// shadow worker that the pool still queues and those holding a shadow
// queue slot, whose shadow QueueTimeout has passed. The idle ones go in
// the order their timeouts passed, each one's worker going to the oldest
// task then holding a shadow queue slot; the idle list is short.
func (b *Bulkhead) shadowExpire(now int64) {
	sh := b.shadow
	for {
		var first *slot
		for s := sh.idle.head; s != nil; s = s.next {
			if b.shadowLate(s, now) && (first == nil || b.shadowDue(s) < b.shadowDue(first)) {
				first = s
			}
		}
		if first == nil {
			break
		}
		b.shadowTimedOut(first, b.shadowDue(first))
	}
	for s := sh.queue.head; s != nil && b.shadowLate(s, now); s = sh.queue.head {
		b.shadowTimedOut(s, now)
	}
}
