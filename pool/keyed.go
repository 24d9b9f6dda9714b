package pool

import (
	"cmp"
	"context"
	"fmt"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
)

// KeyedConfig is a keyed pool's configuration: the pool's Config, whose
// MaxWorkers and QueueCapacity are shared by all keys, and each key's share.
type KeyedConfig struct {
	Config
	// MaxRunningPerKey is how many tasks of one key may run at once, from 0
	// to MaxWorkers; 0 means MaxWorkers. 1 runs each key's tasks one at a
	// time, in submission order.
	MaxRunningPerKey int
	// QueueCapacityPerKey is how many tasks of one key may be queued, from 0
	// to QueueCapacity; 0 means QueueCapacity.
	QueueCapacityPerKey int
}

// Validate reports the first invalid field of c, naming the field and value.
// A keyed pool starts each key's tasks in submission order, so it takes
// neither a LIFO QueueOrder nor CoDel.
func (c KeyedConfig) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	switch {
	case c.MaxRunningPerKey < 0 || c.MaxRunningPerKey > c.MaxWorkers:
		return fmt.Errorf("maxRunningPerKey must be from 0 to maxWorkers (%d), got %d", c.MaxWorkers, c.MaxRunningPerKey)
	case c.QueueCapacityPerKey < 0 || c.QueueCapacityPerKey > c.QueueCapacity:
		return fmt.Errorf("queueCapacityPerKey must be from 0 to queueCapacity (%d), got %d", c.QueueCapacity, c.QueueCapacityPerKey)
	case c.QueueOrder != bulkhead.FIFO:
		return fmt.Errorf("queueOrder must be fifo in a keyed pool (a key's tasks start in submission order), got %v", c.QueueOrder)
	case c.CoDel != nil:
		return fmt.Errorf("codel is not available in a keyed pool")
	case c.Priorities != nil:
		return fmt.Errorf("priorities are not available in a keyed pool (give each class its own pool), got %+v", *c.Priorities)
	case c.Shadow != nil:
		return fmt.Errorf("shadow is not available in a keyed pool, got %+v", *c.Shadow)
	}
	return nil
}

// Keyed is a pool bulkhead whose workers and queue are shared by keys
// (tenants, customers), each with a lane of its own: a key's tasks start in
// submission order, at most MaxRunningPerKey of them at once and at most
// QueueCapacityPerKey queued, and a freed worker takes the next task of the
// next key in round-robin order, so that one key's burst cannot take the
// others' turn. A lane with nothing queued or running goes away at once: it
// holds nothing, and the last 64 gone stay cached for their
// keys' next tasks, least recently used out.
// Submit with [SubmitKeyed] or [GoKeyed]; everything else is as for a
// [Bulkhead]. Create one with [NewKeyed] and stop it with Close.
type Keyed[K comparable] struct {
	b       *Bulkhead
	lanes   map[K]*klane[K] // the lanes in use and the idle ones; guarded by b.mu, as everything below
	idle    klane[K]        // the sentinel of the ring of idle lanes, least recently used next
	nidle   int
	evicted uint64 // idle lanes removed from the cache
}

// maxIdleLanes is how many idle lanes a Keyed keeps for their keys: a
// key's next task then neither inserts nor deletes a map entry
// (G3_Join/ours_pool_SubmitKeyed_Wait, keys in turn over 16 keys).
const maxIdleLanes = 64

// klane is a key's lane with its key and, while idle, its place in the
// ring of idle lanes.
type klane[K comparable] struct {
	lane
	key          K
	older, newer *klane[K] // in the idle ring; nil while in use
}

// NewKeyed returns a keyed pool named name with the given configuration.
// It fails if the name is empty or a field is out of range.
func NewKeyed[K comparable](name string, cfg KeyedConfig) (*Keyed[K], error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("pool %q: %w", name, err)
	}
	b, err := New(name, cfg.Config)
	if err != nil {
		return nil, err
	}
	k := &Keyed[K]{b: b, lanes: make(map[K]*klane[K])}
	k.idle.older, k.idle.newer = &k.idle, &k.idle
	b.keys = &lanes{gone: k.gone}
	b.keys.set(cfg)
	return k, nil
}

// gone makes l, a lane with nothing queued, running or waiting, the most
// recently used idle lane, evicting the least recently used beyond
// maxIdleLanes. b.mu must be held.
func (k *Keyed[K]) gone(l *lane) {
	kl := l.owner.(*klane[K])
	if kl.newer != nil {
		return // idle already
	}
	if k.nidle == maxIdleLanes {
		old := k.idle.newer
		k.unidle(old)
		delete(k.lanes, old.key)
		k.evicted++
	}
	kl.older, kl.newer = k.idle.older, &k.idle
	k.idle.older.newer, k.idle.older = kl, kl
	k.nidle++
}

