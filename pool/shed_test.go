package pool_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// The queue's rules (issue 24) in pool mode: bounded waiting submitters,
// deadline-aware admission and start, LIFO and adaptive LIFO, CoDel, the
// head rule. Each runs in a testing/synctest bubble, pool and all.

// shedPool makes a pool in the bubble; the test closes it with done.
func shedPool(t *testing.T, cfg pool.Config) (b *pool.Bulkhead, done func()) {
	t.Helper()
	b, err := pool.New("test", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b, func() {
		if err := b.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

// hold occupies the pool's one worker until the returned function is called.
func hold(t *testing.T, b *pool.Bulkhead) (release func()) {
	t.Helper()
	ch := make(chan struct{})
	if _, err := b.TryGo(context.Background(), func(context.Context) error { <-ch; return nil }); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	return func() { close(ch); synctest.Wait() }
}

// wantFull fails unless err is a FullError with reason r and waited.
func wantFull(t *testing.T, what string, err error, r bulkhead.Reason, waited bool) {
	t.Helper()
	var fe *bulkhead.FullError
	if !errors.As(err, &fe) || fe.Reason != r || fe.Waited != waited || !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("%s: got %v (%+v), want a FullError with reason %v, waited %v", what, err, fe, r, waited)
	}
}

// order queues n tasks that record the order they start in.
func order(t *testing.T, b *pool.Bulkhead, n int) (started *[]int) {
	t.Helper()
	started = new([]int)
	for i := 1; i <= n; i++ {
		if _, err := b.TryGo(context.Background(), func(context.Context) error {
			*started = append(*started, i) // one worker: no two run at once
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return started
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// goWaiter is a submitter waiting for room on its own goroutine.
type goWaiter struct {
	err  error
	done chan struct{}
}

func goWait(b *pool.Bulkhead, ctx context.Context) *goWaiter {
	w := &goWaiter{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		_, w.err = b.Go(ctx, func(context.Context) error { return nil })
	}()
	synctest.Wait()
	return w
}

func (w *goWaiter) returned() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func TestPoolMaxWaitingCallsFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1, MaxWaitingCalls: 1})
		defer done()
		release := hold(t, b)
		order(t, b, 1) // the queue is full
		first := goWait(b, context.Background())
		second := goWait(b, context.Background())
		if first.returned() || !second.returned() {
			t.Fatalf("want the first submitter waiting and the second refused (returned %v, %v)", first.returned(), second.returned())
		}
		wantFull(t, "second submitter", second.err, bulkhead.ReasonWaiters, false)
		if s := b.Stats(); s.Waiting != 1 || s.RejectedBy[bulkhead.ReasonWaiters] != 1 || s.Rejected != 1 {
			t.Fatalf("stats %+v", s)
		}
		release()
		if !first.returned() || first.err != nil {
			t.Fatalf("the waiting submitter: %v", first.err)
		}
	})
}

func TestPoolMaxWaitingCallsLIFODropsTheOldest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1, QueueTimeout: time.Hour,
			QueueOrder: bulkhead.LIFO, MaxWaitingCalls: 1})
		defer done()
		release := hold(t, b)
		order(t, b, 1)
		first := goWait(b, context.Background())
		second := goWait(b, context.Background())
		if !first.returned() || second.returned() {
			t.Fatalf("want the oldest submitter refused and the newcomer waiting (returned %v, %v)", first.returned(), second.returned())
		}
		wantFull(t, "oldest submitter", first.err, bulkhead.ReasonWaiters, true)
		if s := b.Stats(); s.Waiting != 1 || s.RejectedBy[bulkhead.ReasonWaiters] != 1 || !s.LIFO {
			t.Fatalf("stats %+v", s)
		}
		release()
		if !second.returned() || second.err != nil {
			t.Fatalf("the newest submitter: %v", second.err)
		}
	})
}

func TestPoolLIFOStartsNewest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 5, QueueTimeout: time.Hour,
			QueueOrder: bulkhead.LIFO})
		defer done()
		release := hold(t, b)
		got := order(t, b, 3)
		release()
		if !sameInts(*got, []int{3, 2, 1}) {
			t.Fatalf("started in order %v, want [3 2 1]", *got)
		}
	})
}

