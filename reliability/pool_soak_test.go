package reliability

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// TestSoakPool drives a pool bulkhead with a seeded mix of tasks that
// return, fail, panic, call runtime.Goexit, are cancelled while queued or
// running (by their context or Future.Cancel) and expire in the queue, while
// a resizer changes MaxWorkers, QueueCapacity, MaxWaitDuration and
// KeepAlive; in the "close" variant the pool is closed mid-run. Every future
// must complete exactly once, consistently with whether its task ran, and
// the invariants must hold. Run it long with BULKHEAD_SOAK=5m.
func TestSoakPool(t *testing.T) {
	d := soakDuration(t, 1500*time.Millisecond)
	seed := soakSeed(t)
	for _, v := range []struct {
		name          string
		events, close bool
	}{{"plain", false, false}, {"subscribed", true, false}, {"close", false, true}} {
		t.Run(v.name, func(t *testing.T) {
			o := soakPool(t, seed, d/3, v.events, v.close)
			t.Logf("seed %d, %v: %v", seed, d/3, o)
		})
	}
}

// poolTask is one submitted task as its submitter tracks it.
type poolTask struct {
	id      int
	ran     atomic.Int32 // times the function was entered: 0 or 1
	how     int          // what the function does
	f       *future.Future[int]
	cancel  context.CancelFunc
	ctx     *probeCtx
	settled bool
}

const (
	taskOK = iota
	taskErr
	taskPanic
	taskGoexit
	taskUntilCancelled // runs until its context ends (Cancel, ctx, Close)
)

