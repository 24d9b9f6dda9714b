package semaphore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/internal/clock"
	"github.com/bulkhead-go/bulkhead/internal/event"
	"github.com/bulkhead-go/bulkhead/internal/shed"
)

// MaxLimit is the largest MaxConcurrentCalls a Bulkhead accepts.
const MaxLimit = 1 << 20

// Config is a semaphore bulkhead's configuration. Its zero value is not
// valid: start from [DefaultConfig] or set MaxConcurrentCalls.
type Config struct {
	// MaxConcurrentCalls is how many calls may hold a permit at once,
	// from 1 to MaxLimit.
	MaxConcurrentCalls int
	// MaxWaitDuration is how long a caller of Acquire, Do or Execute waits
	// for a permit when none is free. 0 means fail at once; it must not be
	// negative. A caller waits for the MaxWaitDuration in force when it
	// started waiting, even if Reconfigure changes it meanwhile.
	MaxWaitDuration time.Duration

	// The fields below shape the line of waiters; they need a positive
	// MaxWaitDuration (without one, nobody waits), and their zero values
	// keep a plain first-in, first-out line. Rejections they cause carry
	// their [bulkhead.Reason].

	// MaxWaitingCalls caps the callers waiting at once; 0 means no cap. A
	// caller that finds that many waiting is refused at once
	// (ReasonWaiters), unless the line serves the newest first: then the
	// oldest waiter (of the lowest priority) is refused and the caller
	// joins. With Priorities, a caller that finds the line full otherwise
	// displaces the newest waiter of the lowest priority below its own
	// (ReasonDisplaced), and is refused only if none waits.
	MaxWaitingCalls int
	// MinDeadlineSlack, if positive, is the time a call needs to be of use
	// before its context's deadline: a caller that would have to wait with
	// less left is refused at once, and a waiter is refused when that point
	// comes instead of being granted a permit too late (ReasonDeadline).
	MinDeadlineSlack time.Duration
	// QueueOrder is the order waiters get permits: bulkhead.FIFO (the
	// default), bulkhead.LIFO or bulkhead.AdaptiveLIFO.
	QueueOrder bulkhead.QueueOrder
	// LIFOThreshold is, for AdaptiveLIFO, the number of waiters above which
	// the newest is served first; 0 means only while CoDel reports the line
	// overloaded (CoDel must then be set).
	LIFOThreshold int
	// CoDel, if not nil, sheds waiters of a line that stays above its
	// target wait (ReasonCoDel); see [bulkhead.CoDel].
	CoDel *bulkhead.CoDel

	// Priorities, if not nil, reserves capacity for calls of higher
	// priority and serves waiters highest priority first, first in, first
	// out within a priority (see [bulkhead.Priorities]). A call's priority
	// is its context's ([bulkhead.PriorityFrom]); TryAcquire's is Critical.
	// A call refused only because the capacity left is reserved for higher
	// priorities carries ReasonPriority. nil means every call is alike.
	// Reconfigure may switch it on or off while callers wait: switched off,
	// they keep their place in the order they joined; switched on, the
	// callers already waiting are Critical.
	Priorities *bulkhead.Priorities

	// Shadow, if not nil, evaluates a tighter limit on live traffic without
	// enforcing it, and counts what it would have done ([Bulkhead.ShadowStats]).
	Shadow *Shadow
	// Observe, if true, enforces nothing: every call is admitted (up to
	// MaxLimit in flight) and MaxConcurrentCalls and MaxWaitDuration are
	// evaluated as a shadow is. Ship a new bulkhead observing, read what it
	// would have refused, then enforce.
	Observe bool
}

// DefaultConfig returns Resilience4j's defaults: 25 concurrent calls and no
// waiting.
func DefaultConfig() Config {
	return Config{MaxConcurrentCalls: 25, MaxWaitDuration: 0}
}

// Validate reports the first invalid field of c, naming the field and value.
func (c Config) Validate() error {
	switch {
	case c.MaxConcurrentCalls < 1:
		return fmt.Errorf("maxConcurrentCalls must be >= 1, got %d", c.MaxConcurrentCalls)
	case c.MaxConcurrentCalls > MaxLimit:
		return fmt.Errorf("maxConcurrentCalls must be <= %d, got %d", MaxLimit, c.MaxConcurrentCalls)
	case c.MaxWaitDuration < 0:
		return fmt.Errorf("maxWaitDuration must be >= 0, got %v", c.MaxWaitDuration)
	}
	if err := shed.Validate(c.MaxWaitingCalls, c.MinDeadlineSlack, c.QueueOrder, c.LIFOThreshold, c.CoDel); err != nil {
		return err
	}
	if c.Priorities != nil {
		if err := c.Priorities.Validate(); err != nil {
			return err
		}
	}
	if err := c.validateShadow(); err != nil {
		return err
	}
	if c.MaxWaitDuration == 0 {
		// A LIFO line needs a bounded wait, so that nobody waits forever;
		// every other field here would configure nothing.
		switch {
		case c.QueueOrder != bulkhead.FIFO:
			return fmt.Errorf("queueOrder %v needs maxWaitDuration > 0 (a bounded wait), got 0", c.QueueOrder)
		case c.MaxWaitingCalls > 0:
			return fmt.Errorf("maxWaitingCalls %d needs maxWaitDuration > 0 (nobody waits), got 0", c.MaxWaitingCalls)
		case c.MinDeadlineSlack > 0:
			return fmt.Errorf("minDeadlineSlack %v needs maxWaitDuration > 0 (nobody waits), got 0", c.MinDeadlineSlack)
		case c.CoDel != nil:
			return fmt.Errorf("codel needs maxWaitDuration > 0 (nobody waits), got 0")
		}
	}
	return nil
}

// The state word packs, from the low bits up: the permits in use (21 bits),
// the limit (21 bits), a flag set while callers wait (1 bit), and the low 21
// bits of the count of finished calls. Keeping them in one word lets a single
// compare-and-swap admit a call only while the limit allows it and nobody
// waits, which keeps the fast path lock-free and the waiters first in line;
// and lets a single atomic add give the permit back and count the call
// finished. The finished count's carry out of the top bit is lost by the
// hardware, so its high bits live in finishedHigh.
const (
	fieldBits   = 21
	fieldMask   = 1<<fieldBits - 1
	limitShift  = fieldBits
	waitFlag    = 1 << (2 * fieldBits)
	finShift    = 2*fieldBits + 1
	oneFinished = 1 << finShift
	maxWaiters  = 1<<31 - 1
	cacheLine   = 64
)

func inUse(s uint64) int   { return int(s & fieldMask) }
func limitOf(s uint64) int { return int(s >> limitShift & fieldMask) }

// full reports whether s admits no new call: the limit is reached or
// someone waits.
func full(s uint64) bool { return s&waitFlag != 0 || s&fieldMask >= s>>limitShift&fieldMask }

// Waiters wait in one lane per priority, Sheddable's first; without
// Priorities they all wait in Critical's.
const (
	nLanes       = 4
	laneCritical = int(bulkhead.Critical - bulkhead.Sheddable)
)