// Adaptive LIFO with a threshold of 2: newest first while more than 2 are
// queued, oldest first once the queue is short; and again on a new burst.
func TestPoolAdaptiveLIFOSwitchesBothWays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 10, QueueTimeout: time.Hour,
			QueueOrder: bulkhead.AdaptiveLIFO, LIFOThreshold: 2})
		defer done()
		for range 2 {
			release := hold(t, b)
			got := order(t, b, 4)
			if !b.Stats().LIFO {
				t.Fatal("not LIFO with 4 queued")
			}
			release()
			if !sameInts(*got, []int{4, 3, 1, 2}) {
				t.Fatalf("started in order %v, want [4 3 1 2]", *got)
			}
			if b.Stats().LIFO {
				t.Fatal("still LIFO with an empty queue")
			}
		}
	})
}

func TestPoolDeadlineRefusedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 5, MinDeadlineSlack: 10 * time.Millisecond})
		defer done()
		near, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		ch := make(chan struct{})
		if _, err := b.TryGo(near, func(context.Context) error { <-ch; return nil }); err != nil {
			t.Fatalf("a free worker must not look at the deadline: %v", err)
		}
		synctest.Wait()
		_, err := b.TryGo(near, func(context.Context) error { return nil })
		wantFull(t, "a task that would queue", err, bulkhead.ReasonDeadline, false)
		_, err = b.Go(near, func(context.Context) error { return nil })
		wantFull(t, "a submitter that would queue", err, bulkhead.ReasonDeadline, false)
		if near.Err() != nil {
			t.Fatal("the refusal waited for the context")
		}
		close(ch)
		if s := b.Stats(); s.RejectedBy[bulkhead.ReasonDeadline] != 2 || s.Rejected != 2 {
			t.Fatalf("stats %+v", s)
		}
	})
}

// A task queued with a 50ms deadline and 10ms of slack is dropped at 40ms,
// not started by the worker that frees at 45ms, which starts the next.
func TestPoolDropsTaskThatCannotFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 5, MinDeadlineSlack: 10 * time.Millisecond})
		defer done()
		release := hold(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		var ran atomic.Bool
		doomed, err := b.TryGo(ctx, func(context.Context) error { ran.Store(true); return nil })
		if err != nil {
			t.Fatal(err)
		}
		next := order(t, b, 1)
		dropped := make(chan time.Duration, 1)
		doomed.OnComplete(func(struct{}, error) { dropped <- time.Since(start) })
		time.Sleep(45 * time.Millisecond)
		_, err = doomed.Result()
		wantFull(t, "the doomed task", err, bulkhead.ReasonDeadline, true)
		if at := <-dropped; at != 40*time.Millisecond {
			t.Fatalf("dropped at %v, want 40ms", at)
		}
		release()
		if ran.Load() || !sameInts(*next, []int{1}) {
			t.Fatalf("ran the doomed task %v; the next started: %v", ran.Load(), *next)
		}
	})
}

// A worker freed at the very moment a queued task's deadline (less the
// slack) comes never starts it, whichever runs first: the queue's timer or
// the worker.
func TestPoolDeadlineRaceWithFreedWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 5, MinDeadlineSlack: 10 * time.Millisecond})
		defer done()
		release := hold(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		var ran atomic.Bool
		f, err := b.TryGo(ctx, func(context.Context) error { ran.Store(true); return nil })
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(40 * time.Millisecond)
		release()
		_, err = f.Result()
		wantFull(t, "the task", err, bulkhead.ReasonDeadline, true)
		if ran.Load() {
			t.Fatal("started a task its deadline could not use")
		}
	})
}

// The head rule: a queued task that leaves (its future cancelled, its
// deadline passed and its timer run) never holds up the tasks behind it,
// in either order. A context's end, and a timer late for its lock, are
// TestPoolContextEndedHeadNeverStarts and
// TestPoolExpiredHeadNeverStartsBeforeItsTimer.
func TestPoolFutureCancelledOrTimedOutHeadDoesNotBlock(t *testing.T) {
	for _, o := range []bulkhead.QueueOrder{bulkhead.FIFO, bulkhead.LIFO} {
		t.Run(o.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 5, QueueTimeout: time.Hour,
					QueueOrder: o, MinDeadlineSlack: time.Millisecond})
				defer done()
				release := hold(t, b)
				dctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				defer cancel()
				var next *[]int
				if o == bulkhead.LIFO { // the leavers are the newest: the ones LIFO would serve first
					next = order(t, b, 1)
				}
				var fs []*future.Future[struct{}]
				for _, ctx := range []context.Context{context.Background(), dctx} {
					f, err := b.TryGo(ctx, func(context.Context) error { return nil })
					if err != nil {
						t.Fatal(err)
					}
					fs = append(fs, f)
				}
				if o == bulkhead.FIFO { // the leavers are the oldest: the ones FIFO would serve first
					next = order(t, b, 1)
				}
				fs[0].Cancel()
				time.Sleep(20 * time.Millisecond)
				if _, err := fs[0].Result(); !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled: %v", err)
				}
				_, err := fs[1].Result()
				wantFull(t, "expired", err, bulkhead.ReasonDeadline, true)
				release()
				if !sameInts(*next, []int{1}) {
					t.Fatalf("the task behind a cancelled and an expired one did not start: %v", *next)
				}
				if s := b.Stats(); s.QueueDepth != 0 || s.InFlight != 0 || s.Finished != 2 {
					t.Fatalf("stats %+v", s)
				}
			})
		})
	}
}

