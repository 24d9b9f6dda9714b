package adaptive

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// Controller moves a bulkhead's limit between a minimum and a maximum from
// what it observes of finished calls. Create one with [Attach] (or [New] for
// a limiter of your own). It starts no goroutine: it aggregates calls as they
// finish, without a lock or an allocation, and the call that closes a window
// runs the algorithm and, if the whole-number limit changed, Reconfigure.
// It owns the limit: a limit set by someone else is replaced at the
// controller's next change. A Controller is safe for concurrent use.
type Controller struct {
	cfg    Config
	alg    Algorithm
	set    func(int) error
	cancel func()
	// From Attach (nil from New): detached, read by set under the
	// bulkhead's lock; fence, which passes once through that lock; and
	// inFlightOf, the bulkhead's exact count of calls running.
	detached   *atomic.Bool
	fence      func()
	inFlightOf func() int

	// The open window, updated lock-free by Observe. Times are nanoseconds
	// since epoch by the monotonic clock (Time.Sub), which a step of the
	// wall clock does not move.
	epoch       time.Time
	end         atomic.Int64  // when the window may close; math.MinInt64 before the first event
	runs        [2]tally      // the successes: the open window's is runs[cur&1]
	cur         atomic.Uint32 // flipped by decide
	drops       atomic.Int64
	timeouts    atomic.Int64
	rejected    atomic.Int64
	inFlight    atomic.Int64
	maxInFlight atomic.Int64

	mu    sync.Mutex // held by whoever closes a window
	start int64      // when the open window began
	limit float64
	state State
	snap  atomic.Pointer[State] // a copy of state for State, which must not wait for mu
}

// State is a controller's state, for a status page. Durations are in
// nanoseconds in JSON.
type State struct {
	// Algorithm is the algorithm's name ("custom" for Config.Custom).
	Algorithm string `json:"algorithm"`
	// Limit is the limit the controller last set (a shadow controller: last
	// chose, without setting it); MinLimit and MaxLimit bound it.
	Limit    int `json:"limit"`
	MinLimit int `json:"minLimit"`
	MaxLimit int `json:"maxLimit"`
	// NoLoadLatency is the algorithm's estimate of the dependency's latency
	// without queueing (0 if it keeps none), and Latency the mean run time
	// of the successful calls in the last window.
	NoLoadLatency time.Duration `json:"noLoadLatency"`
	Latency       time.Duration `json:"latency"`
	// Decision is "increase", "decrease" or "hold", Reason why, and
	// DecidedAt when; all three are empty before the first window closes.
	Decision  string    `json:"decision"`
	Reason    string    `json:"reason"`
	DecidedAt time.Time `json:"decidedAt"`
	// Windows counts the windows decided, and Changes the times the limit
	// was set (a shadow controller: changed).
	Windows uint64 `json:"windows"`
	Changes uint64 `json:"changes"`
	// Shadow is true for a controller that only computes the limit
	// ([Config].Shadow).
	Shadow bool `json:"shadow,omitempty"`
	// Error is the last error from setting the limit (a closed pool), or
	// empty.
	Error string `json:"error,omitempty"`
}

// Attach starts a controller that watches b's finished calls through
// Subscribe and sets its limit (MaxConcurrentCalls of a *semaphore.Bulkhead,
// MaxWorkers of a *pool.Bulkhead) through Reconfigure. It sets the initial
// limit at once if that differs from b's. Detach stops it. With
// [Config].Shadow it never sets the limit, and only publishes it in State.
//
// Calls made with Acquire and Release report no run time and are not counted;
// a semaphore Permit released with its error is.
func Attach(b bulkhead.Instance, cfg Config) (*Controller, error) {
	detached := new(atomic.Bool)
	var set func(int) error
	var fence func()
	var subscribe func(func(bulkhead.Event)) func()
	switch b := b.(type) {
	case *semaphore.Bulkhead:
		if b.Config().Shadow != nil {
			// the limit would move below the shadow's, which Validate refuses
			return nil, fmt.Errorf("adaptive: bulkhead %q has a Shadow: try an adaptive limit with Config.Shadow instead", b.Name())
		}
		set = func(n int) error {
			return setIf(b.ReconfigureFunc, detached, func(c *semaphore.Config) { c.MaxConcurrentCalls = n })
		}
		fence = func() { _ = b.ReconfigureFunc(func(c semaphore.Config) (semaphore.Config, bool) { return c, false }) }
		subscribe = b.Subscribe
	case *pool.Bulkhead:
		set = func(n int) error {
			return setIf(b.ReconfigureFunc, detached, func(c *pool.Config) { c.MaxWorkers = n })
		}
		fence = func() { _ = b.ReconfigureFunc(func(c pool.Config) (pool.Config, bool) { return c, false }) }
		subscribe = b.Subscribe
	default:
		return nil, fmt.Errorf("adaptive: Attach needs a *semaphore.Bulkhead or a *pool.Bulkhead, got %T", b)
	}
	s := b.Stats()
	c, err := newController(cfg, s.MaxConcurrentCalls, set)
	if err != nil {
		return nil, fmt.Errorf("adaptive: bulkhead %q: %w", s.Name, err)
	}
	c.detached, c.fence = detached, fence
	c.inFlightOf = func() int { return b.Stats().InFlight }
	// The events count the calls that begin from now on, and the ends of
	// all; Stats, read after subscribing, adds those running that began
	// before. A call that begins or ends between the two reads is
	// miscounted until the next window closes, which reads Stats again.
	c.cancel = subscribe(c.Observe)
	in := b.Stats().InFlight
	c.inFlight.Add(int64(in) - c.inFlight.Load())
	return c, nil
}

