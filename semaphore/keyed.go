package semaphore

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/internal/clock"
	"github.com/bulkhead-go/bulkhead/internal/event"
)

// defaultMaxActiveKeys is the MaxActiveKeys that 0 stands for.
const defaultMaxActiveKeys = 1 << 16

// KeyedConfig configures a [Keyed] bulkhead: a limit per key under an
// optional shared total.
type KeyedConfig struct {
	// PerKey is every key's limit (MaxConcurrentCalls) and how long a caller
	// may wait for its permits (MaxWaitDuration, which bounds the whole
	// wait: for the key's permit, then for the total's).
	PerKey Config
	// MaxConcurrentCalls caps the calls of all keys together, from 1 to
	// MaxLimit; 0 means no shared total.
	MaxConcurrentCalls int
	// MaxActiveKeys caps the keys that hold or wait for a permit at once;
	// 0 means 65,536. A call for another key beyond it is refused.
	MaxActiveKeys int
}

// Validate reports the first invalid field of c, naming the field and value.
func (c KeyedConfig) Validate() error {
	if err := c.PerKey.Validate(); err != nil {
		return fmt.Errorf("perKey.%w", err)
	}
	if c.PerKey.Shadow != nil || c.PerKey.Observe {
		return fmt.Errorf("perKey.shadow, perKey.observe: a keyed bulkhead has no shadow; shadow a plain semaphore")
	}
	if c.PerKey.Priorities != nil {
		return fmt.Errorf("perKey.priorities: a keyed bulkhead has no priorities; give each priority its own Keyed")
	}
	switch {
	case c.MaxConcurrentCalls < 0 || c.MaxConcurrentCalls > MaxLimit:
		return fmt.Errorf("maxConcurrentCalls must be 0 (no total) or from 1 to %d, got %d", MaxLimit, c.MaxConcurrentCalls)
	case c.MaxActiveKeys < 0:
		return fmt.Errorf("maxActiveKeys must be >= 0 (0 means %d), got %d", defaultMaxActiveKeys, c.MaxActiveKeys)
	}
	return nil
}

// Keyed limits the calls of each key of type K (a tenant, a customer, a
// repository) to PerKey.MaxConcurrentCalls, and the calls of all keys
// together to MaxConcurrentCalls, so that one noisy key cannot take the
// whole capacity from the others. Calls run on their callers' goroutines;
// a Keyed starts no goroutines and no timers of its own, and is safe for
// concurrent use. Create one with [NewKeyed].
//
// A call takes its key's permit first and then the total's; a caller never
// holds a total permit while it waits for its key. Callers that hold their
// key's permit and wait for the total are served round-robin across keys,
// first in, first out within a key. A key's entry is idle once no call holds
// or waits for its permits; the 64 most recently idle entries are kept for
// reuse and older ones evicted, so memory follows the keys in use.
type Keyed[K comparable] struct {
	name string
	hub  event.Hub[bulkhead.Event]

	// One mutex guards all of the state below: the key check and the
	// total check are one critical section, so a call is never admitted
	// over either limit and never refused for a reservation rolled back
	// by another (BenchmarkKeyedDo measures its cost against Do).
	mu   sync.Mutex
	set  *keyedSettings
	keys map[K]*entry[K]
	// peak is the most entries since keys was last rebuilt: a Go map
	// never shrinks, so keys is rebuilt once it holds far fewer.
	peak  int
	free  *entry[K] // spare entries, linked by next
	nfree int
	// idle lists the entries of keys with nothing holding or waiting,
	// kept for reuse (a hot key's calls then do not remove and add its
	// entry every time, BenchmarkKeyedDo/hot-key), the most recent first.
	idle  *entry[K]
	nidle int
	ring  *entry[K] // the keys whose callers wait for the total, the next to serve first
	inUse int       // calls running, holding both permits

	waiting                                           int
	permitted, rejected, cancelled, finished, failed  uint64
	evicted, rejectedKey, rejectedTotal, rejectedKeys uint64
}

