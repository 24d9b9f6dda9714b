package adaptive_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/adaptive"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// ants starts two goroutines for its default pool when imported.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

func TestConfigValidate(t *testing.T) {
	if err := adaptive.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	if err := (adaptive.Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	for _, tc := range []struct {
		edit func(*adaptive.Config)
		want string
	}{
		{func(c *adaptive.Config) { c.Algorithm = "bbr" }, `algorithm must be vegas, gradient2 or aimd, got "bbr"`},
		{func(c *adaptive.Config) { c.MinLimit = -1 }, "minLimit must be between 1 and 1048576 (or 0 for 1), got -1"},
		{func(c *adaptive.Config) { c.MaxLimit = 1 << 21 }, "maxLimit must be between 1 and 1048576 (or 0 for 200), got 2097152"},
		{func(c *adaptive.Config) { c.MinLimit, c.MaxLimit = 10, 5 }, "minLimit (10) must be <= maxLimit (5)"},
		{func(c *adaptive.Config) { c.InitialLimit = 500 }, "initialLimit must be between minLimit (1) and maxLimit (200), got 500"},
		{func(c *adaptive.Config) { c.Window = -time.Second }, "window must be between 0 and 24h0m0s, got -1s"},
		{func(c *adaptive.Config) { c.Window = 106751 * 24 * time.Hour }, "window must be between 0 and 24h0m0s, got 2562024h0m0s"},
		{func(c *adaptive.Config) { c.Vegas.Alpha = math.NaN() }, "vegas.alpha must be a finite number, got NaN"},
		{func(c *adaptive.Config) { c.Vegas.Beta = math.Inf(1) }, "vegas.beta must be a finite number, got +Inf"},
		{func(c *adaptive.Config) { c.Vegas.Backoff = math.NaN() }, "vegas.backoff must be a finite number, got NaN"},
		{func(c *adaptive.Config) { c.Gradient2.Smoothing = math.NaN() }, "gradient2.smoothing must be a finite number, got NaN"},
		{func(c *adaptive.Config) { c.Gradient2.Headroom = math.Inf(1) }, "gradient2.headroom must be a finite number, got +Inf"},
		{func(c *adaptive.Config) { c.Gradient2.Tolerance = math.Inf(1) }, "gradient2.tolerance must be a finite number, got +Inf"},
		{func(c *adaptive.Config) { c.Gradient2.Backoff = math.NaN() }, "gradient2.backoff must be a finite number, got NaN"},
		{func(c *adaptive.Config) { c.AIMD.Increase = math.Inf(1) }, "aimd.increase must be a finite number, got +Inf"},
		{func(c *adaptive.Config) { c.AIMD.Backoff = math.Inf(-1) }, "aimd.backoff must be a finite number, got -Inf"},
		{func(c *adaptive.Config) { c.MinSamples = -3 }, "minSamples must be >= 0, got -3"},
		{func(c *adaptive.Config) { c.Vegas.Backoff = 0.2 }, "vegas.backoff must be >= 0.5 and < 1, got 0.2"},
		{func(c *adaptive.Config) { c.AIMD.Backoff = 1 }, "aimd.backoff must be >= 0.5 and < 1, got 1"},
		{func(c *adaptive.Config) { c.Vegas.Alpha, c.Vegas.Beta = 6, 3 }, "vegas.beta (3) must be >= vegas.alpha (6)"},
		{func(c *adaptive.Config) { c.Vegas.NoLoadWindow = -1 }, "vegas.noLoadWindow must be >= 0, got -1ns"},
		{func(c *adaptive.Config) { c.Gradient2.Smoothing = 1.5 }, "gradient2.smoothing must be between 0 and 1, got 1.5"},
		{func(c *adaptive.Config) { c.Gradient2.Tolerance = 0.5 }, "gradient2.tolerance must be >= 1, got 0.5"},
		{func(c *adaptive.Config) { c.Gradient2.LongWindow = -2 }, "gradient2.longWindow must be >= 0, got -2"},
		{func(c *adaptive.Config) { c.AIMD.Increase = -1 }, "aimd.increase must be >= 0, got -1"},
		{func(c *adaptive.Config) { c.AIMD.SlowCall = -time.Millisecond }, "aimd.slowCall must be >= 0, got -1ms"},
	} {
		c := adaptive.DefaultConfig()
		tc.edit(&c)
		err := c.Validate()
		if err == nil || err.Error() != tc.want {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
		if _, err := adaptive.New(c, 10, func(int) error { return nil }); err == nil || err.Error() != "adaptive: "+tc.want {
			t.Errorf("New: %v, want %q", err, tc.want)
		}
	}
}

func TestAttachRejectsOtherInstances(t *testing.T) {
	_, err := adaptive.Attach(fakeInstance{}, adaptive.DefaultConfig())
	if err == nil || !strings.Contains(err.Error(), "needs a *semaphore.Bulkhead or a *pool.Bulkhead, got adaptive_test.fakeInstance") {
		t.Fatalf("Attach(fake) = %v", err)
	}
	b, _ := semaphore.New("payment", semaphore.DefaultConfig())
	_, err = adaptive.Attach(b, adaptive.Config{MinLimit: 300, MaxLimit: 250})
	if want := `adaptive: bulkhead "payment": minLimit (300) must be <= maxLimit (250)`; err == nil || err.Error() != want {
		t.Fatalf("Attach(bad config) = %v, want %q", err, want)
	}
	shadowed, err := semaphore.New("shadowed", semaphore.Config{MaxConcurrentCalls: 8, Shadow: &semaphore.Shadow{MaxConcurrentCalls: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adaptive.Attach(shadowed, adaptive.DefaultConfig()); err == nil || !strings.Contains(err.Error(), `bulkhead "shadowed" has a Shadow`) {
		t.Fatalf("Attach(a shadowed semaphore) = %v", err)
	}
}

type fakeInstance struct{}

func (fakeInstance) Name() string          { return "fake" }
func (fakeInstance) Stats() bulkhead.Stats { return bulkhead.Stats{} }

// feeder drives a controller made with New by hand, on a virtual clock.
type feeder struct {
	c    *adaptive.Controller
	now  time.Time
	set  []int
	open int // calls in flight
}

func newFeeder(t *testing.T, cfg adaptive.Config, limit int) *feeder {
	f := &feeder{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c, err := adaptive.New(cfg, limit, func(n int) error { f.set = append(f.set, n); return nil })
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	return f
}

// window feeds one window of n calls, inFlight at once, each taking run and
// ending with err, and lets 100ms pass.
func (f *feeder) window(n, inFlight int, run time.Duration, err error) {
	for range n {
		for f.open < inFlight {
			f.c.Observe(bulkhead.Event{Type: bulkhead.EventPermitted, Time: f.now})
			f.open++
		}
		f.now = f.now.Add(100 * time.Millisecond / time.Duration(n))
		f.c.Observe(bulkhead.Event{Type: bulkhead.EventFinished, Time: f.now, Run: run, Err: err})
		f.open--
	}
}

func TestLimitSetOnlyWhenWholeNumberChanges(t *testing.T) {
	cfg := adaptive.Config{Algorithm: "gradient2", Gradient2: adaptive.Gradient2{Smoothing: 0.05}}
	f := newFeeder(t, cfg, 10)
	for range 50 {
		f.window(50, 10, 10*time.Millisecond, nil)
	}
	s := f.c.State()
	if len(f.set) == 0 || uint64(len(f.set)) != s.Changes || len(f.set) >= int(s.Windows) {
		t.Fatalf("%d windows, %d changes, set called %d times (%v): want fewer calls than windows",
			s.Windows, s.Changes, len(f.set), f.set)
	}
	prev := 10
	for _, n := range f.set {
		if n == prev {
			t.Fatalf("set called with the unchanged limit %d: %v", n, f.set)
		}
		prev = n
	}
	if s.Limit != prev || s.Decision == "" || s.Reason == "" {
		t.Fatalf("State = %+v, last set %d", s, prev)
	}
}

func TestDropsShrinkTheLimit(t *testing.T) {
	for _, alg := range []string{"vegas", "gradient2", "aimd"} {
		f := newFeeder(t, adaptive.Config{Algorithm: alg}, 20)
		f.window(40, 20, 10*time.Millisecond, nil) // starts the clock
		f.window(40, 20, 10*time.Millisecond, nil)
		before := f.c.State().Limit
		overloaded := fmt.Errorf("GET /stock: 503: %w", bulkhead.ErrOverloaded)
		f.window(40, 20, time.Millisecond, overloaded)
		s := f.c.State()
		if s.Limit >= before || s.Reason != "drops" || s.Decision != "decrease" {
			t.Errorf("%s: after a window of 503s, limit %d (before %d), %s: %s", alg, s.Limit, before, s.Decision, s.Reason)
		}
		// A failure that is not a drop is not counted at all.
		for range 5 {
			f.window(40, 20, time.Millisecond, errors.New("bad request"))
		}
		if w := f.c.State().Windows; w != s.Windows {
			t.Errorf("%s: windows decided on ordinary failures: %d -> %d", alg, s.Windows, w)
		}
	}
}

func TestIdleLimitDoesNotGrow(t *testing.T) {
	for _, alg := range []string{"vegas", "gradient2", "aimd"} {
		f := newFeeder(t, adaptive.Config{Algorithm: alg}, 20)
		for range 20 {
			f.window(40, 3, 10*time.Millisecond, nil) // 3 in flight of 20
		}
		if s := f.c.State(); s.Limit != 20 || s.Reason != "limit not reached" {
			t.Errorf("%s: limit %d (%s), want 20 held: the limit was never reached", alg, s.Limit, s.Reason)
		}
	}
}

// TestVegasReprobesNoLoad checks that the no-load latency is not trusted for
// ever: once the dependency is durably slower, whatever the limit, the
// limit falls at first, then the no-load latency is probed again and the
// limit grows back.
func TestVegasReprobesNoLoad(t *testing.T) {
	cfg := adaptive.Config{Vegas: adaptive.Vegas{NoLoadWindow: 6 * time.Second}}
	f := newFeeder(t, cfg, 30)
	for range 20 {
		f.window(60, f.c.State().Limit, 10*time.Millisecond, nil)
	}
	s := f.c.State()
	if s.NoLoadLatency != 10*time.Millisecond || s.Limit < 30 {
		t.Fatalf("steady: no-load latency %v, limit %d; want 10ms, >= 30", s.NoLoadLatency, s.Limit)
	}
	high, low := s.Limit, s.Limit
	// Every call now takes twice as long, whatever the limit.
	for range 100 { // 10s
		f.window(60, f.c.State().Limit, 20*time.Millisecond, nil)
		low = min(low, f.c.State().Limit)
	}
	s = f.c.State()
	if low >= high || s.NoLoadLatency != 20*time.Millisecond || s.Limit < high {
		t.Fatalf("after 10s at 20ms: no-load %v, limit %d (low %d, before %d): want it lowered, then 20ms probed and the limit back",
			s.NoLoadLatency, s.Limit, low, high)
	}
}

// TestVegasProbesAnOverloadedStart checks that a controller started while
// the dependency is already queueing finds its no-load latency: the first
// windows' latency is not taken for it.
func TestVegasProbesAnOverloadedStart(t *testing.T) {
	f := newFeeder(t, adaptive.Config{}, 60)
	for range 50 {
		l := f.c.State().Limit
		// 10 slots of 10ms: above 10 calls, latency grows with the queue.
		f.window(100, l, time.Duration(max(1, float64(l)/10)*float64(10*time.Millisecond)), nil)
	}
	if s := f.c.State(); s.NoLoadLatency != 10*time.Millisecond || s.Limit < 10 || s.Limit > 20 {
		t.Fatalf("State %+v: want no-load 10ms and a limit of 10..20", s)
	}
}

// TestGradient2NoDrift checks the fix for Gradient2's drift: while latency
// grows with the limit (a queue at the dependency), the limit must not keep
// climbing as the long-term average catches up with the present.
func TestGradient2NoDrift(t *testing.T) {
	f := newFeeder(t, adaptive.Config{Algorithm: "gradient2"}, 10)
	for range 3000 { // 300s
		l := f.c.State().Limit
		// 10 slots of 10ms: above 10 calls, latency grows with the queue.
		f.window(100, l, time.Duration(max(1, float64(l)/10)*float64(10*time.Millisecond)), nil)
	}
	if l := f.c.State().Limit; l > 25 {
		t.Fatalf("limit drifted to %d over 300s for a dependency of 10 slots", l)
	}
}

func TestStateJSON(t *testing.T) {
	f := newFeeder(t, adaptive.DefaultConfig(), 10)
	for range 10 {
		f.window(40, 10, 5*time.Millisecond, nil)
	}
	b, err := json.Marshal(f.c.State())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"algorithm":"vegas"`, `"limit":`, `"noLoadLatency":5000000`, `"decision":"`, `"reason":"`, `"decidedAt":"2026-`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON %s lacks %s", b, key)
		}
	}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	f := newFeeder(t, adaptive.DefaultConfig(), 10)
	allocs := testing.AllocsPerRun(10000, func() { f.window(1, 1, 5*time.Millisecond, nil) })
	if allocs != 0 || f.c.State().Windows == 0 {
		t.Fatalf("%v allocations per call over %d windows", allocs, f.c.State().Windows)
	}
}

// dependency is a server with slots service slots: a call takes base while
// no more than slots run, and proportionally longer beyond (they share).
type dependency struct {
	slots    atomic.Int64
	inFlight atomic.Int64
	base     time.Duration
}

func (d *dependency) call(context.Context) error {
	n := d.inFlight.Add(1)
	defer d.inFlight.Add(-1)
	time.Sleep(time.Duration(float64(d.base) * max(1, float64(n)/float64(d.slots.Load()))))
	return nil
}

// load runs callers goroutines calling do until the virtual clock passes
// until; a rejected caller retries after a millisecond.
func load(callers int, until time.Time, do func() error) {
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for time.Now().Before(until) {
				if errors.Is(do(), bulkhead.ErrBulkheadFull) {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
}

func TestAttachSemaphore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := semaphore.New("dep", semaphore.Config{MaxConcurrentCalls: 60})
		c, err := adaptive.Attach(b, adaptive.Config{MinLimit: 2, MaxLimit: 100})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Detach()
		d := &dependency{base: 10 * time.Millisecond}
		d.slots.Store(10)
		do := func() error { return b.Do(context.Background(), d.call) }

		load(80, time.Now().Add(5*time.Second), do)
		s := c.State()
		t.Logf("10 slots: %+v", s)
		if s.Limit < 10 || s.Limit > 20 || b.Config().MaxConcurrentCalls != s.Limit {
			t.Fatalf("with 10 slots: limit %d, bulkhead %d; want 10..20", s.Limit, b.Config().MaxConcurrentCalls)
		}
		d.slots.Store(40)
		load(80, time.Now().Add(5*time.Second), do)
		s = c.State()
		t.Logf("40 slots: %+v", s)
		if s.Limit < 40 || s.Limit > 60 {
			t.Fatalf("with 40 slots: limit %d, want 40..60", s.Limit)
		}
		if st := b.Stats(); st.InFlight != 0 || st.Permitted != st.Finished {
			t.Fatalf("stats after the load: %+v", st)
		}
	})
}

func TestAttachPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := pool.New("dep", pool.Config{MaxWorkers: 60, QueueCapacity: 0})
		defer b.Close(context.Background())
		c, err := adaptive.Attach(b, adaptive.Config{MinLimit: 2, MaxLimit: 100})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Detach()
		d := &dependency{base: 10 * time.Millisecond}
		d.slots.Store(10)
		do := func() error {
			f, err := b.TryGo(context.Background(), d.call)
			if err != nil {
				return err
			}
			_, err = f.Wait(context.Background())
			return err
		}
		load(80, time.Now().Add(5*time.Second), do)
		s := c.State()
		t.Logf("10 slots: %+v", s)
		if s.Limit < 10 || s.Limit > 20 || b.Config().MaxWorkers != s.Limit {
			t.Fatalf("with 10 slots: limit %d, pool %d; want 10..20", s.Limit, b.Config().MaxWorkers)
		}
	})
}

