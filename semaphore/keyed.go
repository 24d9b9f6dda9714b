package semaphore

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
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
	// wait: for the key's permit, then for the total's). Its other fields
	// must be left zero: Validate refuses them.
	PerKey Config
	// MaxConcurrentCalls caps the calls of all keys together, from 1 to
	// MaxLimit; 0 means no shared total.
	MaxConcurrentCalls int
	// MaxActiveKeys caps the keys that hold or wait for a permit at once,
	// up to 2,147,483,647; 0 means 65,536. A call for another key beyond it
	// is refused.
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
	const plain = "a keyed bulkhead's lines are first in, first out, bounded by maxWaitDuration only"
	switch pk := c.PerKey; {
	case pk.MaxWaitingCalls != 0:
		return fmt.Errorf("perKey.maxWaitingCalls: %s, got %d", plain, pk.MaxWaitingCalls)
	case pk.MinDeadlineSlack != 0:
		return fmt.Errorf("perKey.minDeadlineSlack: %s, got %v", plain, pk.MinDeadlineSlack)
	case pk.QueueOrder != bulkhead.FIFO: // and so LIFOThreshold, which needs AdaptiveLIFO
		return fmt.Errorf("perKey.queueOrder: %s, got %v", plain, pk.QueueOrder)
	case pk.CoDel != nil:
		return fmt.Errorf("perKey.codel: %s, got %+v", plain, *pk.CoDel)
	}
	switch {
	case c.MaxConcurrentCalls < 0 || c.MaxConcurrentCalls > MaxLimit:
		return fmt.Errorf("maxConcurrentCalls must be 0 (no total) or from 1 to %d, got %d", MaxLimit, c.MaxConcurrentCalls)
	case c.MaxActiveKeys < 0 || c.MaxActiveKeys > maxActiveKeysLimit:
		return fmt.Errorf("maxActiveKeys must be from 0 (meaning %d) to %d, got %d", defaultMaxActiveKeys, maxActiveKeysLimit, c.MaxActiveKeys)
	}
	return nil
}

// maxActiveKeysLimit is the largest MaxActiveKeys: the total word counts
// the active keys in 31 bits.
const maxActiveKeysLimit = 1<<31 - 1

// Keyed limits the calls of each key of type K (a tenant, a customer, a
// repository) to PerKey.MaxConcurrentCalls, and the calls of all keys
// together to MaxConcurrentCalls, so that one noisy key cannot take the
// whole capacity from the others. Calls run on their callers' goroutines;
// a Keyed starts no goroutines and is safe for concurrent use. A caller
// that waits for its permits has a timer of its own, for
// PerKey.MaxWaitDuration, stopped when its wait ends (the plain Bulkhead's
// waiters share one timer per line). Create one with [NewKeyed].
//
// A call takes its key's permit and then the total's, each by one atomic
// reservation, without a lock while nobody waits; a reservation that
// fails is rolled back, which may refuse another caller spuriously but
// never admits one over a limit. (The first call of an idle key reserves
// the total's permit first, in one reservation with the key's place among
// the active keys, and rolls it back if the key's permit is gone.) A
// caller never holds a total permit while it waits for its key. Callers
// that hold their key's permit and wait for the total are served
// round-robin across keys, first in, first out within a key. A key's entry
// is idle once no call holds or waits for its permits; up to 64 idle
// entries are kept for reuse and older ones evicted, so memory follows the
// keys in use.
type Keyed[K comparable] struct {
	// total is written by every call (see the total word's constants).
	total atomic.Uint64
	_     [cacheLine - 8]byte

	// Read by every call, written only under mu.
	set  atomic.Pointer[keyedSettings]
	tab  atomic.Pointer[ktable[K]]
	seed maphash.Seed
	hub  event.Hub[bulkhead.Event]
	name string
	_    [cacheLine]byte

	failed, cancelled                        atomic.Uint64
	rejectedKey, rejectedTotal, rejectedKeys atomic.Uint64

	// mu guards the lines of waiters, the ring, the idle entries, every
	// change to the table and to the wait flags, and the fields below.
	mu sync.Mutex
	// idle lists, oldest first, the entries marked kListed: idle when they
	// were listed, some in use again since.
	idle, idleTail *entry[K]
	nidle          int
	free           *entry[K] // spare entries, linked by idleNext
	nfree          int
	ring           *entry[K] // the keys whose callers wait for the total, the next to serve first
	twaiting       int       // callers waiting for the total
	waiting        int       // callers waiting for a key's permit or the total's
	evicted        uint64
	finGone        uint64 // calls finished on entries since evicted
	// finishedSeen is the last Finished that Stats reported, which it never
	// goes below (it sums counters that move meanwhile).
	finishedSeen uint64
}

