package reliability

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// errWork is the error a guarded function returns on purpose.
var errWork = errors.New("reliability: the dependency failed")

// errTryFull marks a TryAcquire that returned false.
var errTryFull = errors.New("reliability: TryAcquire refused")

// panicValue is what a guarded function panics with on purpose.
type panicValue struct{ worker, call int }

// TestSoakSemaphore drives a semaphore bulkhead with a seeded mix of every
// kind of call while a resizer changes MaxConcurrentCalls and
// MaxWaitDuration, then checks the invariants. Run it long with
// BULKHEAD_SOAK=5m.
func TestSoakSemaphore(t *testing.T) {
	d := soakDuration(t, 1500*time.Millisecond)
	seed := soakSeed(t)
	for _, events := range []bool{false, true} {
		name := "plain"
		if events {
			name = "subscribed"
		}
		t.Run(name, func(t *testing.T) {
			o := soakSemaphore(t, seed, d/2, events)
			t.Logf("seed %d, %v: %v", seed, d/2, o)
		})
	}
}

func soakSemaphore(t *testing.T, seed uint64, d time.Duration, events bool) *outcomes {
	const workers = 12
	b, err := semaphore.New("soak", semaphore.Config{MaxConcurrentCalls: 4, MaxWaitDuration: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var ev eventCounts
	if events {
		defer b.Subscribe(ev.record)()
	}
	var c concurrency
	c.bound.publish(4)
	var o outcomes
	deadline := time.Now().Add(d)

	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; time.Now().Before(deadline); i++ {
				semaphoreCall(t, b, r, &c, &o, w, i)
			}
		}()
	}

	// The resizer: limits 1..12, waits 0..2ms, up and down.
	stop := make(chan struct{})
	resized := make(chan int)
	go func() {
		r := rand.New(rand.NewPCG(seed, 1<<32))
		n := 0
		limit := 4
		for {
			select {
			case <-stop:
				resized <- n
				return
			default:
			}
			next := 1 + r.IntN(12)
			wait := []time.Duration{0, 0, 50 * time.Microsecond, 300 * time.Microsecond, time.Millisecond, 2 * time.Millisecond}[r.IntN(6)]
			if int64(next) > c.bound.current() {
				c.bound.publish(int64(next))
			}
			if err := b.Reconfigure(semaphore.Config{MaxConcurrentCalls: next, MaxWaitDuration: wait}); err != nil {
				t.Error(err)
			}
			limit = next
			n++
			// Let calls run under this limit for a moment, and tighten
			// the bound once the calls admitted under a larger limit are
			// gone.
			for range 1 + r.IntN(50) {
				runtime.Gosched()
				if s := b.Stats(); s.InFlight <= limit && int64(limit) < c.bound.current() {
					c.bound.publish(int64(limit))
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	n := <-resized
	if err := b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 4, MaxWaitDuration: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	s := b.Stats()
	c.check(t)
	checkAccounted(t, s, &o)
	if s.MaxConcurrentCalls != 4 {
		t.Errorf("MaxConcurrentCalls %d after the final Reconfigure to 4", s.MaxConcurrentCalls)
	}
	if events {
		ev.check(t, s)
	}
	if o.calls.Load() < 1000 || o.ran.Load() == 0 || o.rejected.Load() == 0 || o.cancelled.Load() == 0 ||
		o.panicked.Load() == 0 || o.goexited.Load() == 0 || o.early.Load() == 0 || n < 10 {
		t.Errorf("the soak did not exercise every outcome: %v, %d resizes", &o, n)
	}
	t.Logf("peak concurrency %d, %d resizes", c.peak.Load(), n)
	return &o
}

// semaphoreCall makes one call of a randomly chosen kind and classifies its
// outcome.
func semaphoreCall(t *testing.T, b *semaphore.Bulkhead, r *rand.Rand, c *concurrency, o *outcomes, w, i int) {
	o.calls.Add(1)
	op := r.IntN(100)
	slow := r.IntN(4) == 0
	work := func() {
		if slow {
			for range 1 + r.IntN(20) {
				runtime.Gosched()
			}
			if r.IntN(8) == 0 {
				time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
			}
		}
	}
	// guarded is the function under the bulkhead; how it ends depends on op.
	guarded := func(ctx context.Context) error {
		defer c.enter()()
		o.ran.Add(1)
		work()
		switch {
		case op < 10:
			o.failed.Add(1)
			return errWork
		case op < 15:
			o.failed.Add(1)
			o.panicked.Add(1)
			panic(panicValue{w, i})
		case op < 18:
			o.failed.Add(1) // a Goexit counts as failed, as in a pool
			o.goexited.Add(1)
			runtime.Goexit()
		}
		return nil
	}

	// The context: most calls have none that ends; some end while waiting
	// (a short timeout or a cancel from a timer), some were done already.
	parent := context.Background()
	var cancel context.CancelFunc = func() {}
	switch k := r.IntN(20); {
	case k < 3:
		parent, cancel = context.WithTimeout(parent, time.Duration(r.IntN(400))*time.Microsecond)
	case k < 5:
		var c2 context.CancelFunc
		parent, c2 = context.WithCancel(parent)
		tm := time.AfterFunc(time.Duration(r.IntN(400))*time.Microsecond, c2)
		cancel = func() { tm.Stop(); c2() }
	case k < 6:
		var c2 context.CancelFunc
		parent, c2 = context.WithCancel(parent)
		c2()
	}
	defer cancel()
	ctx := &probeCtx{Context: parent}

	var err error
	switch {
	case op < 18:
		// Error, panic or Goexit inside Do/Execute: on its own goroutine so
		// that Goexit ends that one and the panic is caught there.
		done := make(chan error, 1)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					if p != (panicValue{w, i}) {
						t.Errorf("recovered %v, want the function's own panic value", p)
					}
					done <- nil
				}
			}()
			if op%2 == 0 {
				done <- b.Do(ctx, guarded)
			} else {
				_, err := semaphore.Execute(ctx, b, func(ctx context.Context) (int, error) { return 1, guarded(ctx) })
				done <- err
			}
		}()
		wg.Wait()
		select {
		case err = <-done:
		default: // runtime.Goexit: the call ran and its permit must be back
		}
		if errors.Is(err, errWork) {
			if err != errWork {
				t.Errorf("Do wrapped the function's error: %v", err)
			}
			return
		}
	case op < 55:
		err = b.Do(ctx, guarded)
	case op < 70:
		var v int
		v, err = semaphore.Execute(ctx, b, func(ctx context.Context) (int, error) { return 7, guarded(ctx) })
		if err == nil && v != 7 {
			t.Errorf("Execute returned %d, want 7", v)
		}
	case op < 85:
		if b.TryAcquire() {
			func() {
				defer b.Release()
				defer c.enter()()
				o.ran.Add(1)
				work()
			}()
		} else {
			o.rejected.Add(1) // TryAcquire's false counts as a rejection
			err = errTryFull
		}
	default:
		err = b.Acquire(ctx)
		if err == nil {
			func() {
				defer b.Release()
				defer c.enter()()
				o.ran.Add(1)
				work()
			}()
		}
	}
	if err == errTryFull {
		err = nil
	}
	classify(t, err, ctx, o)
	if errors.Is(err, bulkhead.ErrBulkheadFull) {
		// A rejected client backs off a little instead of spinning, so
		// that admitted calls get the CPU too.
		time.Sleep(time.Duration(r.IntN(100)) * time.Microsecond)
	}
}

// classify counts an error a caller saw, in the categories of the at-rest
// invariants. A nil error needs nothing: the guarded function counted itself.
func classify(t *testing.T, err error, ctx *probeCtx, o *outcomes) {
	switch {
	case err == nil:
	case errors.Is(err, bulkhead.ErrBulkheadFull):
		var fe *bulkhead.FullError
		if !errors.As(err, &fe) {
			t.Errorf("a rejection without a *FullError: %v", err)
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a rejection that also looks like a context error: %v", err)
		}
		o.rejected.Add(1)
	case err == context.Canceled || err == context.DeadlineExceeded:
		if err != ctx.Err() {
			t.Errorf("got %v, but the call's context says %v", err, ctx.Err())
		}
		if ctx.wasEarly() {
			o.early.Add(1)
		} else {
			o.cancelled.Add(1)
		}
	case errors.Is(err, bulkhead.ErrClosed):
		o.closed.Add(1)
	case errors.Is(err, errWork):
		// the guarded function counted it
	default:
		t.Errorf("unexpected error %v", err)
	}
}