// load submits tasks every gap for span, each running service, and
// returns how many CoDel dropped; it fails the test if one of those had
// waited 2*target or less.
func load(t *testing.T, b *pool.Bulkhead, gap, span, service, target time.Duration) (shed int) {
	t.Helper()
	type call struct {
		f  *future.Future[struct{}]
		at chan time.Duration // from submission to completion, sent by the future's callback
	}
	var calls []*call
	for x := time.Duration(0); x < span; x += gap {
		start := time.Now()
		f, err := b.TryGo(context.Background(), func(context.Context) error { time.Sleep(service); return nil })
		if err != nil {
			t.Fatal(err)
		}
		c := &call{f: f, at: make(chan time.Duration, 1)}
		f.OnComplete(func(struct{}, error) { c.at <- time.Since(start) })
		calls = append(calls, c)
		time.Sleep(gap)
	}
	for _, c := range calls {
		at := <-c.at
		_, err := c.f.Result()
		var fe *bulkhead.FullError
		switch {
		case errors.As(err, &fe) && fe.Reason == bulkhead.ReasonCoDel && fe.Waited:
			if at <= 2*target {
				t.Fatalf("shed by CoDel after only %v", at)
			}
			shed++
		case err != nil:
			t.Fatal(err)
		}
	}
	return shed
}

// CoDel (5ms, 100ms) on the pool's queue: a burst that drains within the
// interval sheds nothing; a standing queue (arrivals twice as fast as
// service) is shed; light load afterwards sheds nothing.
func TestPoolCoDelShedsAStandingQueueAndSparesABurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1000, QueueTimeout: time.Second,
			CoDel: &bulkhead.CoDel{}})
		defer done()
		target := 5 * time.Millisecond
		if shed := load(t, b, time.Nanosecond, 15*time.Nanosecond, 5*time.Millisecond, target); shed != 0 {
			t.Fatalf("a burst that drains within the interval: %d shed", shed)
		}
		time.Sleep(time.Second)
		standing := load(t, b, 2*time.Millisecond, 400*time.Millisecond, 4*time.Millisecond, target)
		if standing == 0 {
			t.Fatal("a standing queue was not shed")
		}
		if s := b.Stats(); s.RejectedBy[bulkhead.ReasonCoDel] != uint64(standing) || s.Rejected != uint64(standing) {
			t.Fatalf("stats after the standing queue: %+v", s)
		}
		if shed := load(t, b, 6*time.Millisecond, 400*time.Millisecond, 4*time.Millisecond, target); shed != 0 {
			t.Fatalf("light load after the standing queue: %d shed", shed)
		}
		if s := b.Stats(); s.Overloaded {
			t.Fatalf("still overloaded: %+v", s)
		}
	})
}

func TestPoolValidateQueueFields(t *testing.T) {
	base := pool.Config{MaxWorkers: 1, QueueCapacity: 4, QueueTimeout: time.Second}
	for _, c := range []struct {
		mod  func(*pool.Config)
		want string
	}{
		{func(c *pool.Config) { c.MaxWaitingCalls = -1 }, "maxWaitingCalls must be >= 0, got -1"},
		{func(c *pool.Config) { c.MinDeadlineSlack = -1 }, "minDeadlineSlack must be >= 0, got -1ns"},
		{func(c *pool.Config) { c.QueueOrder = 5 }, "queueOrder must be fifo, lifo or adaptiveLifo, got QueueOrder(5)"},
		{func(c *pool.Config) { c.LIFOThreshold = 2 }, "lifoThreshold 2 applies only to queueOrder adaptiveLifo"},
		{func(c *pool.Config) { c.QueueOrder = bulkhead.AdaptiveLIFO }, "queueOrder adaptiveLifo needs lifoThreshold > 0 or codel"},
		{func(c *pool.Config) { c.QueueOrder, c.QueueTimeout = bulkhead.LIFO, 0 }, "queueOrder lifo needs queueTimeout > 0 (a bounded wait), got 0"},
		{func(c *pool.Config) { c.QueueOrder, c.QueueCapacity = bulkhead.LIFO, 0 }, "queueOrder lifo needs queueCapacity > 0"},
		{func(c *pool.Config) { c.CoDel, c.QueueCapacity = &bulkhead.CoDel{}, 0 }, "codel needs queueCapacity > 0"},
		{func(c *pool.Config) { c.CoDel = &bulkhead.CoDel{Target: time.Second} }, "codel.target must be shorter than codel.interval"},
	} {
		cfg := base
		c.mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want %q", cfg, err, c.want)
		}
	}
	ok := base
	ok.MaxWaitingCalls, ok.MinDeadlineSlack, ok.QueueOrder, ok.LIFOThreshold = 2, time.Millisecond, bulkhead.AdaptiveLIFO, 2
	ok.CoDel = &bulkhead.CoDel{}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