// laneOf returns the lane of priority p (a p beyond the four classes goes
// to the nearest).
func laneOf(p bulkhead.Priority) int { return min(max(int(p-bulkhead.Sheddable), 0), nLanes-1) }

// wordLimit is the limit the state word holds for cfg: the lowest that any
// call can be held to (Sheddable's ceiling, with Priorities), so that a
// call below it is admitted by the fast path without reading its context.
// Only calls above it look up their priority's ceiling in the settings. A
// shadowed bulkhead's is 0: each of its calls must be seen by the shadow.
func wordLimit(cfg Config) int {
	if cfg.Shadow != nil || cfg.Observe {
		return 0 // every call takes the configured path
	}
	if cfg.Priorities != nil {
		return cfg.Priorities.Ceiling(bulkhead.Sheddable, cfg.MaxConcurrentCalls)
	}
	return cfg.MaxConcurrentCalls
}

// errGoexit is the error of EventFinished for a call whose function called
// runtime.Goexit.
var errGoexit = errors.New("semaphore: the guarded function called runtime.Goexit")

// Bulkhead limits how many calls may run at once on their callers'
// goroutines. Most callers should use [Bulkhead.Do] or [Execute]; Acquire,
// TryAcquire and Release are the parts they are made of. A Bulkhead starts no
// goroutines and is safe for concurrent use. Create one with [New].
type Bulkhead struct {
	// state is written by every call; it has a cache line of its own, so
	// that the counters below, written by rejections and failures, do not
	// take it away from the cores that admit calls.
	state atomic.Uint64 // in use | limit | wait flag | finished (low bits); see above
	_     [cacheLine - 8]byte

	// Read by every call, written only by Subscribe and Reconfigure.
	hub  event.Hub[bulkhead.Event]
	set  atomic.Pointer[settings]
	name string
	_    [cacheLine]byte

	finishedHigh atomic.Uint64           // the finished count >> fieldBits
	rejected     [nReasons]atomic.Uint64 // by reason
	cancelled    atomic.Uint64
	failed       atomic.Uint64
	waiting      atomic.Int64 // callers in the waiter list, for Stats

	// The shadow's permits in use and its verdicts (see shadow.go).
	shadowInUse                          atomic.Int64
	wouldReject, wouldWait, wouldTimeOut atomic.Uint64

	// statsMu orders Stats calls, so that the last values they reported
	// (finishedSeen, permittedSeen) come from one read of the state word.
	// They keep Stats from going backwards in the moment between a wrap of
	// the finished count's low bits and the increment of its high bits.
	statsMu                     sync.Mutex
	finishedSeen, permittedSeen uint64

	mu    sync.Mutex   // guards the waiter list, the timer and every change to the wait flag
	lanes [nLanes]list // the line of waiters, a lane per priority
	// timer is armed for the earliest deadline of a waiter (at armed, in
	// the clock of now); a few of the waiters (watchers) listen to it, and
	// the one it wakes rejects the waiters whose time is up. nil until the
	// first wait.
	timer    *time.Timer
	armed    int64
	watchers int
	// line counts the lines of waiters, so that a waiter is reused only
	// in the line it came from; free holds nfree waiters of this line
	// whose callers are done with them, linked by next (see spareLocked).
	line  uint64
	free  *waiter
	nfree int
	// joined is the time (in the clock of now) the newest waiter joined.
	joined int64
	// shed is the line's order and CoDel state; overloaded mirrors its
	// CoDel verdict for Stats.
	shed       shed.Line
	overloaded atomic.Bool
}

// nReasons bounds the reasons a semaphore refuses with.
const nReasons = bulkhead.ReasonDisplaced + 1

// settings is the configuration in force and the rejection errors made
// from it, replaced as a whole by Reconfigure.
type settings struct {
	cfg Config
	// The errors of every rejection, by reason: errs[0] of a call refused
	// at once, errs[1] of one refused after waiting.
	errs [2][nReasons]bulkhead.FullError
	// lined is set when a rule beyond plain FIFO picks the waiter to serve.
	lined bool
	// With Priorities, ceil is each lane's ceiling (permits its calls may
	// hold) and aging is Aging in nanoseconds. Without them, every lane's
	// ceiling is the limit.
	prio  bool
	ceil  [nLanes]int
	aging int64
	// slow is set when calls are admitted on the configured path
	// (Priorities or a shadow). shadow is the shadow's limit (0 for none),
	// shadowWait its wait, and timeOuts is set when that wait is shorter
	// than the enforced one.
	slow, timeOuts bool
	// refuseNow is set when a call that finds no permit is refused at once:
	// one load on the rejection path (BenchmarkReject/serial).
	refuseNow  bool
	shadow     int
	shadowWait time.Duration
}

// refusal returns the reason a call of lane is refused for, without
// waiting, at the state s: ReasonPriority if only the capacity reserved
// for higher priorities is left.
func (st *settings) refusal(s uint64, lane int) bulkhead.Reason {
	if st.prio && lane < nLanes-1 && int(s&fieldMask) < st.cfg.MaxConcurrentCalls {
		return bulkhead.ReasonPriority
	}
	return bulkhead.ReasonFull
}

// err returns the prebuilt error of a rejection for reason r.
func (st *settings) err(r bulkhead.Reason, waited bool) *bulkhead.FullError {
	if waited {
		return &st.errs[1][r]
	}
	return &st.errs[0][r]
}

// epoch anchors now, so that deadlines are read from the monotonic clock.
var epoch = time.Now()

// now returns the time since epoch. For a time t from clock.Now taken at
// the same moment, t.Sub(epoch) is the same (inside a testing/synctest
// bubble too, where both are the bubble's wall time less epoch's).
func now() int64 { return int64(time.Since(epoch)) }

// New returns a Bulkhead named name with the given configuration. It fails
// if the name is empty or a field is out of range.
func New(name string, cfg Config) (*Bulkhead, error) {
	if name == "" {
		return nil, fmt.Errorf("semaphore: name must not be empty")
	}
	if !utf8.ValidString(name) {
		return nil, fmt.Errorf("semaphore: name %q is not valid UTF-8", name)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("semaphore %q: %w", name, err)
	}
	b := &Bulkhead{name: name}
	b.state.Store(uint64(wordLimit(cfg)) << limitShift)
	b.apply(cfg)
	return b, nil
}

