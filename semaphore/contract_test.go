package semaphore_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/internal/semtest"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// acquirers are the ways to take a permit that publish EventPermitted after
// taking it, each with the way to give it back.
var acquirers = map[string]func(b *semaphore.Bulkhead) (release func(), ok bool){
	"TryAcquire": func(b *semaphore.Bulkhead) (func(), bool) { return b.Release, b.TryAcquire() },
	"Acquire": func(b *semaphore.Bulkhead) (func(), bool) {
		return b.Release, b.Acquire(context.Background()) == nil
	},
	"AcquirePermit": func(b *semaphore.Bulkhead) (func(), bool) {
		p, err := b.AcquirePermit(context.Background())
		return func() { p.Release(nil) }, err == nil
	},
	"Do": func(b *semaphore.Bulkhead) (func(), bool) {
		return func() {}, b.Do(context.Background(), func(context.Context) error { return nil }) == nil
	},
}

// A subscriber that panics or calls runtime.Goexit on EventPermitted ends
// the call before its caller gets the permit: the bulkhead gives the permit
// back first. The callback contract lets such a panic go on up the caller's
// goroutine (the hub does not recover it): the caller of Acquire never
// gets a permit back, and the panic reaches it.
func TestSubscriberPanicOrGoexitOnPermittedKeepsPermits(t *testing.T) {
	for name, acquire := range acquirers {
		for _, how := range []string{"panic", "Goexit"} {
			t.Run(name+"/"+how, func(t *testing.T) {
				b := mustNew(t, 1, time.Hour)
				cancel := b.Subscribe(func(e bulkhead.Event) {
					if e.Type != bulkhead.EventPermitted {
						return
					}
					if how == "panic" {
						panic("subscriber bug")
					}
					runtime.Goexit()
				})
				var wg sync.WaitGroup
				wg.Go(func() {
					defer func() {
						r := recover()
						if how == "panic" && r != "subscriber bug" {
							t.Errorf("recovered %v, want the subscriber's panic", r)
						}
						if how == "Goexit" && r != nil {
							t.Errorf("recovered %v after a Goexit", r)
						}
					}()
					acquire(b)
					t.Errorf("acquire returned although its subscriber ended the goroutine (%s)", how)
				})
				wg.Wait()
				cancel()
				// Whatever happened above, no permit is held and the bulkhead
				// works: one caller gets the only permit.
				if s := b.Stats(); s.InFlight != 0 || s.Permitted != s.Finished || s.Permitted != 1 {
					t.Fatalf("after the subscriber's %s: %+v", how, s)
				}
				release, ok := acquire(b)
				if !ok {
					t.Fatal("no permit to be had afterwards")
				}
				release()
				if s := b.Stats(); s.InFlight != 0 || s.Finished != 2 || s.Failed != 0 {
					t.Fatalf("at rest: %+v", s)
				}
			})
		}
	}
}

// A runtime.Goexit in the guarded function counts as a failure, as in a
// pool, and its EventFinished says so.
func TestGoexitInFunctionCountsFailed(t *testing.T) {
	b := mustNew(t, 1, 0)
	var finished []error
	b.Subscribe(func(e bulkhead.Event) {
		if e.Type == bulkhead.EventFinished {
			finished = append(finished, e.Err)
		}
	})
	var wg sync.WaitGroup
	wg.Go(func() {
		b.Do(context.Background(), func(context.Context) error { runtime.Goexit(); return nil })
	})
	wg.Wait()
	semtest.AtRest(t, b, 1, 0, 0, 1)
	if len(finished) != 1 || finished[0] == nil || !strings.Contains(finished[0].Error(), "Goexit") {
		t.Fatalf("EventFinished errors %v, want one naming runtime.Goexit", finished)
	}
}

// Reconfigure publishes EventLimitChanged with the new limit when the limit
// changes, and nothing when only MaxWaitDuration does.
func TestReconfigurePublishesLimitChanged(t *testing.T) {
	b := mustNew(t, 2, 0)
	var got []bulkhead.Event
	b.Subscribe(func(e bulkhead.Event) { got = append(got, e) })
	b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 5})
	b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 5, MaxWaitDuration: time.Second})
	b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 3, MaxWaitDuration: time.Second})
	if len(got) != 2 {
		t.Fatalf("events %v, want two limit changes", got)
	}
	for i, want := range []int{5, 3} {
		if e := got[i]; e.Type != bulkhead.EventLimitChanged || e.Limit != want || e.Name != "test" ||
			e.Kind != bulkhead.Semaphore || e.Time.IsZero() {
			t.Errorf("event %d: %+v, want the limit changed to %d", i, e, want)
		}
	}
}

// Waiters keep the deadline they started with: after Reconfigure shortens
// MaxWaitDuration, a newer waiter may time out before an older one, and
// each is rejected exactly at its own deadline.
func TestWaitersKeepTheirOwnDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1, time.Hour)
		b.Acquire(context.Background())
		type result struct {
			id    int
			err   error
			after time.Duration
		}
		results := make(chan result, 4)
		wait := func(id int) {
			start := time.Now()
			err := b.Acquire(context.Background())
			results <- result{id, err, time.Since(start)}
		}
		go wait(0) // one hour
		synctest.Wait()
		b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: 30 * time.Millisecond})
		go wait(1) // 30ms
		time.Sleep(10 * time.Millisecond)
		go wait(2) // 30ms, from 10ms on
		synctest.Wait()
		b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: 5 * time.Millisecond})
		go wait(3) // 5ms, from 10ms on
		var fe *bulkhead.FullError
		for _, want := range []result{{3, nil, 5 * time.Millisecond}, {1, nil, 30 * time.Millisecond}, {2, nil, 30 * time.Millisecond}} {
			r := <-results
			if r.id != want.id || !errors.As(r.err, &fe) || !fe.Waited || r.after != want.after {
				t.Fatalf("waiter %d: %v after %v; want waiter %d rejected after %v", r.id, r.err, r.after, want.id, want.after)
			}
		}
		synctest.Wait()
		if s := b.Stats(); s.Waiting != 1 {
			t.Fatalf("the first waiter should still wait: %+v", s)
		}
		b.Release()
		if r := <-results; r.id != 0 || r.err != nil || r.after != 40*time.Millisecond {
			t.Fatalf("first waiter: %v after %v, want the permit after 40ms", r.err, r.after)
		}
		b.Release()
		semtest.AtRest(t, b, 2, 3, 0, 0)
	})
}