// lateCtx is a context whose AfterFunc callbacks run only when runLate is
// called: it holds open the moment between a context's end (Done closed,
// Err set) and the goroutine context.AfterFunc starts for it.
type lateCtx struct {
	context.Context // Background: no deadline, no values
	done            chan struct{}
	fs              []func() // nil once stopped or run
}

func newLateCtx() *lateCtx {
	return &lateCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *lateCtx) Done() <-chan struct{} { return c.done }
func (c *lateCtx) cancel()               { close(c.done) }
func (c *lateCtx) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}

// AfterFunc is what context.AfterFunc calls on a context that has it.
// Only the test and the pool's submitter use c, under the pool's lock or
// before the pool sees c, so fs needs no lock of its own in these tests.
func (c *lateCtx) AfterFunc(f func()) (stop func() bool) {
	i := len(c.fs)
	c.fs = append(c.fs, f)
	return func() bool {
		ok := c.fs[i] != nil
		c.fs[i] = nil
		return ok
	}
}

// runLate runs the callbacks not stopped, on goroutines of their own.
func (c *lateCtx) runLate() {
	for i, f := range c.fs {
		if f != nil {
			c.fs[i] = nil
			go f()
		}
	}
}

// The head rule when a worker frees before the drop that a queued task's
// context's end starts has run: the worker drops that task, counted
// cancelled with the context's error, and starts the next one.
func TestPoolContextEndedHeadNeverStarts(t *testing.T) {
	for _, o := range []bulkhead.QueueOrder{bulkhead.FIFO, bulkhead.LIFO} {
		t.Run(o.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 2, QueueTimeout: time.Hour, QueueOrder: o})
				defer done()
				release := hold(t, b)
				var next *[]int
				if o == bulkhead.LIFO {
					next = order(t, b, 1)
				}
				lctx := newLateCtx()
				ran := false
				f, err := b.TryGo(lctx, func(context.Context) error { ran = true; return nil })
				if err != nil {
					t.Fatal(err)
				}
				if o == bulkhead.FIFO {
					next = order(t, b, 1)
				}
				lctx.cancel() // its AfterFunc has not run
				release()
				lctx.runLate()
				synctest.Wait()
				if _, err := f.Result(); ran || !errors.Is(err, context.Canceled) {
					t.Fatalf("task whose context had ended: ran %v, err %v", ran, err)
				}
				if !sameInts(*next, []int{1}) {
					t.Fatalf("the task behind it did not start: %v", *next)
				}
				if s := b.Stats(); s.Cancelled != 1 || s.Finished != 2 || s.QueueDepth != 0 {
					t.Fatalf("stats %+v", s)
				}
			})
		})
	}
}