// apply stores the settings for cfg; the limit in the state word is the
// caller's to set. b.mu must be held, or b not yet shared.
func (b *Bulkhead) apply(cfg Config) {
	if cfg.CoDel != nil {
		c := *cfg.CoDel // a copy: the caller's may change
		cfg.CoDel = &c
	}
	st := &settings{cfg: cfg, lined: cfg.QueueOrder != bulkhead.FIFO || cfg.CoDel != nil || cfg.MinDeadlineSlack > 0}
	if p := cfg.Priorities; p != nil {
		c := *p // a copy: the caller's may change
		st.cfg.Priorities, st.prio, st.aging = &c, true, int64(c.Aging)
		for i := range st.ceil {
			st.ceil[i] = c.Ceiling(bulkhead.Sheddable+bulkhead.Priority(i), cfg.MaxConcurrentCalls)
		}
	}
	st.applyShadow(cfg)
	for w := range st.errs {
		for r := range st.errs[w] {
			st.errs[w][r] = bulkhead.FullError{Name: b.name, Kind: bulkhead.Semaphore, MaxConcurrentCalls: cfg.MaxConcurrentCalls,
				MaxWaitDuration: cfg.MaxWaitDuration, Waited: w == 1, Reason: bulkhead.Reason(r)}
		}
	}
	b.shed.Set(cfg.QueueOrder, cfg.LIFOThreshold, cfg.CoDel)
	b.overloaded.Store(b.shed.Overloaded())
	b.set.Store(st)
}

// settings returns the settings in force, and panics for a Bulkhead that
// New did not make.
func (b *Bulkhead) settings() *settings {
	st := b.set.Load()
	if st == nil {
		unmade()
	}
	return st
}

// Name returns the name the Bulkhead was created with.
func (b *Bulkhead) Name() string { return b.name }

// Config returns the configuration in force.
func (b *Bulkhead) Config() Config {
	cfg := b.settings().cfg
	if cfg.CoDel != nil {
		c := *cfg.CoDel // a copy: the caller's may change
		cfg.CoDel = &c
	}
	if cfg.Priorities != nil {
		p := *cfg.Priorities
		cfg.Priorities = &p
	}
	if cfg.Shadow != nil {
		sh := *cfg.Shadow
		cfg.Shadow = &sh
	}
	return cfg
}

// Subscribe calls fn with every event of this Bulkhead until cancel is
// called. fn follows the callback contract of package
// [github.com/bulkhead-go/bulkhead] ("Callbacks"): it runs on the goroutine
// of the call it reports, and if it panics or calls runtime.Goexit the
// Bulkhead has already given back any permit the call held.
func (b *Bulkhead) Subscribe(fn func(bulkhead.Event)) (cancel func()) {
	if fn == nil {
		panic("semaphore: Subscribe called with a nil function")
	}
	return b.hub.Subscribe(fn)
}

// TryAcquire takes a permit if one is free and nobody is waiting for one
// (with Priorities: nobody of class Critical or higher), without blocking. It reports whether it did; a false counts as a
// rejection. Call Release when the work is done.
func (b *Bulkhead) TryAcquire() bool {
	if b.tryFast() {
		if b.hub.Active() {
			b.permitted(time.Time{})
		}
		return true
	}
	st := b.settings()
	r := bulkhead.ReasonFull
	if st.slow {
		if b.admitClass(st, laneCritical) {
			if st.shadow > 0 {
				b.shadowNaive(st)
			}
			if b.hub.Active() {
				b.permitted(time.Time{})
			}
			return true
		}
		r = st.refusal(b.state.Load(), laneCritical)
	}
	b.rejected[r].Add(1) // reject, written out: no call on this path either
	if b.hub.Active() {
		b.publish(bulkhead.EventRejected, time.Time{}, &st.errs[0][r])
	}
	return false
}

// Acquire takes a permit, waiting up to MaxWaitDuration for one when none is
// free. Waiters are served in the Config's QueueOrder, first in, first out
// by default. It returns nil with a permit held, ctx.Err() if ctx ends first
// (or had already ended: then nothing is counted), and a
// [*bulkhead.FullError] if no permit came in time or the line's rules
// refused it (see its Reason). Call Release when the work is done.
func (b *Bulkhead) Acquire(ctx context.Context) error {
	_, err := b.acquire(ctx)
	return err
}

// acquire is Acquire; it also returns when the permit was granted, or zero
// when nobody subscribes.
func (b *Bulkhead) acquire(ctx context.Context) (time.Time, error) {
	if ctx == nil {
		panic("semaphore: Acquire called with a nil Context")
	}
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	var start time.Time
	if !b.tryFast() {
		var err error
		if start, err = b.acquireFull(ctx); err != nil {
			return time.Time{}, err
		}
	}
	if b.hub.Active() {
		return b.permitted(start), nil
	}
	return time.Time{}, nil
}

// acquireFull is Acquire once the fast path found no free permit. It
// publishes a rejection or cancellation itself, but leaves EventPermitted
// to its caller, with the time the wait started (zero when nobody
// subscribes).
func (b *Bulkhead) acquireFull(ctx context.Context) (time.Time, error) {
	st := b.settings()
	if st.refuseNow {
		return time.Time{}, b.reject(time.Time{}, bulkhead.ReasonFull, false)
	}
	start, _, err := b.acquireClass(ctx, st)
	if err == nil && st.shadow > 0 {
		b.shadowNaive(st)
	}
	return start, err
}

// acquireClass is Acquire once the fast path found no free permit, for a
// bulkhead that may wait or has Priorities: a call of a priority whose
// ceiling is above the state word's limit takes a permit here, lock-free
// while nobody waits. Its results are acquireSlow's.
//
//go:noinline
func (b *Bulkhead) acquireClass(ctx context.Context, st *settings) (time.Time, *waiter, error) {
	lane := laneCritical
	if st.slow {
		if st.prio {
			lane = laneOf(bulkhead.PriorityFrom(ctx))
		}
		ok := b.tryClass(st, lane)
		if nst := b.set.Load(); nst != st {
			// Reconfigure replaced st since it was read: a permit taken by its
			// ceilings goes back, and the call is judged by the new settings,
			// its lane too.
			if ok {
				b.giveBack()
			}
			if lane = laneCritical; nst.prio {
				lane = laneOf(bulkhead.PriorityFrom(ctx))
			}
			return b.acquireSlow(ctx, lane)
		}
		if ok {
			return time.Time{}, nil, nil
		}
		if s := b.state.Load(); st.cfg.Observe || st.cfg.MaxWaitDuration <= 0 && s&waitFlag == 0 {
			return time.Time{}, nil, b.reject(time.Time{}, st.refusal(s, lane), false)
		}
	}
	return b.acquireSlow(ctx, lane)
}