// keyedSettings is the configuration in force and the rejections built
// from it, replaced as a whole by Reconfigure.
type keyedSettings struct {
	cfg                            KeyedConfig
	maxKeys                        int
	key, keyWaited                 bulkhead.FullError
	total, totalWaited, tooManyKey bulkhead.FullError
}

// entry is the state of one active key.
type entry[K comparable] struct {
	key     K
	held    int // key permits held: calls running, and callers waiting for the total
	running int
	gen     uint64 // counts the keys this entry has served, to catch a stale Release
	keyLine kline  // callers waiting for the key's permit
	queued  int    // their number
	// totalLine holds callers that have the key's permit and wait for the total.
	totalLine  kline
	prev, next *entry[K] // the ring of keys waiting for the total; next also links spare entries
	// idlePrev and idleNext link an idle entry (nothing holds or waits)
	// into Keyed.idle, a ring.
	idlePrev, idleNext *entry[K]
}

// maxSpare is how many entries a Keyed keeps for reuse, so that a key's
// calls after its first allocate nothing; maxIdle is how many entries of
// idle keys it keeps in its map. Both bound the memory that stays after a
// flood of keys.
const (
	maxSpare = 64
	maxIdle  = 64
)

// A kwaiter is a caller waiting in a key's line or in the total's.
type kwaiter struct {
	ready      chan struct{} // capacity 1, signalled once it is admitted
	state      uint8         // guarded by Keyed.mu
	prev, next *kwaiter
}

// States of a kwaiter.
const (
	forKey   uint8 = iota // waits for its key's permit
	forTotal              // holds its key's permit, waits for the total's
	admitted              // holds both
)

// kline is a FIFO of waiters with O(1) removal.
type kline struct{ head, tail *kwaiter }

func (l *kline) push(w *kwaiter) {
	w.prev, w.next = l.tail, nil
	if l.tail == nil {
		l.head = w
	} else {
		l.tail.next = w
	}
	l.tail = w
}