// errDetached is set's answer when Detach came first; nothing changed.
var errDetached = errors.New("adaptive: detached")

// setIf sets the limit with reconfigure (a bulkhead's ReconfigureFunc),
// under the bulkhead's lock, unless detached is set by then.
func setIf[C any](reconfigure func(func(C) (C, bool)) error, detached *atomic.Bool, limit func(*C)) error {
	applied := false
	err := reconfigure(func(c C) (C, bool) {
		if detached.Load() {
			return c, false
		}
		limit(&c)
		applied = true
		return c, true
	})
	if err == nil && !applied {
		return errDetached
	}
	return err
}

// New returns a controller for a limiter of your own, whose limit is now
// current: feed it every event of the limiter with Observe, and it calls set
// with each new whole-number limit (from within Observe). It calls set at
// once if cfg.InitialLimit, or current brought within the bounds, differs from
// current. With [Config].Shadow it never calls set.
func New(cfg Config, current int, set func(limit int) error) (*Controller, error) {
	if set == nil {
		panic("adaptive: New called with a nil set function")
	}
	c, err := newController(cfg, current, set)
	if err != nil {
		return nil, fmt.Errorf("adaptive: %w", err)
	}
	return c, nil
}

func newController(cfg Config, current int, set func(limit int) error) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := cfg.withDefaults()
	c := &Controller{cfg: d, alg: d.algorithm(), set: set, epoch: time.Now()}
	c.end.Store(math.MinInt64)
	name := d.Algorithm
	if cfg.Custom != nil {
		name = "custom"
	}
	initial := d.InitialLimit
	if initial == 0 {
		initial = min(max(current, d.MinLimit), d.MaxLimit)
	}
	c.limit = float64(initial)
	c.state = State{Algorithm: name, Limit: current, MinLimit: d.MinLimit, MaxLimit: d.MaxLimit, Shadow: d.Shadow}
	if initial != current {
		if !d.Shadow {
			if err := set(initial); err != nil {
				return nil, fmt.Errorf("setting the initial limit %d: %w", initial, err)
			}
		}
		c.state.Limit = initial
		c.state.Changes++
	}
	c.publish()
	return c, nil
}

// Detach stops the controller watching its bulkhead; the limit stays where
// it is. Once it returns, no decision of the controller changes the limit.
// Calling it again, or on a controller made with New, does nothing.
func (c *Controller) Detach() {
	if c.cancel == nil {
		return
	}
	c.detached.Store(true)
	c.cancel()
	// A decision sets the limit under the bulkhead's lock, and only if
	// detached is not set by then: once past that lock, every decision has
	// landed or will find it set. (The bulkhead's subscribers run after its
	// unlock, so one of them may be calling Detach.)
	c.fence()
}

// State returns the controller's state. It does not block: a subscriber may
// call it while the controller is setting the limit.
func (c *Controller) State() State { return *c.snap.Load() }

// Observe takes one event of the bulkhead; Attach subscribes it. Only
// EventPermitted, EventRejected and EventFinished count; Observe ignores the
// rest.
func (c *Controller) Observe(e bulkhead.Event) {
	switch e.Type {
	case bulkhead.EventPermitted:
		n := c.inFlight.Add(1)
		for m := c.maxInFlight.Load(); n > m && !c.maxInFlight.CompareAndSwap(m, n); m = c.maxInFlight.Load() {
		}
		return
	case bulkhead.EventRejected:
		c.rejected.Add(1)
		return
	case bulkhead.EventFinished:
	default:
		return
	}
	c.inFlight.Add(-1)
	switch {
	case e.Err == nil:
		if e.Run <= 0 {
			return
		}
		c.succeeded(int64(e.Run))
	case errors.Is(e.Err, bulkhead.ErrOverloaded):
		c.drops.Add(1)
	case errors.Is(e.Err, context.DeadlineExceeded):
		c.timeouts.Add(1)
	default:
		return
	}
	if t := int64(e.Time.Sub(c.epoch)); t >= c.end.Load() && c.runs[c.cur.Load()&1].n.Load()+c.drops.Load()+c.timeouts.Load() >= int64(c.cfg.MinSamples) {
		c.decide(t, e.Time)
	}
}