// unidle takes kl out of the ring of idle lanes.
func (k *Keyed[K]) unidle(kl *klane[K]) {
	kl.older.newer, kl.newer.older = kl.newer, kl.older
	kl.older, kl.newer = nil, nil
	k.nidle--
}

// laneLocked returns key's lane, made if it has none. b.mu must be held.
func (k *Keyed[K]) laneLocked(key K) *lane {
	kl := k.lanes[key]
	switch {
	case kl == nil:
		kl = &klane[K]{key: key}
		kl.owner = kl
		k.lanes[key] = kl
	case kl.newer != nil:
		k.unidle(kl)
	}
	return &kl.lane
}

// SubmitKeyed is [Submit] for key's lane of k: fn starts at once if a worker
// is free and key may start a task, or is queued in key's lane; it returns
// a [*bulkhead.FullError] at once with [bulkhead.ReasonKey] if key's lane
// is full and [bulkhead.ReasonFull] if the pool is.
func SubmitKeyed[K comparable, T any](ctx context.Context, k *Keyed[K], key K, fn func(context.Context) (T, error)) (*future.Future[T], error) {
	return submitKeyed(ctx, k, key, fn, "SubmitKeyed", false)
}

// GoKeyed is [SubmitKeyed] that waits for room in key's lane and in the
// queue, as [Go] waits for room in the queue.
func GoKeyed[K comparable, T any](ctx context.Context, k *Keyed[K], key K, fn func(context.Context) (T, error)) (*future.Future[T], error) {
	return submitKeyed(ctx, k, key, fn, "GoKeyed", true)
}

func submitKeyed[K comparable, T any](ctx context.Context, k *Keyed[K], key K, fn func(context.Context) (T, error), name string, wait bool) (*future.Future[T], error) {
	if k == nil {
		panic("pool: " + name + " called with a nil *Keyed")
	}
	b := k.b
	if fn == nil || ctx == nil {
		misuse(name, ctx, b)
	}
	if err := b.precheck(ctx, wait); err != nil {
		return nil, err
	}
	t := newTask(b, ctx, fn)
	b.mu.Lock()
	if b.closed.Load() {
		b.mu.Unlock()
		return nil, bulkhead.ErrClosed
	}
	t.lane = k.laneLocked(key)
	if err := b.admitKeyedLocked(ctx, &t.node, wait); err != nil {
		return nil, err
	}
	return t.p.Future(), nil
}

// Name returns the name the pool was created with.
func (k *Keyed[K]) Name() string { return k.b.name }

// String returns `keyed pool bulkhead "name"`.
func (k *Keyed[K]) String() string { return fmt.Sprintf("keyed pool bulkhead %q", k.b.name) }

// Config returns the configuration in force.
func (k *Keyed[K]) Config() KeyedConfig {
	k.b.mu.Lock()
	defer k.b.mu.Unlock()
	return KeyedConfig{Config: k.b.Config(), MaxRunningPerKey: k.b.keys.maxRun, QueueCapacityPerKey: k.b.keys.maxQueue}
}

// Subscribe is [Bulkhead.Subscribe]: events carry no key.
func (k *Keyed[K]) Subscribe(fn func(bulkhead.Event)) (cancel func()) { return k.b.Subscribe(fn) }

// Stats returns the pool's totals, as [Bulkhead.Stats].
func (k *Keyed[K]) Stats() bulkhead.Stats { return k.b.Stats() }

// KeyStats returns the number of keys with a lane in use, the idle lanes
// cached, those evicted from that cache, and the rejections for a full lane
// (RejectedKey); a full pool refuses with ReasonFull, counted in Stats, so
// RejectedTotal and RejectedKeys stay 0.
func (k *Keyed[K]) KeyStats() bulkhead.KeyStats {
	k.b.mu.Lock()
	defer k.b.mu.Unlock()
	return bulkhead.KeyStats{ActiveKeys: len(k.lanes) - k.nidle, IdleKeys: k.nidle, Evicted: k.evicted,
		RejectedKey: k.b.rejected[bulkhead.ReasonKey].Load()}
}

// Key returns key's tasks running now and those queued or whose submitters
// wait for room. It never creates a lane.
func (k *Keyed[K]) Key(key K) (running, queued int) {
	k.b.mu.Lock()
	defer k.b.mu.Unlock()
	if l := k.lanes[key]; l != nil {
		return l.running, l.q.len + l.waiting
	}
	return 0, 0
}

// Reconfigure applies cfg without blocking, as [Bulkhead.Reconfigure]. A
// larger MaxRunningPerKey starts queued tasks at once; a smaller one or a
// smaller QueueCapacityPerKey keeps what runs and is queued, and starts or
// admits no more of a key until it is below the new limit.
func (k *Keyed[K]) Reconfigure(cfg KeyedConfig) error {
	return k.ReconfigureFunc(func(KeyedConfig) (KeyedConfig, bool) { return cfg, true })
}