// BenchmarkObserve measures the controller's own work per finished call
// (two events: permitted and finished), without the bulkhead's.
func BenchmarkObserve(b *testing.B) {
	c, err := adaptive.New(adaptive.Config{MinLimit: 100, MaxLimit: 100}, 100, func(int) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var clock atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			now := start.Add(time.Duration(clock.Add(int64(time.Microsecond))))
			c.Observe(bulkhead.Event{Type: bulkhead.EventPermitted, Time: now})
			c.Observe(bulkhead.Event{Type: bulkhead.EventFinished, Time: now, Run: time.Millisecond})
		}
	})
}

func TestAttachedDoDoesNotAllocate(t *testing.T) {
	b, _ := semaphore.New("dep", semaphore.Config{MaxConcurrentCalls: 10})
	c, err := adaptive.Attach(b, adaptive.Config{MinLimit: 10, MaxLimit: 10, Window: 100 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Detach()
	fn := func(context.Context) error { return nil }
	ctx := context.Background()
	// A decision allocates the copy of the State (TestObserveDoesNotAllocate
	// shows it amortised); the call itself must not allocate.
	if allocs := testing.AllocsPerRun(1000, func() { _ = b.Do(ctx, fn) }); allocs != 0 {
		t.Fatalf("%v allocations per Do with a controller attached", allocs)
	}
	t.Logf("%d windows decided", c.State().Windows)
}

func TestDetach(t *testing.T) {
	b, _ := semaphore.New("dep", semaphore.Config{MaxConcurrentCalls: 10})
	c, err := adaptive.Attach(b, adaptive.Config{MinSamples: 1, Window: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	c.Detach()
	c.Detach() // harmless
	for range 100 {
		_ = b.Do(context.Background(), func(context.Context) error { time.Sleep(10 * time.Microsecond); return nil })
	}
	if s := c.State(); s.Windows != 0 || b.Config().MaxConcurrentCalls != 10 {
		t.Fatalf("after Detach: %+v, limit %d", s, b.Config().MaxConcurrentCalls)
	}
}

func TestSetErrorIsReported(t *testing.T) {
	closed := errors.New("pool closed")
	f := &feeder{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c, err := adaptive.New(adaptive.Config{Algorithm: "aimd"}, 10, func(int) error { return closed })
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	for range 3 {
		f.window(40, 10, time.Millisecond, nil)
	}
	if s := c.State(); s.Error != "pool closed" || s.Limit != 10 || s.Changes != 0 || s.Decision != "increase" {
		t.Fatalf("State %+v: want the error, the limit unchanged", s)
	}
}

// TestConfigYAML decodes the block docs/adaptive.md plans for the registry.
func TestConfigYAML(t *testing.T) {
	const doc = `
algorithm: vegas
minLimit: 5
maxLimit: 200
window: 250ms
shadow: true
vegas:
  noLoadWindow: 30s
  backoff: 0.8
gradient2: {smoothing: 0.3, longWindow: 50}
aimd: {slowCall: 2s}
`
	var c adaptive.Config
	if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
		t.Fatal(err)
	}
	want := adaptive.Config{Algorithm: "vegas", MinLimit: 5, MaxLimit: 200, Window: 250 * time.Millisecond, Shadow: true,
		Vegas:     adaptive.Vegas{NoLoadWindow: 30 * time.Second, Backoff: 0.8},
		Gradient2: adaptive.Gradient2{Smoothing: 0.3, LongWindow: 50},
		AIMD:      adaptive.AIMD{SlowCall: 2 * time.Second}}
	if c != want {
		t.Fatalf("decoded %+v\nwant    %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// A zero field means DefaultConfig's value: for each algorithm, a Config
// with only the algorithm set decides exactly as DefaultConfig does, through
// steady windows, drops, slow calls and recovery.
func TestZeroFieldsMeanDefaults(t *testing.T) {
	for _, alg := range []string{"vegas", "gradient2", "aimd"} {
		t.Run(alg, func(t *testing.T) {
			d := adaptive.DefaultConfig()
			d.Algorithm = alg
			zero, full := newFeeder(t, adaptive.Config{Algorithm: alg}, 10), newFeeder(t, d, 10)
			for _, f := range []*feeder{zero, full} {
				for i := range 60 {
					limit := f.c.State().Limit
					switch {
					case i%20 < 8:
						f.window(40, limit, 10*time.Millisecond, nil)
					case i%20 < 12:
						f.window(40, limit, 10*time.Millisecond, bulkhead.ErrOverloaded)
					case i%20 < 16:
						f.window(40, limit, 30*time.Millisecond, nil)
					default:
						f.window(40, limit/2, 10*time.Millisecond, nil)
					}
				}
			}
			if !slices.Equal(zero.set, full.set) || len(full.set) < 10 {
				t.Fatalf("limits set with zero fields %v, with DefaultConfig %v", zero.set, full.set)
			}
		})
	}
}

// wallStep returns t, which carries a monotonic reading, with its wall clock
// moved by d and its monotonic reading unchanged: what time.Now returns
// once the system clock was stepped by d (whole seconds). It writes the
// fields of time.Time (wall: a flag, 33 bits of seconds since 1885 and 30
// bits of nanoseconds; ext: the monotonic reading); the test checks the
// result through the time package.
func wallStep(t time.Time, d time.Duration) time.Time {
	type layout struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	(*layout)(unsafe.Pointer(&t)).wall += uint64(int64(d/time.Second)) << 30
	return t
}

// Windows close by the monotonic clock: after the wall clock steps back an
// hour, they go on closing every 10ms of calls.
func TestWindowsSurviveAWallClockStep(t *testing.T) {
	start := time.Now()
	if back := wallStep(start, -time.Hour); back.Sub(start) != 0 || start.Round(0).Sub(back.Round(0)) != time.Hour {
		t.Fatalf("wallStep: %v is not %v with the wall clock an hour back", back, start)
	}
	c, err := adaptive.New(adaptive.Config{Algorithm: "aimd", MinSamples: 1, Window: 10 * time.Millisecond}, 10,
		func(int) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	call := func(at time.Time) {
		c.Observe(bulkhead.Event{Type: bulkhead.EventPermitted, Time: at})
		c.Observe(bulkhead.Event{Type: bulkhead.EventFinished, Time: at, Run: time.Millisecond})
	}
	for i := range 10 {
		call(start.Add(time.Duration(i) * 10 * time.Millisecond))
	}
	before := c.State().Windows
	for i := range 10 {
		call(wallStep(start.Add(time.Duration(10+i)*10*time.Millisecond), -time.Hour))
	}
	if s := c.State(); s.Windows-before != 10 {
		t.Fatalf("%d windows closed in 100ms of calls after the wall clock stepped back (%d before), want 10", s.Windows-before, before)
	}
}

// A call running when Attach begins that finishes during it (here: while
// Attach sets the initial limit) is not counted running afterwards: under
// one call at a time the limit, 4, is never used by half, and AIMD holds it.
func TestAttachSeesCallsThatFinishDuringIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := semaphore.New("dep", semaphore.Config{MaxConcurrentCalls: 5})
		release, done := make(chan struct{}), make(chan struct{})
		started := make(chan struct{})
		go func() {
			defer close(done)
			_ = b.Do(context.Background(), func(context.Context) error { close(started); <-release; return nil })
		}()
		<-started
		cancel := b.Subscribe(func(e bulkhead.Event) {
			if e.Type == bulkhead.EventLimitChanged && e.Limit == 4 {
				close(release) // inside Attach, which is setting the initial limit
				<-done
			}
		})
		defer cancel()
		c, err := adaptive.Attach(b, adaptive.Config{Algorithm: "aimd", InitialLimit: 4, MinSamples: 1, Window: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Detach()
		for range 200 {
			_ = b.Do(context.Background(), func(context.Context) error { time.Sleep(time.Millisecond); return nil })
		}
		if s := c.State(); s.Limit != 4 || s.Windows < 10 {
			t.Fatalf("after 200 calls one at a time: %+v; want the limit held at 4", s)
		}
	})
}

// blocking is an Algorithm that signals entered and waits for proceed
// before it answers limit.
type blocking struct {
	entered, proceed chan struct{}
	limit            float64
}

func (a *blocking) Update(float64, adaptive.Window) adaptive.Decision {
	close(a.entered)
	<-a.proceed
	return adaptive.Decision{Limit: a.limit, Reason: "blocked"}
}

// A decision in progress when Detach is called does not change the limit
// after Detach returned: the owner's 7 stays, not the decision's 3.
func TestDetachStopsADecisionInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := semaphore.New("dep", semaphore.Config{MaxConcurrentCalls: 10})
		alg := &blocking{entered: make(chan struct{}), proceed: make(chan struct{}), limit: 3}
		c, err := adaptive.Attach(b, adaptive.Config{Custom: alg, MinSamples: 1, Window: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 2 { // the first call starts the clock, the second closes a window
				_ = b.Do(context.Background(), func(context.Context) error { time.Sleep(time.Millisecond); return nil })
			}
		}()
		<-alg.entered
		c.Detach()
		cfg := b.Config()
		cfg.MaxConcurrentCalls = 7
		if err := b.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		close(alg.proceed)
		<-done
		if got := b.Config().MaxConcurrentCalls; got != 7 {
			t.Fatalf("limit %d after Detach, want the owner's 7", got)
		}
	})
}

// fixed is an Algorithm that always answers limit.
type fixed float64

func (f fixed) Update(float64, adaptive.Window) adaptive.Decision {
	return adaptive.Decision{Limit: float64(f), Reason: "fixed"}
}

// Detach called by a subscriber of the limit change a decision makes (on
// the goroutine of that decision) returns.
func TestDetachFromTheDecisionsSubscriber(t *testing.T) {
	b, _ := semaphore.New("dep", semaphore.Config{MaxConcurrentCalls: 10})
	var ctl atomic.Pointer[adaptive.Controller]
	detached := make(chan struct{})
	cancel := b.Subscribe(func(e bulkhead.Event) {
		if e.Type == bulkhead.EventLimitChanged && e.Limit == 3 {
			ctl.Load().Detach()
			close(detached)
		}
	})
	defer cancel()
	c, err := adaptive.Attach(b, adaptive.Config{Custom: fixed(3), MinSamples: 1, Window: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	ctl.Store(c)
	done := make(chan struct{})
	defer func() { <-done }()
	go func() {
		defer close(done)
		for {
			select {
			case <-detached:
				return
			default:
				_ = b.Do(context.Background(), func(context.Context) error { return nil })
			}
		}
	}()
	select {
	case <-detached:
	case <-time.After(10 * time.Second):
		t.Fatal("Detach from the decision's subscriber did not return")
	}
}

// A shadow controller decides as an enforcing one does, window by window,
// and never sets the limit.
func TestShadowComputesButDoesNotApply(t *testing.T) {
	overloaded := fmt.Errorf("503: %w", bulkhead.ErrOverloaded)
	run := func(shadow bool) (*feeder, []int) {
		f := newFeeder(t, adaptive.Config{Algorithm: "aimd", InitialLimit: 30, Shadow: shadow}, 20)
		var limits []int
		for i := range 12 {
			var err error
			if i%4 == 3 {
				err = overloaded
			}
			f.window(40, 20, 10*time.Millisecond, err)
			limits = append(limits, f.c.State().Limit)
		}
		return f, limits
	}
	enforced, want := run(false)
	shadow, got := run(true)
	if len(enforced.set) == 0 {
		t.Fatal("the enforcing controller never set the limit: the schedule tests nothing")
	}
	if len(shadow.set) != 0 {
		t.Fatalf("the shadow controller set the limit: %v", shadow.set)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("shadow limits %v, enforced %v", got, want)
	}
	if s := shadow.c.State(); !s.Shadow || s.Changes != enforced.c.State().Changes || enforced.c.State().Shadow {
		t.Fatalf("shadow State %+v, enforced %+v", s, enforced.c.State())
	}

	b, _ := semaphore.New("dep", semaphore.Config{MaxConcurrentCalls: 7})
	c, err := adaptive.Attach(b, adaptive.Config{InitialLimit: 50, Shadow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Detach()
	if got, s := b.Config().MaxConcurrentCalls, c.State(); got != 7 || s.Limit != 50 || !s.Shadow {
		t.Fatalf("Attach with Shadow: bulkhead limit %d (want 7), State %+v", got, s)
	}
}