// Many waiters time out in line, each exactly MaxWaitDuration after it
// started waiting, with one timer for the bulkhead.
func TestWaitersTimeOutInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1, 50*time.Millisecond)
		b.Acquire(context.Background())
		const n = 20
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				start := time.Now()
				err := b.Acquire(context.Background())
				if d := time.Since(start); !errors.Is(err, bulkhead.ErrBulkheadFull) || d != 50*time.Millisecond {
					t.Errorf("waiter %d: %v after %v, want a rejection after 50ms", i, err, d)
				}
			})
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
		b.Release()
		semtest.AtRest(t, b, 1, n, 0, 0)
	})
}

// A call that waits allocates two objects, its place in line and the
// channel it waits on; there is no timer per waiter, but a new line gets a
// new timer (three allocations more; see queueLocked). Here every waiter
// waits alone, so each starts a line: at most five. A waiter that joins a
// line makes two (bench group 8, a line of 10,000).
func TestBlockedAcquireAllocatesAtMostFiveAlone(t *testing.T) {
	b := mustNew(t, 1, time.Hour)
	b.Acquire(context.Background())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // hands the permit to each waiter in turn
		for {
			select {
			case <-stop:
				return
			default:
			}
			if b.Stats().Waiting == 1 {
				b.Release()
			}
			runtime.Gosched()
		}
	})
	n := testing.AllocsPerRun(200, func() {
		if err := b.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	close(stop)
	wg.Wait()
	b.Release()
	if n > 5 {
		t.Fatalf("a blocked Acquire that waits alone allocates %v times, want at most 5", n)
	}
}

// The waiters that listen to the bulkhead's timer may leave the line first
// (here by cancellation); the rest still time out exactly on time.
func TestWaitersTimeOutAfterTheWatchersLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1, 50*time.Millisecond)
		b.Acquire(context.Background())
		const n = 5
		cancels := make([]context.CancelFunc, n)
		errs := make([]chan error, n)
		for i := range n {
			ctx, cancel := context.WithCancel(context.Background())
			cancels[i], errs[i] = cancel, make(chan error, 1)
			go func() { errs[i] <- b.Acquire(ctx) }()
			synctest.Wait()
			time.Sleep(time.Millisecond)
		}
		// The first two are the ones listening to the timer.
		cancels[0]()
		cancels[1]()
		for i := range 2 {
			if err := <-errs[i]; err != context.Canceled {
				t.Fatalf("waiter %d: %v, want context.Canceled", i, err)
			}
		}
		start := time.Now() // 5ms after the first waiter began
		for i := 2; i < n; i++ {
			if err := <-errs[i]; !errors.Is(err, bulkhead.ErrBulkheadFull) {
				t.Fatalf("waiter %d: %v, want a rejection", i, err)
			}
			if d, want := time.Since(start), time.Duration(50+i-n)*time.Millisecond; d != want {
				t.Fatalf("waiter %d rejected after %v, want %v", i, d, want)
			}
		}
		for _, c := range cancels {
			c()
		}
		b.Release()
		semtest.AtRest(t, b, 1, n-2, 2, 0)
	})
}

// ReconfigureFunc hands f the configuration in force, applies what f
// returns (publishing the new limit), changes and publishes nothing when f
// returns false, and refuses an invalid result naming the field.
func TestReconfigureFunc(t *testing.T) {
	b := mustNew(t, 2, 0)
	var got []int
	b.Subscribe(func(e bulkhead.Event) { got = append(got, e.Limit) })
	var seen semaphore.Config
	if err := b.ReconfigureFunc(func(c semaphore.Config) (semaphore.Config, bool) {
		seen = c
		c.MaxConcurrentCalls = 5
		return c, true
	}); err != nil || seen.MaxConcurrentCalls != 2 || b.Config().MaxConcurrentCalls != 5 {
		t.Fatalf("err %v, f saw %+v, now %+v; want 2 seen and 5 applied", err, seen, b.Config())
	}
	if err := b.ReconfigureFunc(func(c semaphore.Config) (semaphore.Config, bool) {
		return semaphore.Config{MaxConcurrentCalls: 9}, false
	}); err != nil || b.Config().MaxConcurrentCalls != 5 {
		t.Fatalf("f returned false: err %v, limit %d, want nil and 5", err, b.Config().MaxConcurrentCalls)
	}
	err := b.ReconfigureFunc(func(c semaphore.Config) (semaphore.Config, bool) { c.MaxConcurrentCalls = -1; return c, true })
	if err == nil || !strings.Contains(err.Error(), "maxConcurrentCalls must be >= 1, got -1") || b.Config().MaxConcurrentCalls != 5 {
		t.Fatalf("invalid result: err %v, limit %d", err, b.Config().MaxConcurrentCalls)
	}
	if len(got) != 1 || got[0] != 5 {
		t.Fatalf("limit events %v, want [5]", got)
	}
}