// ReconfigureFunc applies, as Reconfigure does, the configuration that f
// returns given the one in force, or changes nothing if f returns false. f
// runs under the pool's lock, as for [Bulkhead.ReconfigureFunc].
func (k *Keyed[K]) ReconfigureFunc(f func(KeyedConfig) (KeyedConfig, bool)) error {
	var bad error
	err := k.b.ReconfigureFunc(func(c Config) (Config, bool) {
		cfg, ok := f(KeyedConfig{Config: c, MaxRunningPerKey: k.b.keys.maxRun, QueueCapacityPerKey: k.b.keys.maxQueue})
		if !ok {
			return c, false
		}
		if bad = cfg.Validate(); bad != nil {
			return c, false
		}
		k.b.keys.set(cfg) // under b.mu; the loop after it starts what may start
		return cfg.Config, true
	})
	if bad != nil {
		return fmt.Errorf("pool %q: %w", k.b.name, bad)
	}
	return err
}

// Close is [Bulkhead.Close].
func (k *Keyed[K]) Close(ctx context.Context) error { return k.b.Close(ctx) }

// lane is a key's line in a keyed pool: its queued tasks, oldest first
// (b.queue.len counts the tasks of every lane), and what else it holds.
type lane struct {
	q          queue
	running    int   // its tasks running (lent slots included)
	waiting    int   // its submitters waiting for room (GoKeyed)
	prev, next *lane // in the ring of lanes with queued tasks
	owner      any   // its *klane[K]
	class      int8  // in a pool with priorities, its class (Sheddable 0)
}

// lanes is a keyed pool's scheduler, guarded by b.mu: the lanes with
// queued tasks in a ring, served round robin from cursor (deficit round
// robin with equal weights and unit costs), skipping lanes at their limit.
type lanes struct {
	cursor           *lane
	maxRun, maxQueue int // as configured (0: the pool's)
	perRun, perQueue int // in force
	gone             func(*lane)
	prio             *classes // a pool with priorities: its lanes are the classes'
}

// set installs cfg's per-key limits. b.mu must be held (or b unshared).
func (ks *lanes) set(cfg KeyedConfig) {
	ks.maxRun, ks.maxQueue = cfg.MaxRunningPerKey, cfg.QueueCapacityPerKey
	ks.perRun, ks.perQueue = cmp.Or(cfg.MaxRunningPerKey, MaxLimit), cmp.Or(cfg.QueueCapacityPerKey, cfg.QueueCapacity)
}

// startable reports whether n, queued, is next in its lane and its lane
// may start a task.
func (ks *lanes) startable(n *node) bool { return n.lane.q.head == n && n.lane.running < ks.perRun }

// admitKeyedLocked is admit for n of a keyed pool, n.lane set: start it,
// queue it in its lane, wait or refuse. b.mu must be held; it is released.
func (b *Bulkhead) admitKeyedLocked(ctx context.Context, n *node, wait bool) error {
	l, ks := n.lane, b.keys
	first := l.q.len == 0 && l.running < ks.perRun // nothing of its key before it
	switch {
	case b.free() && first:
		b.startLocked(n)
		b.mu.Unlock()
		b.invoke(n)
		return nil
	case l.q.len < ks.perQueue && b.queue.len < b.cfg.Load().QueueCapacity:
		return b.queueLocked(ctx, n)
	case !wait:
		r := bulkhead.ReasonFull
		if l.q.len >= ks.perQueue {
			r = bulkhead.ReasonKey
		}
		b.tidyLocked(n)
		b.mu.Unlock()
		return b.refuse(r)
	}
	if by := b.caller(ctx); first && l.waiting > 0 && by != nil && !by.lent {
		// An earlier submitter of n's key waits for room: it runs in the
		// caller's slot first (key order), then n looks again.
		l.waiting++ // n's: its lane stays while the earlier ones leave the line
		w := b.keyWaiterLocked(l)
		if w != nil {
			close(w.x.ready)
			b.lendLocked(by, w)
			b.mu.Unlock()
			b.runLent(w)
			b.mu.Lock()
		}
		if l.waiting--; w != nil {
			err := ctx.Err()
			if b.closed.Load() {
				err = bulkhead.ErrClosed
			}
			if err == nil {
				return b.admitKeyedLocked(ctx, n, wait)
			}
			b.cancelled++ // n waited while w ran, as a waiting submitter
			b.tidyLocked(n)
			b.mu.Unlock()
			if b.hub.Active() {
				b.publish(bulkhead.EventCancelled, err, 0, 0)
			}
			return err
		}
	}
	return b.waitLocked(ctx, n, first)
}

