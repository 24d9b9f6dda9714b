package semaphore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

func prio(p bulkhead.Priority) context.Context {
	return bulkhead.WithPriority(context.Background(), p)
}

// reason returns the Reason of a refusal, or ReasonNone.
func reason(err error) bulkhead.Reason {
	var fe *bulkhead.FullError
	if errors.As(err, &fe) {
		return fe.Reason
	}
	return bulkhead.ReasonNone
}

// Waiters are served highest priority first, first in, first out within a
// priority: with the only permit held, waiters join as Sheddable,
// Critical, Sheddable, CriticalPlus and get it as CriticalPlus, Critical,
// and the Sheddables in the order they came.
func TestPriorityGrantOrder(t *testing.T) {
	b, err := semaphore.New("order", semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour,
		Priorities: &bulkhead.Priorities{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i, w := range []struct {
		name string
		p    bulkhead.Priority
	}{{"S1", bulkhead.Sheddable}, {"C1", bulkhead.Critical}, {"S2", bulkhead.Sheddable}, {"CP1", bulkhead.CriticalPlus}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := b.Do(prio(w.p), func(context.Context) error {
				got <- w.name
				<-release
				return nil
			})
			if err != nil {
				t.Errorf("%s: %v", w.name, err)
			}
		}()
		waitFor(t, "the waiter in line", func() bool { return b.Stats().Waiting == i+1 })
	}
	b.Release()
	var order []string
	for range 4 {
		order = append(order, <-got)
		release <- struct{}{}
	}
	wg.Wait()
	if want := []string{"CP1", "C1", "S1", "S2"}; !equal(order, want) {
		t.Fatalf("granted %v, want %v", order, want)
	}
}

func equal(a, b []string) bool {
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

// The capacity above a class's ceiling is reserved for higher classes: a
// class is refused (ReasonPriority) only when every lower one is, and only
// a full bulkhead refuses with ReasonFull.
func TestPriorityReservedHeadroom(t *testing.T) {
	b, err := semaphore.New("headroom", semaphore.Config{MaxConcurrentCalls: 10,
		Priorities: &bulkhead.Priorities{Critical: 0.9}})
	if err != nil {
		t.Fatal(err)
	}
	admit := func(p bulkhead.Priority, n int, refusal bulkhead.Reason) {
		t.Helper()
		for i := range n {
			if err := b.Acquire(prio(p)); err != nil {
				t.Fatalf("%v call %d refused: %v (in flight %d)", p, i+1, err, b.Stats().InFlight)
			}
		}
		for _, q := range []bulkhead.Priority{bulkhead.Sheddable, bulkhead.SheddablePlus, bulkhead.Critical, bulkhead.CriticalPlus} {
			if q > p {
				break
			}
			err := b.Acquire(prio(q))
			if r := reason(err); r != refusal && q == p || q < p && err == nil {
				t.Fatalf("at %d in flight, %v: %v (reason %v), want %v", b.Stats().InFlight, q, err, r, refusal)
			}
		}
	}
	admit(bulkhead.Sheddable, 5, bulkhead.ReasonPriority)     // 0.5 of 10
	admit(bulkhead.SheddablePlus, 3, bulkhead.ReasonPriority) // to 0.8
	if !b.TryAcquire() {                                      // TryAcquire is Critical: the 9th
		t.Fatal("TryAcquire (Critical) refused at 8 of 10")
	}
	if b.TryAcquire() {
		t.Fatal("TryAcquire (Critical) took the permit reserved for CriticalPlus")
	}
	admit(bulkhead.CriticalPlus, 1, bulkhead.ReasonFull)
	s := b.Stats()
	if s.MaxConcurrentCalls != 10 || s.InFlight != 10 || s.AvailableConcurrentCalls != 0 {
		t.Fatalf("Stats %+v", s)
	}
	if s.RejectedBy[bulkhead.ReasonPriority] == 0 || s.RejectedBy[bulkhead.ReasonFull] == 0 {
		t.Fatalf("rejections by reason %v", s.RejectedBy)
	}
	// A larger limit moves the ceilings with it.
	cfg := b.Config()
	cfg.MaxConcurrentCalls = 20
	if err := b.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(prio(bulkhead.Sheddable)); reason(err) != bulkhead.ReasonPriority {
		t.Fatalf("Sheddable at 10 of 20: %v", err)
	}
	if err := b.Acquire(prio(bulkhead.SheddablePlus)); err != nil {
		t.Fatalf("SheddablePlus at 10 of 20: %v", err)
	}
	for range 11 {
		b.Release()
	}
	if s := b.Stats(); s.InFlight != 0 || s.MaxConcurrentCalls != 20 {
		t.Fatalf("Stats at rest %+v", s)
	}
}

// A waiter of a lower class does not hold up a call of a higher class that
// its ceiling admits, and a lower class never jumps a higher one in line.
func TestPriorityHigherClassPassesLowerWaiters(t *testing.T) {
	b, _ := semaphore.New("pass", semaphore.Config{MaxConcurrentCalls: 2, MaxWaitDuration: time.Hour,
		Priorities: &bulkhead.Priorities{}})
	if err := b.Acquire(prio(bulkhead.Sheddable)); err != nil { // Sheddable's ceiling: 1 of 2
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Acquire(prio(bulkhead.Sheddable)) }()
	waitFor(t, "the Sheddable waiter", func() bool { return b.Stats().Waiting == 1 })
	if err := b.Acquire(prio(bulkhead.Critical)); err != nil {
		t.Fatalf("Critical behind a Sheddable waiter: %v", err)
	}
	b.Release() // the Critical one: 1 in flight, the Sheddable waiter's ceiling
	select {
	case err := <-done:
		t.Fatalf("the Sheddable waiter got in at its ceiling: %v", err)
	default:
	}
	b.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b.Release()
}

// Aging bounds a Sheddable waiter's wait under a stream of CriticalPlus
// calls that alone would keep the bulkhead busy for ever; without aging it
// waits for the whole stream, by choice.
func TestPriorityAgingNoStarvation(t *testing.T) {
	const aging, run, every, stream = 100 * time.Millisecond, 15 * time.Millisecond, 10 * time.Millisecond, 100
	wait := func(aging time.Duration) (time.Duration, time.Duration) {
		var waited, total time.Duration
		synctest.Test(t, func(t *testing.T) {
			b, _ := semaphore.New("aging", semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour,
				Priorities: &bulkhead.Priorities{Aging: aging}})
			start := time.Now()
			var wg sync.WaitGroup
			call := func() {
				defer wg.Done()
				b.Do(prio(bulkhead.CriticalPlus), func(context.Context) error { time.Sleep(run); return nil })
			}
			wg.Add(1)
			go call() // busy before the Sheddable call comes
			synctest.Wait()
			wg.Add(1)
			go func() {
				defer wg.Done()
				joined := time.Now()
				b.Do(prio(bulkhead.Sheddable), func(context.Context) error { waited = time.Since(joined); return nil })
			}()
			for range stream {
				time.Sleep(every)
				wg.Add(1)
				go call()
			}
			wg.Wait()
			total = time.Since(start)
		})
		return waited, total
	}
	if waited, _ := wait(aging); waited > 3*aging+2*run {
		t.Fatalf("with Aging %v the Sheddable call waited %v, want at most %v", aging, waited, 3*aging+2*run)
	}
	if waited, total := wait(0); waited < total-2*run {
		t.Fatalf("without aging the Sheddable call waited %v of the stream's %v: it should wait for all of it", waited, total)
	}
}

// Under a storm of calls of every class, with waiting, timeouts and
// cancellations, the limit holds and nothing is lost.
func TestPriorityStress(t *testing.T) {
	const limit = 6
	b, _ := semaphore.New("storm", semaphore.Config{MaxConcurrentCalls: limit, MaxWaitDuration: time.Millisecond,
		Priorities: &bulkhead.Priorities{Sheddable: 0.3, Aging: time.Millisecond}})
	var in, high, ran atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 400 {
				ctx, cancel := context.WithTimeout(prio(bulkhead.Priority(r.IntN(4)-2)), time.Duration(r.IntN(300))*time.Microsecond)
				b.Do(ctx, func(context.Context) error {
					ran.Add(1)
					n := in.Add(1)
					for m := high.Load(); n > m && !high.CompareAndSwap(m, n); m = high.Load() {
					}
					if r.IntN(3) == 0 {
						time.Sleep(50 * time.Microsecond)
					}
					in.Add(-1)
					return nil
				})
				cancel()
			}
		}()
	}
	wg.Wait()
	s := b.Stats()
	if high.Load() > limit || s.InFlight != 0 || s.Waiting != 0 || s.Permitted != s.Finished ||
		s.Permitted != uint64(ran.Load()) || s.Permitted+s.Rejected+s.Cancelled > 8*400 {
		t.Fatalf("high water %d, Stats %+v", high.Load(), s)
	}
}

func TestPriorityConfig(t *testing.T) {
	p := &bulkhead.Priorities{Sheddable: 0.9}
	if _, err := semaphore.New("bad", semaphore.Config{MaxConcurrentCalls: 2, Priorities: p}); err == nil ||
		err.Error() != `semaphore "bad": priorities: sheddable (0.9) must not exceed sheddablePlus (0.8, the default)` {
		t.Fatalf("New: %v", err)
	}
	p.Sheddable = 0.2
	b, err := semaphore.New("good", semaphore.Config{MaxConcurrentCalls: 2, Priorities: p})
	if err != nil {
		t.Fatal(err)
	}
	p.Sheddable = 0.7 // the bulkhead keeps its copy
	if got := b.Config().Priorities; got.Sheddable != 0.2 || got == p {
		t.Fatalf("Config().Priorities = %+v", got)
	}
	if _, err := semaphore.NewKeyed[string]("k", semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: 1, Priorities: p}}); err == nil {
		t.Fatal("a keyed bulkhead took priorities")
	}
}