// An entry's state word packs, from the low bits up: the key permits held
// (calls running, callers waiting for the total, and calls between their
// two reservations), three flags, and the low bits of the count of calls
// finished on the entry, whose carry goes to finHigh.
const (
	kHeldBits = 21
	kHeld     = 1<<kHeldBits - 1
	kWait     = 1 << kHeldBits       // callers wait for the key's permit; set under mu
	kDead     = 1 << (kHeldBits + 1) // evicted: out of the table, perhaps a spare
	kListed   = 1 << (kHeldBits + 2) // in Keyed.idle
	kFinShift = kHeldBits + 3
	kOneFin   = 1 << kFinShift
	kFinMax   = 1<<(64-kFinShift) - 1
)

// The total word packs the calls holding a total permit (32 bits), the
// active keys (31 bits: keys whose entry holds a permit or has callers
// waiting for one) and a flag set while callers wait for the total.
const (
	tInUse  = 1<<32 - 1
	tOneKey = 1 << 32
	tWait   = 1 << 63
)

func held(s uint64) int          { return int(s & kHeld) }
func activeKeys(t uint64) int    { return int(t >> 32 & (1<<31 - 1)) }
func finishedOf(s uint64) uint64 { return s >> kFinShift }

// keyedSettings is the configuration in force and the rejections built
// from it, replaced as a whole by Reconfigure.
type keyedSettings struct {
	cfg                            KeyedConfig
	perKey, limit                  uint64 // PerKey.MaxConcurrentCalls; MaxConcurrentCalls, or tInUse for none
	maxKeys                        int
	key, keyWaited                 bulkhead.FullError
	total, totalWaited, tooManyKey bulkhead.FullError
}

// totalFree reports whether the total word t admits another call now.
func (st *keyedSettings) totalFree(t uint64) bool { return t&tWait == 0 && t&tInUse < st.limit }

// entry is the state of one key.
type entry[K comparable] struct {
	state   atomic.Uint64 // see kHeld
	hash    atomic.Uint64 // of key
	finHigh atomic.Uint64 // carries of the finished count's low bits
	// key is written only while the entry is dead, under mu; read under mu
	// or by a caller that holds a permit of the entry.
	key K
	// The rest is guarded by Keyed.mu.
	keyLine kline // callers waiting for the key's permit
	queued  int   // their number
	// totalLine holds callers that have the key's permit and wait for the total.
	totalLine  kline
	tw         int       // their number
	prev, next *entry[K] // the ring of keys waiting for the total
	idleNext   *entry[K] // links Keyed.idle and Keyed.free
}

// maxSpare is how many evicted entries a Keyed keeps for reuse, so that a
// new key's calls allocate nothing; maxIdle is how many idle entries it
// keeps in its table. Both bound the memory that stays after a flood of
// keys.
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
	k := &Keyed[K]{name: name, seed: maphash.MakeSeed()}
	k.tab.Store(newTable(minTable, &entry[K]{}))
	k.set.Store(k.settingsFor(cfg))
	return k, nil
}