// keyWaiterLocked takes the oldest submitter of l still waiting for room
// out of the line, for the caller to start, or returns nil. b.mu must be
// held.
func (b *Bulkhead) keyWaiterLocked(l *lane) *node {
	for n := b.waiting.head; n != nil; {
		next := n.next
		if n.lane == l && b.leaveLineLocked(n) {
			return n
		}
		n = next
	}
	return nil
}

// tidyLocked lets n's lane go if it holds nothing any more. b.mu must be
// held; n has just left its lane, or never entered it.
func (b *Bulkhead) tidyLocked(n *node) {
	if l := n.lane; l != nil && l.q.len == 0 && l.running == 0 && l.waiting == 0 && l.owner != nil {
		b.keys.gone(l)
	}
}

// unwaitLocked takes n out of the line of waiting submitters.
func (b *Bulkhead) unwaitLocked(n *node) {
	b.waiting.remove(n)
	if n.lane != nil {
		n.lane.waiting--
	}
}

// lanePushLocked queues n at the back of its lane, the lane at the back of
// the round if it had nothing queued.
func (b *Bulkhead) lanePushLocked(n *node) {
	l, ks := n.lane, b.keys
	if l.q.len == 0 {
		if c := ks.cursor; c == nil {
			l.prev, l.next, ks.cursor = l, l, l
		} else {
			l.prev, l.next = c.prev, c
			c.prev.next, c.prev = l, l
		}
	}
	l.q.push(n)
	b.queue.len++
	if ks.prio != nil && ks.prio.aging > 0 && n.joined == 0 { // a waiting submitter's task keeps its age
		n.joined = b.now()
	}
}

// laneRemoveLocked takes n out of its lane, and the lane out of the ring
// if it has nothing queued any more.
func (b *Bulkhead) laneRemoveLocked(n *node) {
	l, ks := n.lane, b.keys
	l.q.remove(n)
	b.queue.len--
	if l.q.len > 0 {
		return
	}
	if l.next == l {
		ks.cursor = nil
	} else {
		l.prev.next, l.next.prev = l.next, l.prev
		if ks.cursor == l {
			ks.cursor = l.next
		}
	}
	l.prev, l.next = nil, nil
}

// firstQueuedLocked returns a queued task, or nil.
func (b *Bulkhead) firstQueuedLocked() *node {
	if b.keys == nil {
		return b.queue.head
	}
	if c := b.keys.cursor; c != nil {
		return c.q.head
	}
	return nil
}

// popKeyedLocked is popLocked for a keyed pool: the head of the next lane
// in the round that may start a task, else the oldest waiting submitter's
// task that its lane would start.
func (b *Bulkhead) popKeyedLocked() *node {
	ks := b.keys
	if ks.prio != nil {
		return b.popPrioLocked()
	}
	var t int64 // read once, if a deadline needs it
	for {
		l := ks.cursor
		for l != nil && l.running >= ks.perRun {
			if l = l.next; l == ks.cursor {
				l = nil
			}
		}
		if l == nil {
			break
		}
		n := l.q.head
		ks.cursor = l.next // the next turn is the next lane's
		if b.takeLocked(n, n, &t) {
			return n
		}
	}
	for n := b.waiting.head; n != nil; {
		next := n.next
		if n.lane.q.len == 0 && n.lane.running < ks.perRun && b.leaveLineLocked(n) {
			close(n.x.ready)
			return n
		}
		n = next
	}
	return nil
}

// refillKeyedLocked is refillLocked for a keyed pool: it moves waiting
// submitters' tasks, oldest first, into their lanes while the queue has
// room, skipping those whose lane is full.
func (b *Bulkhead) refillKeyedLocked() {
	if b.keys.prio != nil {
		b.refillPrioLocked()
		return
	}
	capacity := b.cfg.Load().QueueCapacity
	for n := b.waiting.head; n != nil && b.queue.len < capacity; {
		next := n.next
		if n.lane.q.len < b.keys.perQueue && b.leaveLineLocked(n) {
			b.enqueueLocked(n)
			close(n.x.ready)
		}
		n = next
	}
	b.storeSaturated()
}

// kickLocked starts, in a keyed pool, the tasks that may start while a
// worker is free, for the caller to invoke (startAll); nil in a plain pool.
func (b *Bulkhead) kickLocked() []*node {
	if b.keys == nil || b.queue.len+b.waiting.len == 0 { // inlined: no call when nothing waits
		return nil
	}
	return b.kickQueuedLocked()
}

// kickQueuedLocked is kickLocked's loop.
func (b *Bulkhead) kickQueuedLocked() (start []*node) {
	for b.free() {
		n := b.popLocked()
		if n == nil {
			break
		}
		b.startLocked(n)
		start = append(start, n)
	}
	return start
}