// tally is a window's successes and their summed run time, which decide
// must read together: writers counts the Observes adding to it.
type tally struct{ n, sum, writers atomic.Int64 }

// succeeded adds a success that ran run nanoseconds to the open window's
// tally, lock-free.
func (c *Controller) succeeded(run int64) {
	for {
		t := &c.runs[c.cur.Load()&1]
		t.writers.Add(1)
		if t == &c.runs[c.cur.Load()&1] { // still the open window's: decide waits for this
			t.n.Add(1)
			t.sum.Add(run)
			t.writers.Add(-1)
			return
		}
		t.writers.Add(-1) // decide closed it meanwhile: add to the next
	}
}

// closeRuns opens a new tally and returns the closed one's successes and
// summed run time, both of the same calls: it waits for the Observes still
// adding to it. c.mu must be held.
func (c *Controller) closeRuns() (n, sum int64) {
	t := &c.runs[c.cur.Add(1)&1^1]
	for t.writers.Load() != 0 {
		runtime.Gosched()
	}
	return t.n.Swap(0), t.sum.Swap(0)
}

// decide closes the window at t, if nobody else is, runs the algorithm and
// sets the limit if its whole number changed.
//
//go:noinline
func (c *Controller) decide(t int64, now time.Time) {
	if !c.mu.TryLock() {
		return
	}
	defer c.mu.Unlock()
	end := c.end.Load()
	if t < end {
		return // another goroutine closed it first
	}
	n, sum := c.closeRuns()
	drops, timeouts, rejected := c.drops.Swap(0), c.timeouts.Swap(0), c.rejected.Swap(0)
	peak := c.maxInFlight.Swap(c.resetInFlight())
	start := c.start
	c.start = t
	if end == math.MinInt64 {
		// The first window began before the controller knew the time; it
		// only starts the clock.
		c.end.Store(t + int64(c.cfg.Window))
		return
	}
	w := Window{End: now, Duration: time.Duration(t - start), Limit: c.state.Limit,
		Successes: int(n), Drops: int(drops),
		Timeouts: int(timeouts), Rejected: int(rejected), MaxInFlight: int(peak)}
	if n > 0 {
		w.MeanRun = time.Duration(sum / n)
	}
	d := c.alg.Update(c.limit, w)
	next := min(max(d.Limit, float64(c.cfg.MinLimit)), float64(c.cfg.MaxLimit))
	if next != next { // NaN from a custom algorithm
		next = c.limit
	}
	s := &c.state
	switch {
	case int(next) > s.Limit:
		s.Decision = "increase"
	case int(next) < s.Limit:
		s.Decision = "decrease"
	default:
		s.Decision = "hold"
	}
	s.Reason, s.DecidedAt, s.NoLoadLatency = d.Reason, now, d.NoLoad
	if n > 0 {
		s.Latency = w.MeanRun
	}
	s.Windows++
	c.limit = next
	switch {
	case int(next) == s.Limit:
	case c.cfg.Shadow: // computed, published, not applied
		s.Limit = int(next)
		s.Changes++
	default:
		if err := c.set(int(next)); errors.Is(err, errDetached) {
			return // Detach returned, or is returning
		} else if err != nil {
			s.Error = err.Error()
		} else {
			s.Limit = int(next)
			s.Changes++
			s.Error = ""
		}
	}
	c.publish()
	// A window lasts at least two mean run times, so that most of its calls
	// began under the limit it judges.
	c.end.Store(t + max(int64(c.cfg.Window), 2*int64(w.MeanRun)))
}

// resetInFlight corrects the count of calls running at a window's close,
// and returns it: to the bulkhead's own count after Attach, so that a call
// miscounted while Attach subscribed costs one window at most, and to 0 if
// it is below (New's limiter was running calls when it began). c.mu must
// be held.
func (c *Controller) resetInFlight() int64 {
	if c.inFlightOf != nil {
		n := int64(c.inFlightOf())
		c.inFlight.Store(n)
		return n
	}
	for n := c.inFlight.Load(); n < 0; n = c.inFlight.Load() {
		if c.inFlight.CompareAndSwap(n, 0) {
			return 0
		}
	}
	return c.inFlight.Load()
}

// publish makes the state visible to State. c.mu must be held (or c not yet
// shared).
func (c *Controller) publish() {
	s := c.state
	c.snap.Store(&s)
}