// tryClass takes a permit for a call of lane if its ceiling allows and
// nobody waits, and reports whether it did. The word does not hold the
// ceilings, so the caller must then check that Reconfigure has not
// replaced st, and give the permit back if it has: a call must not be
// admitted by old ceilings after Reconfigure returned.
func (b *Bulkhead) tryClass(st *settings, lane int) bool {
	for {
		s := b.state.Load()
		if s&waitFlag != 0 || s&fieldMask >= uint64(st.ceil[lane]) {
			return false
		}
		if b.state.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// giveBack returns a permit taken by old settings, counting no call
// finished, and hands it to a waiter if one joined meanwhile.
func (b *Bulkhead) giveBack() {
	if s := b.state.Add(^uint64(0)); s&waitFlag != 0 { // adds -1
		b.grantWaiters(nil)
	}
}

// admitClass takes a permit for a call of lane that does not wait if its
// ceiling allows and no waiter of its priority or higher is in line, and
// reports whether it did.
func (b *Bulkhead) admitClass(st *settings, lane int) bool {
	ok := b.tryClass(st, lane)
	if b.set.Load() == st {
		if ok || b.state.Load()&waitFlag == 0 {
			return ok
		}
	} else if ok {
		b.giveBack() // Reconfigure replaced st: judge by the new settings, under b.mu
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	st = b.set.Load() // Reconfigure may have replaced it; it does so only under b.mu
	_, top := b.topLocked(st, now())
	for {
		s := b.state.Load()
		if s&fieldMask >= uint64(st.ceil[lane]) || top >= lane {
			return false
		}
		if b.state.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// topLocked returns the lane whose head the line serves next, and that
// head's priority (its lane's, raised by Aging), or -1 and -1 for an empty
// line. Between heads of one priority, the one that joined first goes
// first. t is the time, read if Aging is set. b.mu must be held.
func (b *Bulkhead) topLocked(st *settings, t int64) (lane, class int) {
	lane, class = -1, -1
	for i := nLanes - 1; i >= 0; i-- {
		h := b.lanes[i].head
		if h == nil {
			continue
		}
		if c := st.class(h, t); c > class || c == class && h.joined < b.lanes[lane].head.joined {
			lane, class = i, c
		}
	}
	return lane, class
}

// class returns w's priority at time t: its lane's, raised by Aging.
func (st *settings) class(w *waiter, t int64) int {
	c := int(w.lane)
	if st.aging > 0 {
		c = min(nLanes-1, c+int(max(t-w.joined, 0)/st.aging)) // t may be older than a join
	}
	return c
}

// Release returns a permit taken by Acquire or TryAcquire. If callers wait,
// the permit goes to the next of them in line. Release panics if no permit is held:
// like unlocking an unlocked mutex, that is a bug in the caller.
func (b *Bulkhead) Release() { b.finish(time.Time{}, nil, false) }

// Permit is a permit held by work that does not fit in one call to Do: a
// response body read after the round trip, a stream, a middleware's next
// handler. Take one with AcquirePermit and give it back with Release exactly
// once. It is a small value; copies are the same permit.
type Permit struct {
	b      *Bulkhead
	start  time.Time // when the work began; zero when nobody observes b
	shadow bool      // it holds a shadow permit too
	// released is set by the first Release of the permit or of a copy, so
	// that a second one panics instead of giving back another call's
	// permit. It costs AcquirePermit one 4-byte allocation, about 130
	// instructions (BenchmarkPermit/serial, callgrind: 247 to 374 per
	// AcquirePermit and Release); Do, which takes no Permit, has none.
	released *atomic.Bool
}

// AcquirePermit is Acquire for a caller that reports the outcome of its work
// when it gives the permit back: it returns the same errors, and a Permit
// whose Release counts the call finished (failed for a non-nil error) and
// reports how long it ran.
func (b *Bulkhead) AcquirePermit(ctx context.Context) (Permit, error) {
	if ctx == nil {
		misuse("AcquirePermit", true)
	}
	if st := b.settings(); st.shadow > 0 {
		return b.acquirePermitShadowed(ctx, st)
	}
	start, err := b.acquire(ctx)
	if err != nil {
		return Permit{}, err
	}
	return Permit{b: b, start: start, released: new(atomic.Bool)}, nil
}

// Release gives the permit back, counts the call finished, and counts it
// failed when err is not nil; err is carried by the call's EventFinished.
// Release panics on the zero Permit and when the permit (or a copy) was
// released already.
func (p Permit) Release(err error) {
	if p.b == nil {
		panic("semaphore: Permit.Release called on a zero Permit")
	}
	if p.released.Swap(true) {
		panic("semaphore: Permit.Release called twice")
	}
	p.b.shadowDone(p.shadow)
	p.b.finish(p.start, err, err != nil)
}

// Do runs fn on the calling goroutine while holding a permit, and returns
// fn's error unchanged. If no permit can be had it returns the error of
// Acquire without calling fn. The permit is released however fn ends; a
// panic in fn or a runtime.Goexit is counted as a failure, and the panic
// continues up the caller's stack.
func (b *Bulkhead) Do(ctx context.Context, fn func(context.Context) error) error {
	if fn == nil || ctx == nil {
		misuse("Do", ctx == nil)
	}
	// Acquire and its rejection, written out so that neither the fast path
	// nor a rejection makes a call.
	if err := ctx.Err(); err != nil {
		return err
	}
	var start time.Time // when the wait began, then when fn began; zero without subscribers
	var spare *waiter   // the waiter this call was, for the line to reuse
	for {
		s := b.state.Load()
		if full(s) {
			if st := b.settings(); st.refuseNow {
				b.rejected[bulkhead.ReasonFull].Add(1)
				f := &st.errs[0][bulkhead.ReasonFull]
				if b.hub.Active() {
					b.publish(bulkhead.EventRejected, time.Time{}, f)
				}
				return f
			}
			var err error
			if start, spare, err = b.acquireDo(ctx); err != nil {
				if err == errShadowed {
					return b.doShadowed(ctx, fn)
				}
				return err
			}
			break
		}
		if b.state.CompareAndSwap(s, s+1) {
			break
		}
	}
	if b.hub.Active() {
		start = b.permitted(start)
	}
	returned := false
	defer func() {
		if !returned {
			b.abort(start, recover())
		}
	}()
	err := fn(ctx)
	returned = true
	// Give the permit back and count the call finished with one add, and
	// handle the rare cases from the word as it was before the add. This
	// call took the permit, so the count in use was not 0 unless a wrong
	// Release elsewhere took it; releasedSlow undoes that and panics.
	s := b.state.Add(oneFinished-1) - (oneFinished - 1)
	if s&fieldMask == 0 || s&waitFlag != 0 || s>>finShift == fieldMask || err != nil || b.hub.Active() {
		b.releasedSlow(s, start, err, spare)
	}
	return err
}

// releasedSlow completes Do's release when the word before the add (s)
// shows waiters, a wrap of the finished count, or a permit stolen by a
// wrong Release, or when fn failed or someone subscribes. spare is the
// waiter the call was, if it may be reused.
//
//go:noinline
func (b *Bulkhead) releasedSlow(s uint64, start time.Time, err error, spare *waiter) {
	if s&fieldMask == 0 {
		b.state.Add(^uint64(oneFinished - 2)) // adds 1 - oneFinished: undo, then panic as Release does
		panic("semaphore: Release called without a held permit")
	}
	b.released(s, spare)
	if err != nil {
		b.failed.Add(1)
	}
	if b.hub.Active() {
		b.publishFinished(start, err)
	}
}

// Execute is Do for a function that returns a value.
func Execute[T any](ctx context.Context, b *Bulkhead, fn func(context.Context) (T, error)) (T, error) {
	if fn == nil || ctx == nil {
		misuse("Execute", ctx == nil)
	}
	var v T
	err := b.Do(ctx, func(ctx context.Context) error {
		var err error
		v, err = fn(ctx)
		return err
	})
	return v, err
}

// misuse panics for a nil Context or function passed to name: a bug in the
// caller, reported before anything is taken or counted.
//
//go:noinline
func misuse(name string, nilContext bool) {
	if nilContext {
		panic("semaphore: " + name + " called with a nil Context")
	}
	panic("semaphore: " + name + " called with a nil function")
}

// unmade panics for a Bulkhead that New did not make (a zero Bulkhead,
// which has no limit and would refuse every call).
//
//go:noinline
func unmade() { panic("semaphore: Bulkhead used without New") }

// abort releases the permit of a call whose function panicked (r != nil)
// or called runtime.Goexit (r == nil), counts it failed, and lets the panic
// go on.
func (b *Bulkhead) abort(start time.Time, r any) {
	if r == nil {
		b.finish(start, errGoexit, true)
		return
	}
	var err error
	if b.hub.Active() {
		err = newPanicError(r)
	}
	b.finish(start, err, true)
	panic(r)
}

// Reconfigure applies cfg without blocking. A larger limit hands the new
// permits to waiters at once; a smaller one lets the calls in flight finish
// and admits new calls only once fewer than the new limit run. A new
// MaxWaitDuration applies to callers that start waiting after it: a caller
// already waiting keeps the deadline it started with. A new limit is
// published as [bulkhead.EventLimitChanged].
func (b *Bulkhead) Reconfigure(cfg Config) error {
	return b.ReconfigureFunc(func(Config) (Config, bool) { return cfg, true })
}

// ReconfigureFunc applies, as Reconfigure does, the configuration that f
// returns given the one in force, or changes nothing if f returns false. f
// runs under the Bulkhead's lock, so nothing changes the configuration
// between its read and the change; it must not call the Bulkhead.
func (b *Bulkhead) ReconfigureFunc(f func(Config) (Config, bool)) error {
	old, limit, err := b.reconfigureLocked(f)
	if err == nil && old != limit && b.hub.Active() {
		b.hub.Publish(bulkhead.Event{Name: b.name, Kind: bulkhead.Semaphore, Type: bulkhead.EventLimitChanged,
			Time: clock.Now(), Limit: limit})
	}
	return err
}

// reconfigureLocked applies f's configuration under b.mu and returns the
// limits before and after.
func (b *Bulkhead) reconfigureLocked(f func(Config) (Config, bool)) (old, limit int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cfg, ok := f(b.settings().cfg)
	if !ok {
		return 0, 0, nil
	}
	if err := cfg.Validate(); err != nil {
		return 0, 0, fmt.Errorf("semaphore %q: %w", b.name, err)
	}
	old = b.settings().cfg.MaxConcurrentCalls
	for {
		s := b.state.Load()
		n := s&^(fieldMask<<limitShift) | uint64(wordLimit(cfg))<<limitShift
		if b.state.CompareAndSwap(s, n) {
			break
		}
	}
	if cfg.Priorities == nil && b.settings().prio {
		b.mergeLanesLocked()
	}
	b.apply(cfg)
	b.grantAllLocked()
	return old, cfg.MaxConcurrentCalls, nil
}

// mergeLanesLocked moves every waiter into Critical's lane, the only one a
// line without Priorities serves, in the order they joined. b.mu must be
// held.
func (b *Bulkhead) mergeLanesLocked() {
	var all list
	for {
		var from *list // the lane whose head joined first, the higher on a tie
		for i := nLanes - 1; i >= 0; i-- {
			if h := b.lanes[i].head; h != nil && (from == nil || h.joined < from.head.joined) {
				from = &b.lanes[i]
			}
		}
		if from == nil {
			break
		}
		w := from.head
		from.remove(w)
		if all.tail != nil && w.deadline < all.tail.deadline {
			all.unsorted = true
		}
		w.lane = uint8(laneCritical)
		all.pushBack(w)
	}
	b.lanes = [nLanes]list{laneCritical: all}
}

// Stats returns a snapshot of the Bulkhead's state and counters. Each
// snapshot is consistent in itself, whoever else calls Stats at the same
// time: Permitted is at least Finished, and Permitted - Finished is
// InFlight (in the rare moment the finished count's low bits wrap, off by
// at most the calls in flight).
func (b *Bulkhead) Stats() bulkhead.Stats {
	b.statsMu.Lock()
	var s, high uint64
	for range 4 { // a wrap of the low bits between the loads is rare; then look again
		high = b.finishedHigh.Load()
		s = b.state.Load()
		if b.finishedHigh.Load() == high {
			break
		}
	}
	in, limit := inUse(s), limitOf(s)
	// raw is below the truth in the moment between a wrap of the low bits
	// and the increment of high; the values seen last hide that. Stats
	// calls are serialized, so those are from one earlier read of the
	// state word, never above this one's truth.
	raw := high<<fieldBits | s>>finShift
	b.finishedSeen = max(b.finishedSeen, raw)
	b.permittedSeen = max(b.permittedSeen, raw+uint64(in), b.finishedSeen)
	finished, permitted := b.finishedSeen, b.permittedSeen
	b.statsMu.Unlock()
	var by [len(bulkhead.Reasons) + 1]uint64
	var rejected uint64
	for r := range b.rejected {
		by[r] = b.rejected[r].Load()
		rejected += by[r]
	}
	cfg := b.settings().cfg
	if cfg.Priorities != nil || cfg.Shadow != nil || cfg.Observe {
		limit = cfg.MaxConcurrentCalls // the word holds the lowest ceiling, or 0
	}
	waiting := int(b.waiting.Load())
	overloaded := b.overloaded.Load()
	return bulkhead.Stats{
		Name:                     b.name,
		Kind:                     bulkhead.Semaphore,
		MaxConcurrentCalls:       limit,
		AvailableConcurrentCalls: max(0, limit-in),
		InFlight:                 in,
		Waiting:                  waiting,
		Permitted:                permitted,
		Rejected:                 rejected,
		RejectedBy:               by,
		Overloaded:               overloaded,
		LIFO:                     shed.LIFO(cfg.QueueOrder, cfg.LIFOThreshold, waiting, overloaded),
		Cancelled:                b.cancelled.Load(),
		Finished:                 finished,
		Failed:                   b.failed.Load(),
	}
}

// String returns `semaphore bulkhead "name"`.
func (b *Bulkhead) String() string { return fmt.Sprintf("semaphore bulkhead %q", b.name) }

// tryFast takes a permit if the limit allows and nobody waits.
func (b *Bulkhead) tryFast() bool {
	for {
		s := b.state.Load()
		if full(s) {
			return false
		}
		if b.state.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// acquireSlow waits in line for a permit. It returns when the wait began
// (zero when nobody subscribes) and nil with a permit held, or the error of
// a rejection or cancellation, which it has counted and published. With a
// permit that came through the line it also returns the waiter, if the
// line may reuse it (see spareLocked).
func (b *Bulkhead) acquireSlow(ctx context.Context, lane int) (time.Time, *waiter, error) {
	// The clock is read before the lock, to keep it out of b.mu's critical
	// section, and once: when someone subscribes, the event's start gives
	// the time for the deadline too.
	var start time.Time
	var t int64
	if b.hub.Active() {
		start = clock.Now()
		t = int64(start.Sub(epoch))
	} else {
		t = now()
	}
	// The latest this caller may be granted a permit, by its context's
	// deadline and the slack its call needs (read outside b.mu too).
	var latest int64
	byDeadline := false
	if slack := b.settings().cfg.MinDeadlineSlack; slack > 0 {
		if d, ok := ctx.Deadline(); ok {
			latest, byDeadline = int64(d.Sub(epoch)-slack), true
		}
	}
	b.mu.Lock()
	st := b.set.Load() // Reconfigure changes it under b.mu
	maxWait, maxWaiting := st.cfg.MaxWaitDuration, st.cfg.MaxWaitingCalls
	bump := false     // the line is full and serves the newest first: the oldest leaves
	var lower *waiter // the line is full: this caller displaces lower, of a lower priority
	top := -1         // with Priorities, the priority of the waiter served next
	if st.prio && b.waiting.Load() > 0 {
		if st.aging > 0 {
			// Waiters aged past their lane's ceiling since the last
			// release are served before this caller is judged.
			b.grantAllLocked()
		}
		_, top = b.topLocked(st, t)
	} else if !st.prio {
		lane = laneCritical
	}
	for {
		s := b.state.Load()
		admit := !full(s)
		if st.prio {
			admit = s&fieldMask < uint64(st.ceil[lane]) && top < lane
		} else if st.slow {
			admit = s&waitFlag == 0 && s&fieldMask < uint64(st.ceil[lane])
		}
		if admit {
			if !b.state.CompareAndSwap(s, s+1) {
				continue // a fast-path caller or a release raced us; look again
			}
			b.mu.Unlock()
			return start, nil, nil
		}
		r := bulkhead.ReasonNone
		switch n := int(b.waiting.Load()); {
		case n == maxWaiters || maxWait <= 0:
			r = st.refusal(s, lane) // too many waiters, or Reconfigure has just turned waiting off
		case byDeadline && latest <= t:
			r = bulkhead.ReasonDeadline
		case maxWaiting > 0 && n >= maxWaiting:
			switch {
			case b.shed.LIFO(n):
				// The oldest of the lowest priority leaves, unless that is
				// this caller, below every waiter: then it is refused.
				if bump = !st.prio || lane >= b.lowLocked(); !bump {
					r = bulkhead.ReasonWaiters
				}
			case st.prio:
				if lower = b.lowerLocked(st, lane, t); lower == nil {
					r = bulkhead.ReasonWaiters
				}
			default:
				r = bulkhead.ReasonWaiters
			}
		}
		if r != bulkhead.ReasonNone {
			b.mu.Unlock()
			return start, nil, b.reject(start, r, false)
		}
		// Set the flag (it may be set already) only if nothing changed since
		// the look above, so that no permit came free in between.
		if b.state.CompareAndSwap(s, s|waitFlag) {
			break
		}
	}
	w := b.free
	if w != nil {
		b.free, w.next = w.next, nil
		b.nfree--
		w.state.Store(waiting)
		w.watch, w.handed, w.reason = false, false, bulkhead.ReasonNone
	} else {
		w = &waiter{ready: make(chan struct{}, 1)}
	}
	if b.waiting.Load() > 0 && t < b.joined {
		// A caller that read the clock earlier but took the lock later is
		// ahead in line: join as late as it did, so that deadlines stay in
		// line order.
		t = b.joined
	}
	b.joined = t
	w.joined, w.deadline, w.byDeadline, w.lane = t, t+int64(maxWait), false, uint8(lane)
	if w.deadline < t {
		// The sum overflowed (a MaxWaitDuration near MaxInt64): the latest
		// time there is, not one in the past that no timer arms after.
		w.deadline = math.MaxInt64
	}
	if byDeadline && latest < w.deadline {
		w.deadline, w.byDeadline = latest, true
	}
	watch := b.queueLocked(w)
	if st.aging > 0 {
		b.ageLocked(st, b.state.Load(), t)
	}
	for bump && int(b.waiting.Load()) > maxWaiting {
		// Never w: w joined a lane that has older waiters, or one above the
		// lowest (a caller below every waiter was refused above).
		b.refuseLocked(b.oldestLowLocked(), bulkhead.ReasonWaiters)
	}
	if lower != nil {
		b.refuseLocked(lower, bulkhead.ReasonDisplaced)
	}
	w.line = b.line
	timer := b.timer.C
	b.mu.Unlock()

	done := ctx.Done()
	for {
		if !watch && done == nil {
			<-w.ready // nothing else to listen to: cheaper than a select
		} else {
			var fired <-chan time.Time
			if watch {
				fired = timer
			}
			select {
			case <-w.ready:
			case <-done:
				switch b.leave(w) {
				case granted: // the permit was handed to us while we gave up: keep it
					return start, nil, nil
				case refused:
					return start, nil, b.reject(start, w.reason, true)
				}
				b.cancelled.Add(1)
				if b.hub.Active() {
					b.publish(bulkhead.EventCancelled, start, ctx.Err())
				}
				return start, nil, ctx.Err()
			case <-fired:
				b.expire()
				continue
			}
		}
		switch w.state.Load() {
		case granted:
			if !w.handed {
				// w was signalled once, when it was granted the permit, and
				// has taken that signal: its channel is empty and nobody
				// will touch it again. (A waiter handed the timer may have
				// been signalled twice.)
				return start, w, nil
			}
			return start, nil, nil
		case refused:
			return start, nil, b.reject(start, w.reason, true)
		}
		watch = true // the last watcher left the line and handed the timer to w
	}
}

// queueLocked puts w at the end of the line, arms the timer if w's deadline
// is the earliest, and reports whether w watches the timer. A few waiters
// do, so that the others wait on their own channel only: the first of a
// line, and a newcomer while the only watcher is next in line (so that the
// watchers seldom all leave while others wait; when they do, the newest
// waiter is woken to take over). b.mu must be held.
func (b *Bulkhead) queueLocked(w *waiter) (watch bool) {
	first := b.waiting.Load() == 0
	l := &b.lanes[w.lane]
	if l.tail != nil && w.deadline < l.tail.deadline {
		l.unsorted = true // Reconfigure shortened MaxWaitDuration
	}
	if b.watchers == 0 || b.watchers == 1 && b.firstLocked().watch {
		w.watch = true
		b.watchers++
	}
	l.pushBack(w)
	b.waiting.Add(1)
	switch {
	case first:
		b.line++
		// A new line gets a new timer rather than a Reset (or a Stop) of
		// the last line's: nobody listens to the old one any more, and a
		// timer made inside a testing/synctest bubble must not be touched
		// from another (a bulkhead shared by several tests), which would be
		// a fatal error. It costs one allocation per line, not per waiter.
		b.armed = w.deadline
		b.timer = time.NewTimer(time.Duration(w.deadline - now()))
	case w.deadline < b.armed:
		b.armLocked(w.deadline, now())
	}
	return w.watch
}

// armLocked arms the line's timer for deadline. b.mu must be held.
func (b *Bulkhead) armLocked(deadline, t int64) {
	b.armed = deadline
	b.timer.Reset(time.Duration(deadline - t))
}

// expire rejects every waiter whose deadline has passed, and arms the timer
// for the earliest deadline left; with Aging, it grants the waiters Aging
// has raised to a ceiling that admits them, and arms the timer for the next
// raise (ageLocked). A watcher runs it when the timer fires.
func (b *Bulkhead) expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := now()
	next := int64(0)
	for i := range b.lanes {
		l := &b.lanes[i]
		for w := l.head; w != nil; {
			nw := w.next
			if w.deadline <= t {
				r := bulkhead.ReasonTimeout
				if w.byDeadline {
					r = bulkhead.ReasonDeadline
				}
				b.refuseLocked(w, r)
			} else {
				if next == 0 || w.deadline < next {
					next = w.deadline
				}
				if !l.unsorted {
					break
				}
			}
			w = nw
		}
	}
	if b.waiting.Load() == 0 {
		return
	}
	b.armLocked(next, t)
	if b.set.Load().aging > 0 {
		b.grantAllLocked()
	}
}

// leave takes w out of the line if it still waits, and returns the state
// it found: waiting, or granted or refused if that came first.
func (b *Bulkhead) leave(w *waiter) uint32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := w.state.Load()
	if st == waiting {
		b.unlinkLocked(w)
	}
	return st
}

// unlinkLocked takes w out of the line. If w was the last to watch the
// timer, the newest waiter takes over. Once nobody waits, the fast path
// admits calls again. b.mu must be held.
func (b *Bulkhead) unlinkLocked(w *waiter) {
	b.lanes[w.lane].remove(w)
	if w.watch {
		b.watchers--
	}
	if b.waiting.Add(-1) == 0 { // written only under b.mu
		b.clearWaitFlag()
		return
	}
	if b.watchers == 0 {
		t := b.newestLocked()
		t.watch, t.handed = true, true
		b.watchers++
		t.signal()
	}
}

// firstLocked returns the head of the highest lane, newestLocked the tail
// of the lowest, and oldestLowLocked the head of the lowest; b.mu must be
// held and the line not empty.
func (b *Bulkhead) firstLocked() *waiter {
	for i := nLanes - 1; ; i-- {
		if w := b.lanes[i].head; w != nil {
			return w
		}
	}
}

func (b *Bulkhead) newestLocked() *waiter { return b.lanes[b.lowLocked()].tail }

func (b *Bulkhead) oldestLowLocked() *waiter { return b.lanes[b.lowLocked()].head }

// lowerLocked returns the newest waiter of the lowest priority below lane's
// at time t (the priorities raised by Aging), or nil if none waits. b.mu
// must be held.
func (b *Bulkhead) lowerLocked(st *settings, lane int, t int64) *waiter {
	var low *waiter
	class := lane
	for i := range lane {
		// The tail is the newest of its lane, and so the least raised.
		if w := b.lanes[i].tail; w != nil {
			if c := st.class(w, t); c < class || c == class && low != nil && w.joined > low.joined {
				low, class = w, c
			}
		}
	}
	return low
}

func (b *Bulkhead) lowLocked() int {
	i := 0
	for b.lanes[i].head == nil {
		i++
	}
	return i
}

// grantAllLocked grants every permit the line may have; b.mu must be held.
func (b *Bulkhead) grantAllLocked() {
	for w := b.grantLocked(); w != nil; w = b.grantLocked() {
		w.signal()
	}
}

// refuseLocked takes w out of the line, refused for reason r, and wakes
// it. b.mu must be held.
func (b *Bulkhead) refuseLocked(w *waiter, r bulkhead.Reason) {
	b.unlinkLocked(w)
	w.reason = r
	w.state.Store(refused)
	w.signal()
}

// grantLocked hands a permit to the next waiter in line (the oldest of the
// highest priority waiting, unless the Config orders the line otherwise) if
// the limit (its priority's ceiling) allows, and returns that waiter, for
// the caller to signal, or nil. b.mu must be held.
func (b *Bulkhead) grantLocked() *waiter {
	st := b.set.Load()
	var t int64 // read once, and only for the rules that need the time
	if st.lined && (b.shed.Clocked() || st.cfg.MinDeadlineSlack > 0) {
		t = now()
	}
	if (st.aging > 0 || st.timeOuts) && t == 0 {
		t = now()
	}
	for {
		s := b.state.Load()
		if b.waiting.Load() == 0 {
			return nil
		}
		lane, class, limit := laneCritical, laneCritical, int(s>>limitShift&fieldMask)
		if st.prio {
			lane, class = b.topLocked(st, t)
			limit = st.ceil[class]
		} else if st.slow {
			limit = st.ceil[lane]
		}
		if int(s&fieldMask) >= limit {
			if st.aging > 0 && class < nLanes-1 {
				b.ageLocked(st, s, t) // held back by its ceiling: wake when Aging raises it
			}
			return nil
		}
		w := b.lanes[lane].head
		if st.lined {
			if w = b.pickLocked(st, lane, class, t); w == nil {
				continue // it refused the waiter it looked at; look again
			}
		}
		n := s + 1
		if b.waiting.Load() == 1 {
			n &^= waitFlag // the last waiter leaves the line
		}
		if b.state.CompareAndSwap(s, n) {
			if st.timeOuts && t-w.joined > int64(st.shadowWait) {
				b.wouldTimeOut.Add(1) // the shadow's wait would have ended first
			}
			b.unlinkLocked(w)
			w.state.Store(granted)
			return w
		}
	}
}

// ageLocked arms the line's timer for the next time Aging raises the head
// of a lane, unless it is armed sooner, while the line is held back by
// its ceilings (s, the state word at time t, has permits free): so that a
// raise that admits a waiter is acted on when it happens, not at the next
// release or arrival. The watcher the timer wakes grants (see expire).
// A waiter that leaves needs no new arming: the next head of its lane
// joined later, so each of its raises comes after the leaver's. b.mu must
// be held and the line not empty.
func (b *Bulkhead) ageLocked(st *settings, s uint64, t int64) {
	if int(s&fieldMask) >= st.cfg.MaxConcurrentCalls {
		return // every permit is held: the next release grants
	}
	next := int64(0)
	for i := range b.lanes {
		if h := b.lanes[i].head; h != nil {
			if c := st.class(h, t); c < nLanes-1 {
				at := h.joined + int64(c-i+1)*st.aging // after t, unless it overflows
				if at > t && (next == 0 || at < next) {
					next = at
				}
			}
		}
	}
	if next != 0 && next < b.armed {
		b.armLocked(next, t)
	}
}

// pickLocked returns the waiter of lane the line serves next by the
// settings' rules, or refuses it (CoDel, a deadline too near) and returns
// nil. class is the priority of the lane's head: if Aging raised it above
// the lane's, the head, the highest waiting, goes first (LIFO orders the
// waiters of one priority). With Priorities, CoDel sheds the lowest
// priority first: a stale waiter of a lower one in the place of the one it
// would shed, which is then served. t is the time if CoDel,
// MinDeadlineSlack or Aging is set. b.mu must be held and the lane not
// empty.
func (b *Bulkhead) pickLocked(st *settings, lane, class int, t int64) *waiter {
	head := b.lanes[lane].head
	w := head
	if class == lane && b.shed.LIFO(int(b.waiting.Load())) {
		w = b.lanes[lane].tail
	}
	if b.shed.Clocked() {
		shed := b.shed.Serve(t, t-w.joined, t-head.joined)
		b.overloaded.Store(b.shed.Overloaded())
		if shed {
			if v := b.staleLocked(st, w, t); v != nil {
				b.refuseLocked(v, bulkhead.ReasonCoDel)
			} else {
				b.refuseLocked(w, bulkhead.ReasonCoDel)
				return nil
			}
		}
	}
	if w.byDeadline && w.deadline <= t {
		b.refuseLocked(w, bulkhead.ReasonDeadline) // its timer is due: never a permit it cannot use
		return nil
	}
	return w
}

// staleLocked returns, with Priorities, the oldest waiter of the lowest
// priority below w's that CoDel would shed at time t, or nil. b.mu must be
// held.
func (b *Bulkhead) staleLocked(st *settings, w *waiter, t int64) *waiter {
	if !st.prio {
		return nil
	}
	var v *waiter
	class := st.class(w, t)
	low := class
	for i := range class {
		// The head is the oldest of its lane, and so the most raised.
		if h := b.lanes[i].head; h != nil && b.shed.Stale(t-h.joined) {
			if c := st.class(h, t); c < low || c == low && v != nil && h.joined < v.joined {
				v, low = h, c
			}
		}
	}
	return v
}

// clearWaitFlag lets the fast path admit calls again once nobody waits.
// b.mu must be held and the waiter list empty.
func (b *Bulkhead) clearWaitFlag() {
	for i := range b.lanes {
		b.lanes[i].unsorted = false
	}
	b.shed.Empty()
	if b.overloaded.Load() {
		b.overloaded.Store(false)
	}
	b.free, b.nfree = nil, 0 // a waiter made in this line must not serve another (it may be a synctest bubble's)
	for {
		s := b.state.Load()
		if s&waitFlag == 0 || b.state.CompareAndSwap(s, s&^waitFlag) {
			return
		}
	}
}

// finish releases a permit, counts the call finished (and failed), and
// publishes EventFinished. start is when the call began running, or zero.
func (b *Bulkhead) finish(start time.Time, err error, failed bool) {
	b.releasePermit()
	if failed {
		b.failed.Add(1)
	}
	if b.hub.Active() {
		b.publishFinished(start, err)
	}
}

//go:noinline
func (b *Bulkhead) publishFinished(start time.Time, err error) {
	e := bulkhead.Event{Name: b.name, Kind: bulkhead.Semaphore, Type: bulkhead.EventFinished,
		Time: clock.Now(), Err: err}
	if !start.IsZero() {
		e.Run = e.Time.Sub(start)
	}
	b.hub.Publish(e)
}

// releasePermit gives a permit back and counts the call finished, in one
// compare-and-swap.
func (b *Bulkhead) releasePermit() {
	for {
		s := b.state.Load()
		if s&fieldMask == 0 {
			// Checked before the subtraction, so that a wrong Release
			// leaves the state as it was, even when several race.
			panic("semaphore: Release called without a held permit")
		}
		if b.state.CompareAndSwap(s, s-1+oneFinished) {
			b.released(s, nil)
			return
		}
	}
}

// released does what is left to do after a release changed the state word
// from s: carry a wrap of the finished count, and hand the permit to a
// waiter. spare is a waiter the line may reuse, or nil.
func (b *Bulkhead) released(s uint64, spare *waiter) {
	if s>>finShift == fieldMask {
		b.finishedHigh.Add(1) // the low bits wrapped to zero
	}
	if s&waitFlag != 0 {
		b.grantWaiters(spare)
	}
}

// grantWaiters hands free permits to the oldest waiters. No newcomer can
// take one first, since the fast path refuses while anyone waits. spare is
// a waiter the line may reuse, or nil.
//
//go:noinline
func (b *Bulkhead) grantWaiters(spare *waiter) {
	b.mu.Lock()
	if spare != nil {
		b.spareLocked(spare)
	}
	first := b.grantLocked()
	for w := b.grantLocked(); w != nil; w = b.grantLocked() {
		w.signal() // rare: more permits came free meanwhile
	}
	b.mu.Unlock()
	if first != nil {
		// Signalled out of the critical section, to keep it short (at
		// GOMAXPROCS > 1 the waiters joining the line wait for b.mu). The
		// waiter takes its permit on this signal, unless its context ended
		// or it was handed the timer and it saw the grant first; then it
		// does not reuse its waiter, and the signal is lost on it.
		first.signal()
	}
}

// spareLocked keeps w, the waiter of a call that came through the line and
// is finishing, for the next caller to join the line, so that a long line
// makes no garbage. It keeps w only while the line w came from lasts (a
// waiter's channel may belong to a testing/synctest bubble, like the
// line's timer, and a line serves one bubble: see the package
// documentation), and no more waiters than the limit, the most that leave
// the line between two callers that join it in a steady line. b.mu must
// be held.
func (b *Bulkhead) spareLocked(w *waiter) {
	if w.line != b.line || b.waiting.Load() == 0 || b.nfree >= b.set.Load().cfg.MaxConcurrentCalls {
		return
	}
	w.next = b.free
	b.free = w
	b.nfree++
}

// permitted publishes EventPermitted for a permit just taken (start is when
// the wait began, or zero) and returns the event's time, which is when the
// call starts to run. If a subscriber panics or calls runtime.Goexit, it
// gives the permit back (the call is finished, not failed: it never ran)
// before the panic goes on, so that the caller, who never got the permit,
// cannot strand it.
//
//go:noinline
func (b *Bulkhead) permitted(start time.Time) time.Time {
	ok := false
	defer func() {
		if !ok {
			b.finish(time.Time{}, nil, false)
		}
	}()
	t := b.publish(bulkhead.EventPermitted, start, nil)
	ok = true
	return t
}

// reject counts a rejection for reason r and returns the prebuilt error
// for it.
//
//go:noinline
func (b *Bulkhead) reject(start time.Time, r bulkhead.Reason, waited bool) error {
	b.rejected[r].Add(1)
	err := b.settings().err(r, waited)
	if b.hub.Active() {
		b.publish(bulkhead.EventRejected, start, err)
	}
	return err
}

// publish publishes an event of type t for a call that began waiting at
// start (zero if it did not wait) and returns the event's time.
//
//go:noinline
func (b *Bulkhead) publish(t bulkhead.EventType, start time.Time, err error) time.Time {
	e := bulkhead.Event{Name: b.name, Kind: bulkhead.Semaphore, Type: t, Time: clock.Now(), Err: err}
	if !start.IsZero() {
		e.Wait = e.Time.Sub(start)
	}
	b.hub.Publish(e)
	return e.Time
}
