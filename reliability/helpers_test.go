package reliability

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// soakDuration is how long one soak run lasts: short by default, or the
// duration in the BULKHEAD_SOAK environment variable (for example
// BULKHEAD_SOAK=5m) for the long run.
func soakDuration(t testing.TB, short time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv("BULKHEAD_SOAK")
	if v == "" {
		return short
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("BULKHEAD_SOAK=%q: want a positive Go duration such as 5m", v)
	}
	return d
}

// soakSeed is the seed of the soak's random choices: 1, or the value of
// BULKHEAD_SEED. Each worker draws from its own stream (seed, worker), so a
// seed fixes every worker's sequence of operations; only the interleaving is
// left to the scheduler.
func soakSeed(t testing.TB) uint64 {
	t.Helper()
	v := os.Getenv("BULKHEAD_SEED")
	if v == "" {
		return 1
	}
	s, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("BULKHEAD_SEED=%q: want an unsigned integer", v)
	}
	return s
}

// waitFor polls cond until it holds; the deadline only guards against a
// hang and fails the test.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
		time.Sleep(50 * time.Microsecond)
	}
}

// boundLog publishes the largest number of calls that may legitimately run
// at once, as a log of versions, so that a guarded function can check the
// concurrency it measures itself against every bound in force while it
// looked.
//
// The writer (one resizing goroutine) keeps: running calls <= permits in use
// <= published bound, at every instant. It publishes a larger bound before it
// raises the limit, and publishes a smaller one only after the limit is
// lowered and the bulkhead was seen with no more calls in flight than the new
// limit (calls admitted under the old limit may finish first).
type boundLog struct {
	ver  atomic.Uint64
	ring [1024]atomic.Int64
}

func (l *boundLog) current() int64 { return l.ring[l.ver.Load()%uint64(len(l.ring))].Load() }

// publish is called by the single writer only.
func (l *boundLog) publish(v int64) {
	n := l.ver.Load() + 1
	l.ring[n%uint64(len(l.ring))].Store(v)
	l.ver.Store(n)
}

// maxBetween is the largest bound published in versions v1..v2, and false if
// the ring no longer holds them all.
func (l *boundLog) maxBetween(v1, v2 uint64) (int64, bool) {
	const keep = 900
	if v2-v1 >= keep {
		return 0, false
	}
	var m int64
	for v := v1; v <= v2; v++ {
		m = max(m, l.ring[v%uint64(len(l.ring))].Load())
	}
	if l.ver.Load()-v1 >= keep {
		return 0, false
	}
	return m, true
}

// concurrency measures, inside the guarded functions and independently of
// Stats, how many run at once, and records any moment above the bound.
type concurrency struct {
	bound      boundLog
	running    atomic.Int64
	peak       atomic.Int64
	entered    atomic.Uint64
	violations atomic.Uint64
	mu         sync.Mutex
	first      string
}