func (k *Keyed[K]) settingsFor(cfg KeyedConfig) *keyedSettings {
	st := &keyedSettings{cfg: cfg, perKey: uint64(cfg.PerKey.MaxConcurrentCalls), limit: tInUse, maxKeys: cfg.MaxActiveKeys}
	if cfg.MaxConcurrentCalls > 0 {
		st.limit = uint64(cfg.MaxConcurrentCalls)
	}
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

// settings returns the settings in force, and panics for a Keyed that
// NewKeyed did not make.
func (k *Keyed[K]) settings() *keyedSettings {
	st := k.set.Load()
	if st == nil {
		panic("semaphore: Keyed used without NewKeyed")
	}
	return st
}

// Name returns the name the Keyed bulkhead was created with.
func (k *Keyed[K]) Name() string { return k.name }

// String returns `keyed semaphore bulkhead "name"`.
func (k *Keyed[K]) String() string { return fmt.Sprintf("keyed semaphore bulkhead %q", k.name) }

// Config returns the configuration in force.
func (k *Keyed[K]) Config() KeyedConfig { return k.settings().cfg }

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
// once; copies are the same permit.
type KeyedPermit[K comparable] struct {
	k     *Keyed[K]
	e     *entry[K]
	start time.Time // when the work began; zero when nobody observes k
	// released is set by the first Release of the permit or of a copy, so
	// that a second one panics instead of giving back another call's
	// permits. It costs TryAcquire and AcquirePermit one 4-byte allocation,
	// about 90 instructions (BenchmarkKeyedDo/permit, callgrind: 401 to 492
	// per TryAcquire and Release); Do, which cannot release twice, has none.
	released *atomic.Bool
}

// Release gives the permits back, counts the call finished, and counts it
// failed when err is not nil; err is carried by the call's EventFinished.
// Release panics on the zero KeyedPermit and when the permit (or a copy)
// was released already.
func (p KeyedPermit[K]) Release(err error) {
	if p.k == nil {
		panic("semaphore: KeyedPermit.Release called on a zero KeyedPermit")
	}
	if p.released.Swap(true) {
		panic("semaphore: KeyedPermit.Release called twice")
	}
	p.k.release(p.e, p.start, err, err != nil)
}

// TryAcquire takes key's permit and the total's if both are free and nobody
// waits for them, without blocking. It reports whether it did; a false
// counts as a rejection. Release the permit when the work is done.
func (k *Keyed[K]) TryAcquire(key K) (KeyedPermit[K], bool) {
	e, start, err := k.acquire(nil, key)
	if err != nil {
		return KeyedPermit[K]{}, false
	}
	return KeyedPermit[K]{k: k, e: e, start: start, released: new(atomic.Bool)}, true
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
	e, start, err := k.acquire(ctx, key)
	if err != nil {
		return KeyedPermit[K]{}, err
	}
	return KeyedPermit[K]{k: k, e: e, start: start, released: new(atomic.Bool)}, nil
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
	// acquire and release, written out so that the fast paths make no call
	// but tryFast (BenchmarkKeyedDo).
	st := k.settings()
	h := maphash.Comparable(k.seed, key)
	var start time.Time
	e := k.tab.Load().find(h)
	if e == nil || !k.tryFast(st, e, key) {
		var err error
		if e, start, err = k.acquireSlow(ctx, st, key, h); err != nil {
			return err
		}
	} else if k.hub.Active() {
		start = k.publishPermitted(e, time.Time{})
	}
	returned := false
	defer func() {
		if !returned {
			k.abort(e, start, recover())
		}
	}()
	err := fn(ctx)
	returned = true
	for {
		s := e.state.Load()
		if err != nil || s&(kWait|kDead) != 0 || s&kHeld == 0 || s&kHeld == 1 && s&kListed == 0 ||
			finishedOf(s) == kFinMax || k.hub.Active() {
			k.release(e, start, err, err != nil) // the general case
			return err
		}
		if e.state.CompareAndSwap(s, s-1+kOneFin) {
			d := uint64(1)
			if s&kHeld == 1 {
				d += tOneKey // the key goes idle
			}
			if t := k.total.Add(-d) + d; t&tWait != 0 {
				k.giveTotal(0)
			}
			return err
		}
	}
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
// (TryAcquire). It returns the entry, and when the call starts to run (zero
// when nobody subscribes).
func (k *Keyed[K]) acquire(ctx context.Context, key K) (*entry[K], time.Time, error) {
	st := k.settings()
	h := maphash.Comparable(k.seed, key)
	if e := k.tab.Load().find(h); e != nil && k.tryFast(st, e, key) {
		var start time.Time
		if k.hub.Active() {
			start = k.publishPermitted(e, time.Time{})
		}
		return e, start, nil
	}
	return k.acquireSlow(ctx, st, key, h)
}

// tryFast takes e's permit and the total's without the lock, if nobody
// waits for either and both have room, and reports whether it did; on false
// it holds nothing and the caller takes the locked path. A call on an idle
// key (none held) reserves the total first, with the key's place among the
// active keys, so that a key's permit is never held uncounted: the counted
// keys are those with a permit held or a caller waiting.
func (k *Keyed[K]) tryFast(st *keyedSettings, e *entry[K], key K) bool {
	for {
		s := e.state.Load()
		if s&(kWait|kDead) != 0 || s&kHeld >= st.perKey {
			return false
		}
		if s&kHeld == 0 {
			if !k.takeTotal(st, tOneKey+1) {
				return false
			}
			if !e.state.CompareAndSwap(s, s+1) {
				k.giveTotal(tOneKey + 1)
				continue
			}
		} else {
			if !e.state.CompareAndSwap(s, s+1) {
				continue
			}
			if !k.takeTotal(st, 1) {
				k.putBack(e, 0, false)
				return false
			}
		}
		break
	}
	if e.key != key || k.set.Load() != st {
		// e was evicted and recycled for another key (or a hash collides)
		// since the table gave it, or Reconfigure replaced st since the
		// caller read it (a call admitted after it under the old limits):
		// give back and look under the lock.
		k.putBack(e, 1, false)
		return false
	}
	return true
}

// takeTotal adds d to the total word (a total permit, and with tOneKey an
// active key) if it admits a call now and, with tOneKey, one more active
// key; it reports whether it did.
func (k *Keyed[K]) takeTotal(st *keyedSettings, d uint64) bool {
	for {
		t := k.total.Load()
		if !st.totalFree(t) || d > 1 && activeKeys(t) >= st.maxKeys {
			return false
		}
		if k.total.CompareAndSwap(t, t+d) {
			return true
		}
	}
}

// giveTotal takes d off the total word, and serves the callers waiting for
// the total if there are any.
func (k *Keyed[K]) giveTotal(d uint64) {
	if t := k.total.Add(-d) + d; t&tWait != 0 {
		k.mu.Lock()
		k.grantTotalLocked(k.set.Load())
		k.mu.Unlock()
	}
}

// putKey gives back a key permit of e, counting a call finished if fin,
// and returns the state word before. It panics if e holds no permit.
func putKey[K comparable](e *entry[K], fin bool) uint64 {
	d := ^uint64(0) // -1
	if fin {
		d += kOneFin
	}
	for {
		s := e.state.Load()
		if s&kHeld == 0 || s&kDead != 0 {
			panic("semaphore: KeyedPermit.Release called without a held permit")
		}
		if fin && finishedOf(s) == kFinMax {
			// Wrap the low bits to zero while the permit is still held, so
			// that the entry cannot be evicted (and finHigh read and reset)
			// before the carry lands; then give the permit back.
			if e.state.CompareAndSwap(s, s+kOneFin) {
				e.finHigh.Add(1)
				fin, d = false, ^uint64(0)
			}
			continue
		}
		if e.state.CompareAndSwap(s, s+d) {
			return s
		}
	}
}

// putBack gives back e's key permit and total (the total permits to give
// back, 0 or 1), counting a call finished if fin: an active key goes idle
// with its last permit, the total's waiters are served, and so are the
// key's, under the lock if there are any.
func (k *Keyed[K]) putBack(e *entry[K], total uint64, fin bool) {
	s := putKey(e, fin)
	idle := s&kHeld == 1 && s&kWait == 0
	d := total
	if idle {
		d += tOneKey
	}
	t := k.total.Add(-d) + d
	if s&kWait != 0 || t&tWait != 0 || idle && s&kListed == 0 {
		k.mu.Lock()
		st := k.set.Load()
		if s&kWait != 0 {
			k.grantKeyLocked(e, st)
		}
		if t&tWait != 0 {
			k.grantTotalLocked(st)
		}
		if idle {
			k.listIdleLocked(e)
		}
		k.mu.Unlock()
	}
}

// acquireSlow is acquire under the lock: for a key not in the table, or
// when someone waits, a permit is not free, or tryFast raced.
func (k *Keyed[K]) acquireSlow(ctx context.Context, st *keyedSettings, key K, h uint64) (*entry[K], time.Time, error) {
	k.mu.Lock()
	st = k.set.Load() // Reconfigure changes it under mu
	tab := k.tab.Load()
	e := tab.lookup(h, key)
	if e == nil {
		if activeKeys(k.total.Load()) >= st.maxKeys {
			k.rejectedKeys.Add(1)
			return nil, time.Time{}, k.refuseLocked(time.Time{}, &st.tooManyKey)
		}
		e = k.addLocked(key, h)
	}
	wait := ctx != nil && st.cfg.PerKey.MaxWaitDuration > 0
	for {
		s := e.state.Load()
		if s&kWait != 0 || s&kHeld >= st.perKey {
			if !wait {
				k.rejectedKey.Add(1)
				k.listIdleLocked(e)
				return nil, time.Time{}, k.refuseLocked(time.Time{}, &st.key)
			}
			if !e.state.CompareAndSwap(s, s|kWait) {
				continue
			}
			w := &kwaiter{ready: make(chan struct{}, 1), state: forKey}
			e.keyLine.push(w)
			e.queued++
			k.waiting++
			k.grantKeyLocked(e, st) // a permit given back before the flag was set
			return k.wait(ctx, e, w, st)
		}
		t := k.total.Load()
		var d uint64
		if s&kHeld == 0 { // the key's first permit: count it active first
			if activeKeys(t) >= st.maxKeys {
				k.rejectedKeys.Add(1)
				k.listIdleLocked(e)
				return nil, time.Time{}, k.refuseLocked(time.Time{}, &st.tooManyKey)
			}
			d = tOneKey
		}
		free := st.totalFree(t)
		if !free && !wait {
			k.rejectedTotal.Add(1)
			k.listIdleLocked(e)
			return nil, time.Time{}, k.refuseLocked(time.Time{}, &st.total)
		}
		if free {
			d++
		}
		if d != 0 && !k.total.CompareAndSwap(t, t+d) {
			continue
		}
		if !e.state.CompareAndSwap(s, s+1) {
			k.total.Add(-d) // the wait flag is ours to change: nobody to serve
			continue
		}
		if free {
			k.mu.Unlock()
			var start time.Time
			if k.hub.Active() {
				start = k.publishPermitted(e, time.Time{})
			}
			return e, start, nil
		}
		w := &kwaiter{ready: make(chan struct{}, 1)}
		k.waiting++
		k.queueTotalLocked(e, w)
		k.grantTotalLocked(st) // a permit given back before the flag was set
		return k.wait(ctx, e, w, st)
	}
}

// queueTotalLocked puts w, which holds e's permit, last in e's line for the
// total, and e in the ring. mu must be held.
func (k *Keyed[K]) queueTotalLocked(e *entry[K], w *kwaiter) {
	w.state = forTotal
	e.totalLine.push(w)
	e.tw++
	if k.twaiting++; k.twaiting == 1 {
		for t := k.total.Load(); !k.total.CompareAndSwap(t, t|tWait); t = k.total.Load() {
		}
	}
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

// unqueueTotalLocked takes w out of e's line for the total. mu must be held.
func (k *Keyed[K]) unqueueTotalLocked(e *entry[K], w *kwaiter) {
	e.totalLine.remove(w)
	e.tw--
	if e.totalLine.head == nil {
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
	if k.twaiting--; k.twaiting == 0 {
		for t := k.total.Load(); !k.total.CompareAndSwap(t, t&^tWait); t = k.total.Load() {
		}
	}
}

// wait waits until w is admitted, ctx ends or PerKey.MaxWaitDuration passes.
// mu is held on entry and released.
func (k *Keyed[K]) wait(ctx context.Context, e *entry[K], w *kwaiter, st *keyedSettings) (*entry[K], time.Time, error) {
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
			start = k.publishPermitted(e, start)
		}
		return e, start, nil
	}
	k.waiting--
	err, reason := &st.keyWaited, &k.rejectedKey
	if w.state == forKey {
		e.keyLine.remove(w)
		if e.queued--; e.queued == 0 {
			k.clearKeyWaitLocked(e)
		}
	} else {
		err, reason = &st.totalWaited, &k.rejectedTotal
		k.unqueueTotalLocked(e, w)
		k.putKeyLocked(e)
	}
	if !cancelled {
		reason.Add(1)
		return nil, time.Time{}, k.refuseLocked(start, err)
	}
	k.cancelled.Add(1)
	k.mu.Unlock()
	if k.hub.Active() {
		k.publish(bulkhead.EventCancelled, start, ctx.Err())
	}
	return nil, time.Time{}, ctx.Err()
}

// refuseLocked unlocks mu and publishes a rejection (the caller counted
// it by its reason).
func (k *Keyed[K]) refuseLocked(start time.Time, err *bulkhead.FullError) error {
	k.mu.Unlock()
	if k.hub.Active() {
		k.publish(bulkhead.EventRejected, start, err)
	}
	return err
}

// addLocked puts an entry for key in the table, from a spare one when it
// can. Nothing holds it yet: the caller lists it idle if it admits no call.
func (k *Keyed[K]) addLocked(key K, h uint64) *entry[K] {
	e := k.free
	if e != nil {
		k.free, e.idleNext = e.idleNext, nil
		k.nfree--
	} else {
		e = &entry[K]{}
	}
	e.key = key
	e.hash.Store(h)
	e.state.Store(0) // alive: after the key, for a caller that held it before
	tab := k.tab.Load().resized()
	tab.put(e)
	k.tab.Store(tab)
	return e
}

// listIdleLocked lists e among the idle entries if nothing holds or waits
// for its key and it is not listed yet, and evicts the oldest listed entry
// while more than maxIdle are. mu must be held.
func (k *Keyed[K]) listIdleLocked(e *entry[K]) {
	for {
		s := e.state.Load()
		if s&(kHeld|kWait|kListed|kDead) != 0 {
			return
		}
		if e.state.CompareAndSwap(s, s|kListed) {
			break
		}
	}
	if k.idle == nil {
		k.idle = e
	} else {
		k.idleTail.idleNext = e
	}
	k.idleTail = e
	k.nidle++
	for k.nidle > maxIdle {
		k.evictLocked()
	}
}

// evictLocked takes the oldest listed entry off the list, and removes it
// from the table if it is still idle. mu must be held.
func (k *Keyed[K]) evictLocked() {
	e := k.idle
	k.idle, e.idleNext = e.idleNext, nil
	if k.idle == nil {
		k.idleTail = nil
	}
	k.nidle--
	for {
		s := e.state.Load()
		if s&(kHeld|kWait) != 0 {
			if e.state.CompareAndSwap(s, s&^kListed) {
				return // in use again: listed anew when it is next idle
			}
			continue
		}
		if e.state.CompareAndSwap(s, kDead) {
			k.finGone += finishedOf(s) + e.finHigh.Load()<<(64-kFinShift)
			break
		}
	}
	tab := k.tab.Load()
	tab.remove(e)
	if nt := tab.resized(); nt != tab {
		k.tab.Store(nt)
	}
	k.evicted++
	e.finHigh.Store(0)
	var zero K
	e.key = zero
	if k.nfree < maxSpare {
		e.idleNext = k.free
		k.free = e
		k.nfree++
	}
}

// putKeyLocked gives back a key permit held by a caller that did not run
// (it gave up waiting for the total). mu must be held.
func (k *Keyed[K]) putKeyLocked(e *entry[K]) {
	s := putKey(e, false)
	if s&kWait != 0 {
		k.grantKeyLocked(e, k.set.Load())
	} else if s&kHeld == 1 {
		k.total.Add(^uint64(tOneKey - 1))
		k.listIdleLocked(e)
	}
}

// clearKeyWaitLocked clears e's wait flag once its line is empty; a key
// that then holds nothing is idle. mu must be held.
func (k *Keyed[K]) clearKeyWaitLocked(e *entry[K]) {
	for {
		s := e.state.Load()
		if e.state.CompareAndSwap(s, s&^kWait) {
			if s&kHeld == 0 {
				k.total.Add(^uint64(tOneKey - 1))
				k.listIdleLocked(e)
			}
			return
		}
	}
}

// grantKeyLocked hands e's free key permits to the callers waiting for
// them, in order; each then waits for the total, or runs if it is free.
// mu must be held.
func (k *Keyed[K]) grantKeyLocked(e *entry[K], st *keyedSettings) {
	for w := e.keyLine.head; w != nil; w = e.keyLine.head {
		s := e.state.Load()
		if s&kHeld >= st.perKey {
			return
		}
		n := s + 1
		if e.queued == 1 {
			n &^= kWait // the last waiter leaves the line
		}
		if !e.state.CompareAndSwap(s, n) {
			continue
		}
		e.keyLine.remove(w)
		e.queued--
		if k.ring == nil && k.takeTotal(st, 1) {
			k.admitLocked(w)
			continue
		}
		k.queueTotalLocked(e, w)
		// A lock-free release between takeTotal and the wait flag served
		// nobody: serve the line now, as acquireSlow does.
		k.grantTotalLocked(st)
	}
}

// grantTotalLocked hands the total's free permits to the callers waiting
// for them: one key's first caller after another, round-robin. mu must be
// held.
func (k *Keyed[K]) grantTotalLocked(st *keyedSettings) {
	for k.ring != nil {
		t := k.total.Load()
		if t&tInUse >= st.limit {
			return
		}
		if !k.total.CompareAndSwap(t, t+1) {
			continue
		}
		e := k.ring
		w := e.totalLine.head
		k.ring = e.next
		k.unqueueTotalLocked(e, w)
		k.admitLocked(w)
	}
}

// admitLocked lets w, which holds both permits, run, and wakes it.
func (k *Keyed[K]) admitLocked(w *kwaiter) {
	k.waiting--
	w.state = admitted
	w.ready <- struct{}{}
}

// release gives back a running call's permits and serves the waiters they
// free.
func (k *Keyed[K]) release(e *entry[K], start time.Time, err error, failed bool) {
	k.putBack(e, 1, true)
	if failed {
		k.failed.Add(1)
	}
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
func (k *Keyed[K]) abort(e *entry[K], start time.Time, r any) {
	if r == nil {
		k.release(e, start, errGoexit, true)
		return
	}
	var err error
	if k.hub.Active() {
		err = newPanicError(r)
	}
	k.release(e, start, err, true)
	panic(r)
}

// publishPermitted publishes EventPermitted and returns its time. If a
// subscriber panics, the permits go back first (the call never ran).
func (k *Keyed[K]) publishPermitted(e *entry[K], start time.Time) time.Time {
	ok := false
	defer func() {
		if !ok {
			k.release(e, time.Time{}, nil, false) // finished, not failed: it never ran
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

// reconfigureLocked applies f's configuration under mu and returns the
// totals before and after.
func (k *Keyed[K]) reconfigureLocked(f func(KeyedConfig) (KeyedConfig, bool)) (old, limit int, err error) {
	k.settings() // which panics for a Keyed that NewKeyed did not make
	k.mu.Lock()
	defer k.mu.Unlock()
	cur := k.set.Load()
	cfg, ok := f(cur.cfg)
	if !ok {
		return 0, 0, nil
	}
	if err := cfg.Validate(); err != nil {
		return 0, 0, fmt.Errorf("semaphore %q: %w", k.name, err)
	}
	st := k.settingsFor(cfg)
	k.set.Store(st)
	tab := k.tab.Load()
	for i := range tab.slots {
		if e := tab.slots[i].Load(); e != nil && e != tab.tomb && e.keyLine.head != nil {
			k.grantKeyLocked(e, st)
		}
	}
	k.grantTotalLocked(st)
	return cur.cfg.MaxConcurrentCalls, cfg.MaxConcurrentCalls, nil
}

// Stats returns a snapshot of the totals over all keys. MaxConcurrentCalls
// is the shared total, 0 when there is none (and then so is
// AvailableConcurrentCalls); Waiting counts the callers waiting for a key's
// permit or for the total's. At rest every count is exact; while calls run,
// Finished never goes down from one call to the next, and Permitted and
// InFlight may count a call that is between its two reservations.
func (k *Keyed[K]) Stats() bulkhead.Stats {
	limit := k.settings().cfg.MaxConcurrentCalls
	k.mu.Lock()
	defer k.mu.Unlock()
	finished := k.finGone
	tab := k.tab.Load()
	for i := range tab.slots {
		if e := tab.slots[i].Load(); e != nil && e != tab.tomb {
			finished += finishedOf(e.state.Load()) + e.finHigh.Load()<<(64-kFinShift)
		}
	}
	inUse := int(k.total.Load() & tInUse)
	k.finishedSeen = max(k.finishedSeen, finished)
	permitted := max(k.finishedSeen, finished+uint64(inUse))
	return bulkhead.Stats{
		Name:                     k.name,
		Kind:                     bulkhead.Semaphore,
		MaxConcurrentCalls:       limit,
		AvailableConcurrentCalls: max(0, limit-inUse),
		InFlight:                 inUse,
		Waiting:                  k.waiting,
		Permitted:                permitted,
		Rejected:                 k.rejectedKey.Load() + k.rejectedTotal.Load() + k.rejectedKeys.Load(),
		Cancelled:                k.cancelled.Load(),
		Finished:                 k.finishedSeen,
		Failed:                   k.failed.Load(),
	}
}

// KeyStats returns the counts of keys and of rejections by reason. At
// most 64 idle keys are kept; Evicted counts those removed beyond.
func (k *Keyed[K]) KeyStats() bulkhead.KeyStats {
	k.settings()
	k.mu.Lock()
	defer k.mu.Unlock()
	active := activeKeys(k.total.Load())
	return bulkhead.KeyStats{ActiveKeys: active, IdleKeys: max(0, k.tab.Load().live-active), Evicted: k.evicted,
		RejectedKey: k.rejectedKey.Load(), RejectedTotal: k.rejectedTotal.Load(), RejectedKeys: k.rejectedKeys.Load()}
}

// Key returns the calls of key running now and the callers of key waiting
// (for its permit or for the total's). It never creates an entry.
func (k *Keyed[K]) Key(key K) (inFlight, waiting int) {
	k.settings()
	h := maphash.Comparable(k.seed, key)
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.tab.Load().lookup(h, key)
	if e == nil {
		return 0, 0
	}
	return max(0, held(e.state.Load())-e.tw), e.tw + e.queued
}