// Issue 24's example for a submitter waiting for room (Go, Bulkhead.Go):
// a 50ms deadline, a 10ms slack, a worker freed at 45ms: the submitter is
// refused at 40ms (reason deadline, waited), and its task neither starts
// nor enters the queue.
func TestPoolWaitingSubmitterRefusedAtDeadlineLessSlack(t *testing.T) {
	for _, queue := range []int{0, 1} {
		for _, method := range []string{"Go", "Bulkhead.Go"} {
			t.Run(fmt.Sprintf("queue %d, %s", queue, method), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: queue, MinDeadlineSlack: 10 * time.Millisecond})
					defer done()
					if _, err := b.TryGo(context.Background(), func(context.Context) error {
						time.Sleep(45 * time.Millisecond)
						return nil
					}); err != nil {
						t.Fatal(err)
					}
					for range queue { // fill the queue
						if _, err := b.TryGo(context.Background(), func(context.Context) error { return nil }); err != nil {
							t.Fatal(err)
						}
					}
					ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
					defer cancel()
					start := time.Now()
					ran := false
					var err error
					if method == "Go" {
						_, err = pool.Go(ctx, b, func(context.Context) (int, error) { ran = true; return 0, nil })
					} else {
						_, err = b.Go(ctx, func(context.Context) error { ran = true; return nil })
					}
					if at := time.Since(start); at != 40*time.Millisecond {
						t.Fatalf("Go returned at %v (err %v), want 40ms", at, err)
					}
					wantFull(t, "the waiting submitter", err, bulkhead.ReasonDeadline, true)
					time.Sleep(10 * time.Millisecond)
					synctest.Wait()
					if s := b.Stats(); ran || s.RejectedBy[bulkhead.ReasonDeadline] != 1 || s.Waiting != 0 || s.Permitted != uint64(1+queue) {
						t.Fatalf("ran %v, stats %+v", ran, s)
					}
				})
			})
		}
	}
}

// CoDel switched on by Reconfigure while tasks are queued measures their
// sojourn from the change, not from the pool's birth: with the same
// schedule it sheds nothing, as it does when configured from the start.
// The pool is a second old first, so that a sojourn measured from its
// birth would be long (stamps are from the pool's birth, in the bubble).
func TestPoolCoDelAddedByReconfigureMeasuresFromTheChange(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprint("late ", late), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := pool.Config{MaxWorkers: 1, QueueCapacity: 10, QueueTimeout: time.Hour}
				codel := &bulkhead.CoDel{Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond}
				if !late {
					cfg.CoDel = codel
				}
				b, done := shedPool(t, cfg)
				defer done()
				time.Sleep(time.Second)
				for _, d := range []time.Duration{time.Millisecond, 100 * time.Millisecond, time.Millisecond} {
					if _, err := b.TryGo(context.Background(), func(context.Context) error { time.Sleep(d); return nil }); err != nil {
						t.Fatal(err)
					}
				}
				if late {
					cfg.CoDel = codel
					if err := b.Reconfigure(cfg); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(80 * time.Millisecond)
				var fs []*future.Future[struct{}]
				for range 3 { // each waits about 22ms, behind the 100ms task: a burst, not a standing line
					f, err := b.TryGo(context.Background(), func(context.Context) error { return nil })
					if err != nil {
						t.Fatal(err)
					}
					fs = append(fs, f)
				}
				time.Sleep(time.Second)
				for i, f := range fs {
					if _, err := f.Result(); err != nil {
						t.Errorf("task %d: %v", i, err)
					}
				}
				if s := b.Stats(); s.RejectedBy[bulkhead.ReasonCoDel] != 0 || s.Finished != 6 {
					t.Fatalf("stats %+v", s)
				}
			})
		})
	}
}

// The head rule in a keyed pool: a worker that frees before the drop that
// a queued task's context's end starts has run drops that task (counted
// cancelled) and starts the next lane's head.
func TestKeyedPoolStaleHeadNeverStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, err := pool.NewKeyed[string]("test", pool.KeyedConfig{Config: pool.Config{MaxWorkers: 1, QueueCapacity: 4, QueueTimeout: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close(context.Background())
		hold := make(chan struct{})
		if _, err := pool.SubmitKeyed(context.Background(), k, "a", func(context.Context) (int, error) { <-hold; return 0, nil }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		lctx := newLateCtx()
		ran := false
		f, err := pool.SubmitKeyed(lctx, k, "b", func(context.Context) (int, error) { ran = true; return 0, nil })
		if err != nil {
			t.Fatal(err)
		}
		next, err := pool.SubmitKeyed(context.Background(), k, "c", func(context.Context) (int, error) { return 3, nil })
		if err != nil {
			t.Fatal(err)
		}
		lctx.cancel() // its AfterFunc has not run
		close(hold)
		synctest.Wait()
		lctx.runLate()
		synctest.Wait()
		if _, err := f.Result(); ran || !errors.Is(err, context.Canceled) {
			t.Fatalf("task whose context had ended: ran %v, err %v", ran, err)
		}
		if v, err := next.Result(); v != 3 || err != nil {
			t.Fatalf("the next lane's task: %v, %v", v, err)
		}
		if s := k.Stats(); s.Cancelled != 1 || s.Finished != 2 || s.QueueDepth != 0 {
			t.Fatalf("stats %+v", s)
		}
	})
}