// enter is called first thing in a guarded function; the returned func must
// be deferred, so that it runs on panic and runtime.Goexit too.
func (c *concurrency) enter() (exit func()) {
	v1 := c.bound.ver.Load()
	n := c.running.Add(1)
	v2 := c.bound.ver.Load()
	c.entered.Add(1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if m, ok := c.bound.maxBetween(v1, v2); ok && n > m {
		if c.violations.Add(1) == 1 {
			c.mu.Lock()
			c.first = fmt.Sprintf("%d calls running while the limit in force was at most %d", n, m)
			c.mu.Unlock()
		}
	}
	return c.exit
}

func (c *concurrency) exit() { c.running.Add(-1) }

func (c *concurrency) check(t testing.TB) {
	t.Helper()
	if n := c.violations.Load(); n > 0 {
		c.mu.Lock()
		defer c.mu.Unlock()
		t.Errorf("the limit was exceeded %d times; first: %s", n, c.first)
	}
	if r := c.running.Load(); r != 0 {
		t.Errorf("%d guarded functions still running at rest", r)
	}
}

// probeCtx records whether its context had already ended the first time the
// bulkhead looked at it (Err or Done). A call whose context was done on
// arrival is counted nowhere; one that ended later, while waiting or
// queued, is counted Cancelled. The probe lets the soak tell them apart
// exactly.
type probeCtx struct {
	context.Context
	once     sync.Once
	early    bool
	firstErr error
}

// look records the context's state at the first look, and reports whether
// this was it.
func (p *probeCtx) look() (first bool) {
	p.once.Do(func() {
		first = true
		p.firstErr = p.Context.Err()
		p.early = p.firstErr != nil
	})
	return first
}

// Err returns, on the first look, exactly the error the probe recorded, so
// that the bulkhead's decision and the probe's agree even if the context
// ends in between.
func (p *probeCtx) Err() error {
	if p.look() {
		return p.firstErr
	}
	return p.Context.Err()
}

func (p *probeCtx) Done() <-chan struct{} {
	p.look()
	return p.Context.Done()
}

// wasEarly reports whether the context had ended when first looked at.
func (p *probeCtx) wasEarly() bool {
	p.look()
	return p.early
}

// eventCounts counts the events of one bulkhead by type.
type eventCounts struct {
	n [bulkhead.EventFinished + 1]atomic.Uint64
}

func (e *eventCounts) record(ev bulkhead.Event) {
	if ev.Type <= bulkhead.EventFinished {
		e.n[ev.Type].Add(1)
	}
}

// check compares the events seen with the counters of s.
func (e *eventCounts) check(t testing.TB, s bulkhead.Stats) {
	t.Helper()
	got := [4]uint64{e.n[bulkhead.EventPermitted].Load(), e.n[bulkhead.EventRejected].Load(),
		e.n[bulkhead.EventCancelled].Load(), e.n[bulkhead.EventFinished].Load()}
	want := [4]uint64{s.Permitted, s.Rejected, s.Cancelled, s.Finished}
	if got != want {
		t.Errorf("events permitted/rejected/cancelled/finished = %v, stats say %v", got, want)
	}
}

// outcomes counts what the callers saw.
type outcomes struct {
	calls     atomic.Uint64 // calls and submits made
	ran       atomic.Uint64 // guarded functions entered (measured inside them)
	failed    atomic.Uint64 // of those, returned an error or panicked
	panicked  atomic.Uint64
	goexited  atomic.Uint64
	rejected  atomic.Uint64 // ErrBulkheadFull seen by the caller (or on the future)
	cancelled atomic.Uint64 // context error (or future cancellation) after admission
	early     atomic.Uint64 // context already done on arrival: counted nowhere
	closed    atomic.Uint64 // ErrClosed on submit: counted nowhere
	dropped   atomic.Uint64 // ErrClosed on the future: Close dropped it (Cancelled)
}

func (o *outcomes) String() string {
	return fmt.Sprintf("calls=%d ran=%d failed=%d (panics=%d) goexits=%d rejected=%d cancelled=%d earlyCtx=%d closed=%d dropped=%d",
		o.calls.Load(), o.ran.Load(), o.failed.Load(), o.panicked.Load(), o.goexited.Load(), o.rejected.Load(),
		o.cancelled.Load(), o.early.Load(), o.closed.Load(), o.dropped.Load())
}

// checkAccounted checks the at-rest invariants of issue 6 against what the
// callers saw: nothing in flight, waiting or queued, every permit back, and
// every call counted exactly once.
func checkAccounted(t testing.TB, s bulkhead.Stats, o *outcomes) {
	t.Helper()
	if s.InFlight != 0 || s.Waiting != 0 || s.QueueDepth != 0 || s.AvailableConcurrentCalls != s.MaxConcurrentCalls {
		t.Errorf("not at rest: %+v", s)
	}
	if s.Permitted != s.Finished {
		t.Errorf("Permitted %d != Finished %d at rest", s.Permitted, s.Finished)
	}
	if s.Permitted != o.ran.Load() {
		t.Errorf("Permitted %d, but %d guarded functions ran", s.Permitted, o.ran.Load())
	}
	if s.Failed != o.failed.Load() {
		t.Errorf("Failed %d, but callers saw %d errors and panics", s.Failed, o.failed.Load())
	}
	if s.Rejected != o.rejected.Load() {
		t.Errorf("Rejected %d, but callers saw %d rejections", s.Rejected, o.rejected.Load())
	}
	if s.Cancelled != o.cancelled.Load()+o.dropped.Load() {
		t.Errorf("Cancelled %d, but callers saw %d cancellations and %d tasks dropped by Close",
			s.Cancelled, o.cancelled.Load(), o.dropped.Load())
	}
	if got, want := s.Permitted+s.Rejected+s.Cancelled+o.early.Load()+o.closed.Load(), o.calls.Load(); got != want {
		t.Errorf("permitted+rejected+cancelled+early+closed = %d, want every call (%d) exactly once; stats %+v; %v",
			got, want, s, o)
	}
}

// kickScheduler runs a goroutine, outside any synctest bubble, that wakes
// every few milliseconds, until the returned stop is called. With go1.26.8
// on 2 CPUs, about one synctest bubble in 10^5 was seen stuck for good with
// its only goroutine "runnable" in synctest.Wait and every P idle (a lost
// wakeup in the runtime, not in the code under test); a periodic wakeup
// lets the scheduler find it. The state-machine fuzzers run inside one.
func kickScheduler() (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}