func soakPool(t *testing.T, seed uint64, d time.Duration, events, closeMidRun bool) *outcomes {
	const workers = 8
	before := goleak.IgnoreCurrent()
	cfg0 := pool.Config{MaxWorkers: 4, QueueCapacity: 8, QueueTimeout: time.Millisecond, KeepAlive: time.Second}
	b, err := pool.New("soak", cfg0)
	if err != nil {
		t.Fatal(err)
	}
	var ev eventCounts
	if events {
		defer b.Subscribe(ev.record)()
	}
	var c concurrency
	c.bound.publish(4)
	var queue boundLog // the largest queue that may legitimately be held
	queue.publish(8)
	var queueViolations atomic.Uint64
	var o outcomes
	var expired, cancelledQueued, doubleRuns, badResults atomic.Uint64
	deadline := time.Now().Add(d)
	closeAt := time.Now().Add(d / 2)
	// On a slow host (GOMAXPROCS 1 under -race) the submitters go on past
	// the deadline until the soak has done enough to exercise every
	// outcome: 400 tasks run, and 10 resizes or the Close.
	const enoughRan = 400
	var resizes atomic.Int64
	var closedMid atomic.Bool
	enough := func() bool {
		if closeMidRun {
			return closedMid.Load()
		}
		return resizes.Load() >= 10 && o.ran.Load() >= enoughRan
	}

	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			var batch []*poolTask
			settle := func() {
				// Tasks that run until cancelled are cancelled first (by
				// their future or their context), so that the tasks
				// queued behind them get workers.
				for _, pt := range batch {
					if pt.how == taskUntilCancelled {
						if pt.id%2 == 0 || pt.ctx.Context.Done() == nil {
							pt.f.Cancel()
						} else {
							pt.cancel()
						}
					}
				}
				for _, pt := range batch {
					settlePoolTask(t, pt, &o, &expired, &cancelledQueued, &doubleRuns, &badResults)
				}
				batch = batch[:0]
			}
			for i := 0; time.Now().Before(deadline) || !enough(); i++ {
				pt := submitPoolTask(t, b, r, &c, &o, w*1_000_000+i)
				if pt != nil {
					batch = append(batch, pt)
					// Some futures are cancelled right away, some later.
					if r.IntN(12) == 0 {
						pt.f.Cancel()
					}
				}
				if len(batch) >= 1+r.IntN(16) {
					for _, pt := range batch {
						if r.IntN(10) == 0 {
							pt.f.Cancel()
						}
					}
					settle()
				}
				if pt == nil && r.IntN(2) == 0 {
					time.Sleep(time.Duration(r.IntN(100)) * time.Microsecond) // back off after a refusal
				}
			}
			for _, pt := range batch {
				pt.f.Cancel() // the submitter is done: what still runs, it cancels
			}
			settle()
		}()
	}

	// The resizer, and the queue watcher.
	stop := make(chan struct{})
	resized := make(chan int)
	go func() {
		r := rand.New(rand.NewPCG(seed, 1<<32))
		n := 0
		limit, qcap := 4, 8
		closed := false
		for {
			select {
			case <-stop:
				resized <- n
				return
			default:
			}
			if closeMidRun && !closed && time.Now().After(closeAt) && o.ran.Load() >= enoughRan {
				closed = true
				// Give the running and queued tasks a moment, then drop
				// what is still queued and cancel what runs.
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(300))*time.Microsecond)
				err := b.Close(ctx)
				cancel()
				if err != nil && err != context.DeadlineExceeded {
					t.Errorf("Close = %v", err)
				}
				if err := b.Reconfigure(cfg0); err != bulkhead.ErrClosed {
					t.Errorf("Reconfigure after Close = %v, want ErrClosed", err)
				}
				closedMid.Store(true)
			}
			if !closed {
				cfg := pool.Config{MaxWorkers: 1 + r.IntN(8), QueueCapacity: r.IntN(17),
					QueueTimeout: []time.Duration{0, 0, 200 * time.Microsecond, time.Millisecond, 5 * time.Millisecond}[r.IntN(5)],
					KeepAlive:    cfg0.KeepAlive}
				if r.IntN(20) == 0 {
					cfg.KeepAlive = time.Duration(1+r.IntN(3)) * time.Second // replaces the ants pool
				}
				if int64(cfg.MaxWorkers) > c.bound.current() {
					c.bound.publish(int64(cfg.MaxWorkers))
				}
				if int64(cfg.QueueCapacity) > queue.current() {
					queue.publish(int64(cfg.QueueCapacity))
				}
				if err := b.Reconfigure(cfg); err != nil {
					t.Error(err)
				}
				limit, qcap = cfg.MaxWorkers, cfg.QueueCapacity
				n++
				resizes.Store(int64(n))
			}
			for range 1 + r.IntN(50) {
				runtime.Gosched()
				v1 := queue.ver.Load()
				s := b.Stats()
				v2 := queue.ver.Load()
				if m, ok := queue.maxBetween(v1, v2); ok && int64(s.QueueDepth) > m {
					queueViolations.Add(1)
				}
				if s.InFlight <= limit && int64(limit) < c.bound.current() {
					c.bound.publish(int64(limit))
				}
				if s.QueueDepth <= qcap && int64(qcap) < queue.current() {
					queue.publish(int64(qcap))
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	n := <-resized
	if !closeMidRun {
		if err := b.Reconfigure(cfg0); err != nil {
			t.Fatal(err)
		}
	}
	s := b.Stats()
	c.check(t)
	if v := queueViolations.Load(); v > 0 {
		t.Errorf("QueueDepth was above the QueueCapacity in force %d times", v)
	}
	if v := doubleRuns.Load(); v > 0 {
		t.Errorf("%d tasks ran more than once", v)
	}
	if v := badResults.Load(); v > 0 {
		t.Errorf("%d futures completed with a result that does not match what their task did", v)
	}
	// Expired in the queue: Rejected; cancelled while queued: Cancelled.
	o.rejected.Add(expired.Load())
	o.cancelled.Add(cancelledQueued.Load())
	checkAccounted(t, s, &o)
	if o.ran.Load() == 0 || o.rejected.Load() == 0 || o.panicked.Load() == 0 || o.goexited.Load() == 0 ||
		expired.Load() == 0 || cancelledQueued.Load() == 0 || (closeMidRun && o.closed.Load() == 0) || (!closeMidRun && n < 10) {
		t.Errorf("the soak did not exercise every outcome: %v, %d expired, %d cancelled in the queue, %d resizes",
			&o, expired.Load(), cancelledQueued.Load(), n)
	}
	t.Logf("peak concurrency %d, %d resizes, %d expired, %d cancelled in the queue", c.peak.Load(), n, expired.Load(), cancelledQueued.Load())

	// After Close returns nil, no goroutine of the bulkhead is left.
	if err := b.Close(context.Background()); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if events {
		// After Close: a worker publishes a task's EventFinished after
		// completing its future, so a settled future does not mean its
		// event was seen; Close waits for the workers.
		ev.check(t, b.Stats())
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	goleak.VerifyNone(t, before)
	return &o
}

// submitPoolTask submits one task of a random kind; it returns nil if the
// submit was refused, after counting why.
func submitPoolTask(t *testing.T, b *pool.Bulkhead, r *rand.Rand, c *concurrency, o *outcomes, id int) *poolTask {
	o.calls.Add(1)
	pt := &poolTask{id: id, how: taskOK}
	switch k := r.IntN(100); {
	case k < 8:
		pt.how = taskErr
	case k < 12:
		pt.how = taskPanic
	case k < 15:
		pt.how = taskGoexit
	case k < 22:
		pt.how = taskUntilCancelled
	}
	// Decided here: r belongs to this goroutine, the task runs on another.
	spins, nap := 0, time.Duration(0)
	if r.IntN(3) == 0 {
		spins = 1 + r.IntN(20)
		if r.IntN(8) == 0 {
			nap = time.Duration(r.IntN(300)) * time.Microsecond
		}
	}
	parent := context.Background()
	cancel := context.CancelFunc(func() {})
	switch k := r.IntN(40); {
	case k < 4:
		parent, cancel = context.WithTimeout(parent, time.Duration(r.IntN(500))*time.Microsecond)
	case k < 6:
		var c2 context.CancelFunc
		parent, c2 = context.WithCancel(parent)
		tm := time.AfterFunc(time.Duration(r.IntN(500))*time.Microsecond, c2)
		cancel = func() { tm.Stop(); c2() }
	case k < 7:
		var c2 context.CancelFunc
		parent, c2 = context.WithCancel(parent)
		c2()
	}
	pt.ctx, pt.cancel = &probeCtx{Context: parent}, cancel
	fn := func(ctx context.Context) (int, error) {
		pt.ran.Add(1)
		defer c.enter()()
		o.ran.Add(1)
		for range spins {
			runtime.Gosched()
		}
		if nap > 0 {
			time.Sleep(nap)
		}
		switch pt.how {
		case taskErr:
			o.failed.Add(1)
			return 0, errWork
		case taskPanic:
			o.failed.Add(1)
			o.panicked.Add(1)
			panic(panicValue{0, pt.id})
		case taskGoexit:
			o.failed.Add(1)
			o.goexited.Add(1)
			runtime.Goexit()
		case taskUntilCancelled:
			<-ctx.Done()
			o.failed.Add(1)
			return 0, ctx.Err()
		}
		return pt.id, nil
	}
	f, err := pool.Submit(pt.ctx, b, fn)
	if err == nil {
		if f == nil {
			t.Error("Submit returned neither a future nor an error")
		}
		pt.f = f
		return pt
	}
	cancel()
	if f != nil {
		t.Errorf("Submit returned a future with the error %v", err)
	}
	switch {
	case errors.Is(err, bulkhead.ErrBulkheadFull):
		var fe *bulkhead.FullError
		if !errors.As(err, &fe) || fe.Waited {
			t.Errorf("Submit rejection %#v, want a *FullError not Waited", err)
		}
		o.rejected.Add(1)
	case err == context.Canceled || err == context.DeadlineExceeded:
		o.early.Add(1) // a context done when Submit looked: counted nowhere
	case err == bulkhead.ErrClosed:
		o.closed.Add(1)
	default:
		t.Errorf("Submit = %v", err)
	}
	return nil
}

// settlePoolTask waits for pt's future and checks that its result matches
// what its task did (or why it never ran).
func settlePoolTask(t *testing.T, pt *poolTask, o *outcomes, expired, cancelledQueued, doubleRuns, badResults *atomic.Uint64) {
	defer pt.cancel()
	guard, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	v, err := pt.f.Wait(guard)
	if guard.Err() != nil {
		t.Errorf("task %d: its future never completed", pt.id)
		return
	}
	select {
	case <-pt.f.Done():
	default:
		t.Errorf("task %d: Wait returned but Done is open", pt.id)
	}
	if v2, err2 := pt.f.Result(); v2 != v || err2 != err {
		t.Errorf("task %d: Result() = %v, %v after Wait returned %v, %v", pt.id, v2, err2, v, err)
	}
	bad := func(format string, args ...any) {
		if badResults.Add(1) <= 3 {
			t.Errorf("task %d (kind %d, ran %d): "+format, append([]any{pt.id, pt.how, pt.ran.Load()}, args...)...)
		}
	}
	switch pt.ran.Load() {
	case 0:
		var fe *bulkhead.FullError
		switch {
		case errors.As(err, &fe) && fe.Waited:
			expired.Add(1)
		case err == context.Canceled || err == context.DeadlineExceeded:
			cancelledQueued.Add(1)
		case err == bulkhead.ErrClosed:
			o.dropped.Add(1)
		default:
			bad("never ran, but its future holds %v, %v", v, err)
		}
	case 1:
		var pe *bulkhead.PanicError
		switch pt.how {
		case taskOK:
			if v != pt.id || err != nil {
				bad("returned %d, nil, future holds %v, %v", pt.id, v, err)
			}
		case taskErr:
			if err != errWork {
				bad("future holds %v, want the task's error", err)
			}
		case taskPanic:
			if !errors.As(err, &pe) || pe.Value != (panicValue{0, pt.id}) {
				bad("future holds %v, want a *PanicError with the panic value", err)
			}
		case taskGoexit:
			if err == nil {
				bad("called runtime.Goexit, future holds no error")
			}
		case taskUntilCancelled:
			if err != context.Canceled && err != context.DeadlineExceeded {
				bad("future holds %v, want the context's error", err)
			}
		}
	default:
		doubleRuns.Add(1)
	}
}