func (l *kline) remove(w *kwaiter) {
	if w.prev == nil {
		l.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		l.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
}

// NewKeyed returns a Keyed bulkhead named name with the given configuration.
// It fails if the name is empty or a field is out of range.
func NewKeyed[K comparable](name string, cfg KeyedConfig) (*Keyed[K], error) {
	if name == "" {
		return nil, fmt.Errorf("semaphore: name must not be empty")
	}
	if !utf8.ValidString(name) {
		return nil, fmt.Errorf("semaphore: name %q is not valid UTF-8", name)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("semaphore %q: %w", name, err)
	}
	k := &Keyed[K]{name: name, keys: make(map[K]*entry[K])}
	k.set = k.settingsFor(cfg)
	return k, nil
}

func (k *Keyed[K]) settingsFor(cfg KeyedConfig) *keyedSettings {
	st := &keyedSettings{cfg: cfg, maxKeys: cfg.MaxActiveKeys}
	if st.maxKeys == 0 {
		st.maxKeys = defaultMaxActiveKeys
	}
	base := bulkhead.FullError{Name: k.name, Kind: bulkhead.Semaphore, MaxWaitDuration: cfg.PerKey.MaxWaitDuration}
	st.key, st.total = base, base
	st.key.MaxConcurrentCalls, st.key.Reason = cfg.PerKey.MaxConcurrentCalls, bulkhead.ReasonKey
	st.total.MaxConcurrentCalls, st.total.Reason = cfg.MaxConcurrentCalls, bulkhead.ReasonTotal
	st.keyWaited, st.totalWaited = st.key, st.total
	st.keyWaited.Waited, st.totalWaited.Waited = true, true
	st.tooManyKey = base
	st.tooManyKey.MaxConcurrentCalls, st.tooManyKey.Reason = st.maxKeys, bulkhead.ReasonKeys
	return st
}

// Name returns the name the Keyed bulkhead was created with.
func (k *Keyed[K]) Name() string { return k.name }

// String returns `keyed semaphore bulkhead "name"`.
func (k *Keyed[K]) String() string { return fmt.Sprintf("keyed semaphore bulkhead %q", k.name) }

// Config returns the configuration in force.
func (k *Keyed[K]) Config() KeyedConfig {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.settingsLocked().cfg
}

// settingsLocked returns the settings, and panics for a Keyed that NewKeyed
// did not make. k.mu must be held.
func (k *Keyed[K]) settingsLocked() *keyedSettings {
	if k.set == nil {
		k.mu.Unlock()
		panic("semaphore: Keyed used without NewKeyed")
	}
	return k.set
}

// Subscribe calls fn with every event of this Keyed bulkhead until cancel is
// called. Events carry no key. fn follows the callback contract of package
// [github.com/bulkhead-go/bulkhead] ("Callbacks").
func (k *Keyed[K]) Subscribe(fn func(bulkhead.Event)) (cancel func()) {
	if fn == nil {
		panic("semaphore: Keyed.Subscribe called with a nil function")
	}
	return k.hub.Subscribe(fn)
}

// KeyedPermit is a permit of one key of a [Keyed] bulkhead, held by work
// that does not fit in one call to Do. Give it back with Release exactly
// once.
type KeyedPermit[K comparable] struct {
	k     *Keyed[K]
	e     *entry[K]
	gen   uint64
	start time.Time // when the work began; zero when nobody observes k
}

// Release gives the permits back, counts the call finished, and counts it
// failed when err is not nil; err is carried by the call's EventFinished.
// Release panics on the zero KeyedPermit; releasing a permit twice is a bug.
func (p KeyedPermit[K]) Release(err error) {
	if p.k == nil {
		panic("semaphore: KeyedPermit.Release called on a zero KeyedPermit")
	}
	p.k.release(p.e, p.gen, p.start, err, err != nil)
}

// TryAcquire takes key's permit and the total's if both are free and nobody
// waits for them, without blocking. It reports whether it did; a false
// counts as a rejection. Release the permit when the work is done.
func (k *Keyed[K]) TryAcquire(key K) (KeyedPermit[K], bool) {
	e, gen, start, err := k.acquire(nil, key)
	if err != nil {
		return KeyedPermit[K]{}, false
	}
	return KeyedPermit[K]{k: k, e: e, gen: gen, start: start}, true
}

// AcquirePermit takes key's permit and then the total's, waiting up to
// PerKey.MaxWaitDuration in all when they are not free. It returns ctx.Err()
// if ctx ends first (or had already ended: then nothing is counted), and a
// [*bulkhead.FullError] whose Reason is [bulkhead.ReasonKey],
// [bulkhead.ReasonTotal] or [bulkhead.ReasonKeys] if the permits did not
// come in time.
func (k *Keyed[K]) AcquirePermit(ctx context.Context, key K) (KeyedPermit[K], error) {
	if ctx == nil {
		panic("semaphore: Keyed.AcquirePermit called with a nil Context")
	}
	if err := ctx.Err(); err != nil {
		return KeyedPermit[K]{}, err
	}
	e, gen, start, err := k.acquire(ctx, key)
	if err != nil {
		return KeyedPermit[K]{}, err
	}
	return KeyedPermit[K]{k: k, e: e, gen: gen, start: start}, nil
}

// Do runs fn on the calling goroutine while holding key's permit and the
// total's, and returns fn's error unchanged. If the permits cannot be had it
// returns the error of AcquirePermit without calling fn. The permits are
// released however fn ends; a panic in fn or a runtime.Goexit counts as a
// failure, and the panic continues up the caller's stack.
func (k *Keyed[K]) Do(ctx context.Context, key K, fn func(context.Context) error) error {
	if fn == nil || ctx == nil {
		misuse("Keyed.Do", ctx == nil)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	e, gen, start, err := k.acquire(ctx, key)
	if err != nil {
		return err
	}
	returned := false
	defer func() {
		if !returned {
			k.abort(e, gen, start, recover())
		}
	}()
	err = fn(ctx)
	returned = true
	k.release(e, gen, start, err, err != nil)
	return err
}

// ExecuteKeyed is Keyed.Do for a function that returns a value.
func ExecuteKeyed[K comparable, T any](ctx context.Context, k *Keyed[K], key K, fn func(context.Context) (T, error)) (T, error) {
	if fn == nil || ctx == nil {
		misuse("ExecuteKeyed", ctx == nil)
	}
	var v T
	err := k.Do(ctx, key, func(ctx context.Context) error {
		var err error
		v, err = fn(ctx)
		return err
	})
	return v, err
}

// acquire takes key's permit and the total's. A nil ctx means do not wait
// (TryAcquire). It returns the entry and its generation, and when the call
// starts to run (zero when nobody subscribes).
func (k *Keyed[K]) acquire(ctx context.Context, key K) (*entry[K], uint64, time.Time, error) {
	k.mu.Lock()
	st := k.settingsLocked()
	e := k.keys[key]
	if e == nil || e.idleNext != nil {
		if len(k.keys)-k.nidle >= st.maxKeys {
			k.rejectedKeys++
			return nil, 0, time.Time{}, k.refuseLocked(time.Time{}, &st.tooManyKey)
		}
		if e == nil {
			e = k.addLocked(key)
		} else {
			k.idleRemoveLocked(e)
		}
	}
	forKeyPermit := e.held >= st.cfg.PerKey.MaxConcurrentCalls || e.keyLine.head != nil
	if !forKeyPermit && k.ring == nil && k.totalFreeLocked(st) {
		e.held++
		e.running++
		k.inUse++
		k.permitted++
		gen := e.gen
		k.mu.Unlock()
		var start time.Time
		if k.hub.Active() {
			start = k.publishPermitted(e, gen, time.Time{})
		}
		return e, gen, start, nil
	}
	if ctx == nil || st.cfg.PerKey.MaxWaitDuration <= 0 {
		k.dropIfIdleLocked(e)
		if forKeyPermit {
			k.rejectedKey++
			return nil, 0, time.Time{}, k.refuseLocked(time.Time{}, &st.key)
		}
		k.rejectedTotal++
		return nil, 0, time.Time{}, k.refuseLocked(time.Time{}, &st.total)
	}
	return k.wait(ctx, e, st, forKeyPermit)
}

// wait queues a caller for key's permit (forKeyPermit) or, holding it, for
// the total's, and waits until it is admitted, ctx ends or
// PerKey.MaxWaitDuration passes. k.mu is held on entry and released.
func (k *Keyed[K]) wait(ctx context.Context, e *entry[K], st *keyedSettings, forKeyPermit bool) (*entry[K], uint64, time.Time, error) {
	w := &kwaiter{ready: make(chan struct{}, 1)}
	if forKeyPermit {
		w.state = forKey
		e.keyLine.push(w)
		e.queued++
	} else {
		w.state = forTotal
		e.held++
		e.totalLine.push(w)
		k.ringAddLocked(e)
	}
	k.waiting++
	gen := e.gen
	k.mu.Unlock()

	var start time.Time
	if k.hub.Active() {
		start = clock.Now()
	}
	timer := time.NewTimer(st.cfg.PerKey.MaxWaitDuration)
	cancelled := false
	select {
	case <-w.ready:
	case <-timer.C:
	case <-ctx.Done():
		cancelled = true
	}
	timer.Stop()

	k.mu.Lock()
	if w.state == admitted {
		k.mu.Unlock()
		if k.hub.Active() {
			start = k.publishPermitted(e, gen, start)
		}
		return e, gen, start, nil
	}
	k.waiting--
	err := &st.keyWaited
	if w.state == forKey {
		e.keyLine.remove(w)
		e.queued--
	} else {
		err = &st.totalWaited
		e.totalLine.remove(w)
		if e.totalLine.head == nil {
			k.ringRemoveLocked(e)
		}
		e.held--
		k.grantKeyLocked(e, k.set)
	}
	k.dropIfIdleLocked(e)
	if cancelled {
		k.cancelled++
		k.mu.Unlock()
		if k.hub.Active() {
			k.publish(bulkhead.EventCancelled, start, ctx.Err())
		}
		return nil, 0, time.Time{}, ctx.Err()
	}
	if w.state == forKey {
		k.rejectedKey++
	} else {
		k.rejectedTotal++
	}
	return nil, 0, time.Time{}, k.refuseLocked(start, err)
}

// refuseLocked counts a rejection (the caller counted its reason), unlocks
// k.mu and publishes it.
func (k *Keyed[K]) refuseLocked(start time.Time, err *bulkhead.FullError) error {
	k.rejected++
	k.mu.Unlock()
	if k.hub.Active() {
		k.publish(bulkhead.EventRejected, start, err)
	}
	return err
}

// totalFreeLocked reports whether the total admits another call.
func (k *Keyed[K]) totalFreeLocked(st *keyedSettings) bool {
	return st.cfg.MaxConcurrentCalls == 0 || k.inUse < st.cfg.MaxConcurrentCalls
}

// addLocked makes key's entry, from a spare one when it can.
func (k *Keyed[K]) addLocked(key K) *entry[K] {
	e := k.free
	if e != nil {
		k.free, e.next = e.next, nil
		k.nfree--
	} else {
		e = &entry[K]{}
	}
	e.key = key
	k.keys[key] = e
	k.peak = max(k.peak, len(k.keys))
	return e
}

// dropIfIdleLocked puts e first among the idle entries once nothing holds
// or waits for its key, and removes the least recently used idle entry
// when there are more than maxIdle.
func (k *Keyed[K]) dropIfIdleLocked(e *entry[K]) {
	if e.held != 0 || e.keyLine.head != nil {
		return
	}
	if k.idle == nil {
		e.idlePrev, e.idleNext = e, e
	} else {
		last := k.idle.idlePrev
		e.idlePrev, e.idleNext = last, k.idle
		last.idleNext, k.idle.idlePrev = e, e
	}
	k.idle = e
	k.nidle++
	if k.nidle > maxIdle {
		lru := k.idle.idlePrev
		k.idleRemoveLocked(lru)
		k.removeLocked(lru)
	}
}

func (k *Keyed[K]) idleRemoveLocked(e *entry[K]) {
	if e.idleNext == e {
		k.idle = nil
	} else {
		e.idlePrev.idleNext, e.idleNext.idlePrev = e.idleNext, e.idlePrev
		if k.idle == e {
			k.idle = e.idleNext
		}
	}
	e.idlePrev, e.idleNext = nil, nil
	k.nidle--
}

// removeLocked takes e out of the map and keeps it as a spare.
func (k *Keyed[K]) removeLocked(e *entry[K]) {
	delete(k.keys, e.key)
	k.evicted++
	var zero K
	e.key = zero
	e.gen++
	if k.nfree < maxSpare {
		e.next = k.free
		k.free = e
		k.nfree++
	}
	if n := len(k.keys); k.peak >= 4096 && n <= k.peak/8 {
		m := make(map[K]*entry[K], n)
		for key, e := range k.keys {
			m[key] = e
		}
		k.keys, k.peak = m, n
	}
}

// ringAddLocked puts e last in the round of keys waiting for the total,
// unless it is in it already.
func (k *Keyed[K]) ringAddLocked(e *entry[K]) {
	if e.next != nil {
		return
	}
	if k.ring == nil {
		e.prev, e.next = e, e
		k.ring = e
		return
	}
	last := k.ring.prev
	e.prev, e.next = last, k.ring
	last.next = e
	k.ring.prev = e
}

func (k *Keyed[K]) ringRemoveLocked(e *entry[K]) {
	if e.next == e {
		k.ring = nil
	} else {
		e.prev.next, e.next.prev = e.next, e.prev
		if k.ring == e {
			k.ring = e.next
		}
	}
	e.prev, e.next = nil, nil
}

// grantKeyLocked hands e's free key permits to the callers waiting for
// them, in order; each then waits for the total, or runs if it is free.
func (k *Keyed[K]) grantKeyLocked(e *entry[K], st *keyedSettings) {
	for w := e.keyLine.head; w != nil && e.held < st.cfg.PerKey.MaxConcurrentCalls; w = e.keyLine.head {
		e.keyLine.remove(w)
		e.queued--
		e.held++
		if k.ring == nil && k.totalFreeLocked(st) {
			k.admitLocked(e, w)
			continue
		}
		w.state = forTotal
		e.totalLine.push(w)
		k.ringAddLocked(e)
	}
}

// grantTotalLocked hands the total's free permits to the callers waiting
// for them: one key's first caller after another, round-robin.
func (k *Keyed[K]) grantTotalLocked(st *keyedSettings) {
	for k.ring != nil && k.totalFreeLocked(st) {
		e := k.ring
		w := e.totalLine.head
		e.totalLine.remove(w)
		if e.totalLine.head == nil {
			k.ringRemoveLocked(e)
		} else {
			k.ring = e.next
		}
		k.admitLocked(e, w)
	}
}

// admitLocked lets w, which holds e's permit, run, and wakes it.
func (k *Keyed[K]) admitLocked(e *entry[K], w *kwaiter) {
	e.running++
	k.inUse++
	k.permitted++
	k.waiting--
	w.state = admitted
	w.ready <- struct{}{}
}

// release gives back a running call's permits and serves the waiters they
// free.
func (k *Keyed[K]) release(e *entry[K], gen uint64, start time.Time, err error, failed bool) {
	k.mu.Lock()
	if e.gen != gen || e.running == 0 {
		k.mu.Unlock()
		panic("semaphore: KeyedPermit.Release called without a held permit")
	}
	st := k.set
	e.held--
	e.running--
	k.inUse--
	k.finished++
	if failed {
		k.failed++
	}
	if e.keyLine.head != nil {
		k.grantKeyLocked(e, st)
	}
	if k.ring != nil {
		k.grantTotalLocked(st)
	}
	k.dropIfIdleLocked(e)
	k.mu.Unlock()
	if k.hub.Active() {
		ev := bulkhead.Event{Name: k.name, Kind: bulkhead.Semaphore, Type: bulkhead.EventFinished,
			Time: clock.Now(), Err: err}
		if !start.IsZero() {
			ev.Run = ev.Time.Sub(start)
		}
		k.hub.Publish(ev)
	}
}

// abort releases the permits of a call whose function panicked (r != nil)
// or called runtime.Goexit (r == nil), counts it failed, and lets the panic
// go on.
func (k *Keyed[K]) abort(e *entry[K], gen uint64, start time.Time, r any) {
	if r == nil {
		k.release(e, gen, start, errGoexit, true)
		return
	}
	var err error
	if k.hub.Active() {
		err = newPanicError(r)
	}
	k.release(e, gen, start, err, true)
	panic(r)
}

// publishPermitted publishes EventPermitted and returns its time. If a
// subscriber panics, the permits go back first (the call never ran).
func (k *Keyed[K]) publishPermitted(e *entry[K], gen uint64, start time.Time) time.Time {
	ok := false
	defer func() {
		if !ok {
			k.release(e, gen, time.Time{}, nil, false) // finished, not failed: it never ran
		}
	}()
	t := k.publish(bulkhead.EventPermitted, start, nil)
	ok = true
	return t
}

// publish publishes an event of type t for a call that began waiting at
// start (zero if it did not wait) and returns the event's time.
func (k *Keyed[K]) publish(t bulkhead.EventType, start time.Time, err error) time.Time {
	e := bulkhead.Event{Name: k.name, Kind: bulkhead.Semaphore, Type: t, Time: clock.Now(), Err: err}
	if !start.IsZero() {
		e.Wait = e.Time.Sub(start)
	}
	k.hub.Publish(e)
	return e.Time
}

// Reconfigure applies cfg without blocking. Larger limits hand their new
// permits to waiters at once; smaller ones let the calls in flight finish
// and admit new calls only once the new limits allow. A caller already
// waiting keeps the MaxWaitDuration it started with. A new total is
// published as [bulkhead.EventLimitChanged].
func (k *Keyed[K]) Reconfigure(cfg KeyedConfig) error {
	return k.ReconfigureFunc(func(KeyedConfig) (KeyedConfig, bool) { return cfg, true })
}

// ReconfigureFunc applies, as Reconfigure does, the configuration that f
// returns given the one in force, or changes nothing if f returns false. f
// runs under the Keyed bulkhead's lock, so nothing changes the
// configuration between its read and the change; it must not call k.
func (k *Keyed[K]) ReconfigureFunc(f func(KeyedConfig) (KeyedConfig, bool)) error {
	old, limit, err := k.reconfigureLocked(f)
	if err == nil && old != limit && k.hub.Active() {
		k.hub.Publish(bulkhead.Event{Name: k.name, Kind: bulkhead.Semaphore, Type: bulkhead.EventLimitChanged,
			Time: clock.Now(), Limit: limit})
	}
	return err
}

// reconfigureLocked applies f's configuration under k.mu and returns the
// totals before and after.
func (k *Keyed[K]) reconfigureLocked(f func(KeyedConfig) (KeyedConfig, bool)) (old, limit int, err error) {
	k.mu.Lock()
	cur := k.settingsLocked().cfg // which unlocks before it panics
	defer k.mu.Unlock()
	cfg, ok := f(cur)
	if !ok {
		return 0, 0, nil
	}
	if err := cfg.Validate(); err != nil {
		return 0, 0, fmt.Errorf("semaphore %q: %w", k.name, err)
	}
	st := k.settingsFor(cfg)
	old = k.set.cfg.MaxConcurrentCalls
	k.set = st
	for _, e := range k.keys {
		if e.keyLine.head != nil {
			k.grantKeyLocked(e, st)
		}
	}
	k.grantTotalLocked(st)
	return old, cfg.MaxConcurrentCalls, nil
}

// Stats returns a snapshot of the totals over all keys. MaxConcurrentCalls
// is the shared total, 0 when there is none (and then so is
// AvailableConcurrentCalls); Waiting counts the callers waiting for a key's
// permit or for the total's.
func (k *Keyed[K]) Stats() bulkhead.Stats {
	k.mu.Lock()
	defer k.mu.Unlock()
	limit := k.settingsLocked().cfg.MaxConcurrentCalls
	return bulkhead.Stats{
		Name:                     k.name,
		Kind:                     bulkhead.Semaphore,
		MaxConcurrentCalls:       limit,
		AvailableConcurrentCalls: max(0, limit-k.inUse),
		InFlight:                 k.inUse,
		Waiting:                  k.waiting,
		Permitted:                k.permitted,
		Rejected:                 k.rejected,
		Cancelled:                k.cancelled,
		Finished:                 k.finished,
		Failed:                   k.failed,
	}
}

// KeyStats returns the counts of keys and of rejections by reason. At
// most 64 idle keys are kept; Evicted counts those removed beyond.
func (k *Keyed[K]) KeyStats() bulkhead.KeyStats {
	k.mu.Lock()
	defer k.mu.Unlock()
	return bulkhead.KeyStats{ActiveKeys: len(k.keys) - k.nidle, IdleKeys: k.nidle, Evicted: k.evicted,
		RejectedKey: k.rejectedKey, RejectedTotal: k.rejectedTotal, RejectedKeys: k.rejectedKeys}
}

// Key returns the calls of key running now and the callers of key waiting
// (for its permit or for the total's). It never creates an entry.
func (k *Keyed[K]) Key(key K) (inFlight, waiting int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.keys[key]
	if e == nil {
		return 0, 0
	}
	return e.running, e.held - e.running + e.queued
}
