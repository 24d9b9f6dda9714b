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

// named is the outcome of one caller's Acquire.
type named struct {
	name string
	err  error
}

// joinLine starts a caller of priority p that acquires on b and reports on
// got, and returns once it waits (or is done): call it inside a bubble.
func joinLine(b *semaphore.Bulkhead, got chan<- named, name string, p bulkhead.Priority) {
	go func() { got <- named{name, b.Acquire(prio(p))} }()
	synctest.Wait()
}

// calm runs f and reports a panic as a test failure, so that the rest of
// the test can look at what it left behind.
func calm(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	f()
}

// releaseOrder releases the permit held n times, taking the name of the
// caller each release serves, and releases that caller's permit at the end.
func releaseOrder(t *testing.T, b *semaphore.Bulkhead, got <-chan named, n int) []string {
	t.Helper()
	var order []string
	for range n {
		calm(t, "Release", b.Release)
		r := <-got
		if r.err != nil {
			t.Fatalf("%s: %v", r.name, r.err)
		}
		order = append(order, r.name)
	}
	b.Release()
	return order
}

// Reconfigure that switches Priorities off while callers of several
// classes wait keeps every one of them in line, in the order they joined:
// a raised limit serves the oldest, and each Release the next. (It used to
// dereference nil: the waiters sat in lanes the unprioritized line does not
// read, so the permit taken for them was lost, or Release panicked holding
// the lock.) A registry reload that drops `priorities:` takes this path.
func TestPriorityReconfigureOffKeepsWaiters(t *testing.T) {
	for _, raise := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			b, err := semaphore.New("off", semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour,
				Priorities: &bulkhead.Priorities{}})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Acquire(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := make(chan named, 3)
			for _, c := range []struct {
				name string
				p    bulkhead.Priority
			}{{"S", bulkhead.Sheddable}, {"CP", bulkhead.CriticalPlus}, {"SP", bulkhead.SheddablePlus}} {
				joinLine(b, got, c.name, c.p)
				time.Sleep(time.Millisecond) // the next joins later (the bubble's clock stands still otherwise)
			}
			cfg := semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour}
			if raise {
				cfg.MaxConcurrentCalls = 2
			}
			calm(t, "Reconfigure", func() {
				if err := b.Reconfigure(cfg); err != nil {
					t.Errorf("Reconfigure without Priorities: %v", err)
				}
			})
			synctest.Wait()
			var order []string
			if raise { // the new permit goes to the oldest waiter at once
				select {
				case r := <-got:
					if r.err != nil {
						t.Fatalf("%s: %v", r.name, r.err)
					}
					order = append(order, r.name)
				default:
					t.Fatalf("a permit came free and nobody got it: %+v", b.Stats())
				}
			}
			order = append(order, releaseOrder(t, b, got, 3-len(order))...)
			if raise {
				b.Release() // the one that took the new permit
			}
			if want := []string{"S", "CP", "SP"}; !equal(order, want) {
				t.Errorf("raise %v: granted %v, want %v (the order they joined)", raise, order, want)
			}
			if s := b.Stats(); s.InFlight != 0 || s.Waiting != 0 {
				t.Errorf("at rest: %+v", s)
			}
		})
	}
}

// Priorities with a LIFO line and Aging: the line serves the highest class
// first, an aged waiter included, and LIFO orders waiters of one class. A
// Sheddable caller that has just arrived must not take the turn of an older
// Sheddable waiter that Aging raised to CriticalPlus (the line used to pick
// the lane by its aged head and then serve the lane's newest).
func TestPriorityAgingWithLIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := semaphore.New("lifo", semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour,
			QueueOrder: bulkhead.LIFO, Priorities: &bulkhead.Priorities{Aging: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := make(chan named, 4)
		joinLine(b, got, "old S", bulkhead.Sheddable)
		time.Sleep(5 * time.Second) // Aging raised it to CriticalPlus
		joinLine(b, got, "C", bulkhead.Critical)
		joinLine(b, got, "new S1", bulkhead.Sheddable)
		joinLine(b, got, "new S2", bulkhead.Sheddable)
		order := releaseOrder(t, b, got, 4)
		// old S (CriticalPlus by Aging), C, then the Sheddables newest first.
		if want := []string{"old S", "C", "new S2", "new S1"}; !equal(order, want) {
			t.Errorf("granted %v, want %v", order, want)
		}
	})
}

// With Priorities, a full line (MaxWaitingCalls) does not lock a higher
// class out: a newcomer displaces the newest waiter of the lowest class
// below its own (ReasonDisplaced, Waited), and one with nobody lower
// waiting is refused as before (ReasonWaiters).
func TestPriorityMaxWaitingDisplaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := semaphore.New("cap", semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour,
			MaxWaitingCalls: 2, Priorities: &bulkhead.Priorities{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := make(chan named, 8)
		joinLine(b, got, "S1", bulkhead.Sheddable)
		joinLine(b, got, "S2", bulkhead.Sheddable)
		refused := func(name string, want bulkhead.Reason, waited bool) {
			t.Helper()
			select {
			case r := <-got:
				fe, ok := asFull(r.err)
				if r.name != name || !ok || fe.Reason != want || fe.Waited != waited {
					t.Fatalf("%s: %v, want %s refused with %v (waited %v)", r.name, r.err, name, want, waited)
				}
			default:
				t.Fatalf("%s was not refused: %+v", name, b.Stats())
			}
		}
		joinLine(b, got, "S3", bulkhead.Sheddable) // an equal class: refused at once
		refused("S3", bulkhead.ReasonWaiters, false)
		joinLine(b, got, "CP", bulkhead.CriticalPlus) // displaces the newest Sheddable
		refused("S2", bulkhead.ReasonDisplaced, true)
		joinLine(b, got, "SP", bulkhead.SheddablePlus) // displaces the last Sheddable
		refused("S1", bulkhead.ReasonDisplaced, true)
		joinLine(b, got, "S4", bulkhead.Sheddable) // nobody lower waits
		refused("S4", bulkhead.ReasonWaiters, false)
		s := b.Stats()
		if s.Waiting != 2 || s.RejectedBy[bulkhead.ReasonDisplaced] != 2 || s.RejectedBy[bulkhead.ReasonWaiters] != 2 {
			t.Fatalf("stats %+v", s)
		}
		if order := releaseOrder(t, b, got, 2); !equal(order, []string{"CP", "SP"}) {
			t.Errorf("granted %v, want [CP SP]", order)
		}
	})
}

// With Priorities and a LIFO line, a full line drops its oldest waiter of
// the lowest class for a newcomer of that class or above; a newcomer below
// every waiter is refused at once (it used to join and be dropped itself,
// as the oldest of its lane, with Waited set).
func TestPriorityMaxWaitingLIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := semaphore.New("cap", semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour,
			MaxWaitingCalls: 2, QueueOrder: bulkhead.LIFO, Priorities: &bulkhead.Priorities{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := make(chan named, 8)
		next := func() named {
			t.Helper()
			select {
			case r := <-got:
				return r
			default:
				t.Fatalf("nobody was refused: %+v", b.Stats())
				return named{}
			}
		}
		joinLine(b, got, "SP1", bulkhead.SheddablePlus)
		joinLine(b, got, "SP2", bulkhead.SheddablePlus)
		joinLine(b, got, "S", bulkhead.Sheddable) // below every waiter
		if r := next(); r.name != "S" || reason(r.err) != bulkhead.ReasonWaiters || waited(r.err) {
			t.Fatalf("%s: %v, want S refused at once (waiters)", r.name, r.err)
		}
		joinLine(b, got, "C", bulkhead.Critical) // the oldest SheddablePlus leaves
		if r := next(); r.name != "SP1" || reason(r.err) != bulkhead.ReasonWaiters || !waited(r.err) {
			t.Fatalf("%s: %v, want SP1 dropped (waiters, waited)", r.name, r.err)
		}
		if order := releaseOrder(t, b, got, 2); !equal(order, []string{"C", "SP2"}) {
			t.Errorf("granted %v, want [C SP2]", order)
		}
	})
}

func waited(err error) bool { fe, ok := asFull(err); return ok && fe.Waited }

// Aging acts when it raises a waiter, not at the next release or arrival:
// a Sheddable waiter held back by its ceiling (limit 2, Sheddable's
// ceiling 1) next to a free permit gets that permit when Aging has raised
// it to a class whose ceiling admits it.
func TestPriorityAgingWakesWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := semaphore.New("aged", semaphore.Config{MaxConcurrentCalls: 2, MaxWaitDuration: time.Minute,
			Priorities: &bulkhead.Priorities{Aging: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Acquire(context.Background()); err != nil { // Critical: 1 of 2
			t.Fatal(err)
		}
		start := time.Now()
		got := make(chan named, 1)
		joinLine(b, got, "S", bulkhead.Sheddable)
		if s := b.Stats(); s.Waiting != 1 {
			t.Fatalf("the Sheddable caller should wait (its ceiling is 1): %+v", s)
		}
		var r named
		select {
		case r = <-got:
		case <-time.After(30 * time.Second): // a guard: its MaxWaitDuration is a minute
			t.Fatalf("the aged waiter still waits beside a free permit: %+v", b.Stats())
		}
		if r.err != nil {
			t.Fatalf("aged waiter: %v", r.err)
		}
		// One Aging makes it SheddablePlus, whose ceiling (0.8 of 2) is 2.
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("granted after %v, want 1s (one Aging)", waited)
		}
		b.Release()
		b.Release()
	})
}

// Aging keeps waking a waiter held back by its ceiling until a class that
// admits it: limit 4 with 3 held, Sheddable's and SheddablePlus's ceilings
// 1 and Critical's 3, the Sheddable waiter is served at its third Aging
// (CriticalPlus), and not before.
func TestPriorityAgingWakesAtEachStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := semaphore.New("aged", semaphore.Config{MaxConcurrentCalls: 4, MaxWaitDuration: time.Minute,
			Priorities: &bulkhead.Priorities{Sheddable: 0.25, SheddablePlus: 0.25, Critical: 0.75, Aging: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := b.Acquire(prio(bulkhead.CriticalPlus)); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		got := make(chan named, 1)
		joinLine(b, got, "S", bulkhead.Sheddable)
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatal(r.err)
			}
		case <-time.After(30 * time.Second): // a guard: its MaxWaitDuration is a minute
			t.Fatalf("the aged waiter still waits beside a free permit: %+v", b.Stats())
		}
		if waited := time.Since(start); waited != 3*time.Second {
			t.Errorf("granted after %v, want 3s (three Agings)", waited)
		}
		for range 4 {
			b.Release()
		}
	})
}

// With Priorities, CoDel sheds the lowest class first: when it would shed
// the CriticalPlus waiter about to be served, it sheds the oldest stale
// waiter of a lower class instead and serves the CriticalPlus one; a class
// is shed only when no lower one has a stale waiter.
func TestPriorityCoDelShedsLowestFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := semaphore.New("codel", semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour,
			CoDel: &bulkhead.CoDel{Target: 10 * time.Millisecond, Interval: 100 * time.Millisecond}, Priorities: &bulkhead.Priorities{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := make(chan named, 8)
		for _, name := range []string{"S1", "S2"} {
			joinLine(b, got, name, bulkhead.Sheddable)
		}
		joinLine(b, got, "CP1", bulkhead.CriticalPlus)
		joinLine(b, got, "CP2", bulkhead.CriticalPlus)
		// out checks who came out of the line since the last look: name,
		// reason, ... (ReasonNone: granted).
		out := func(want ...any) {
			t.Helper()
			synctest.Wait()
			seen := map[string]bulkhead.Reason{}
			for len(got) > 0 {
				g := <-got
				seen[g.name] = reason(g.err)
			}
			ok := len(seen) == len(want)/2
			for i := 0; i < len(want); i += 2 {
				if r, in := seen[want[i].(string)]; !in || r != want[i+1].(bulkhead.Reason) {
					ok = false
				}
			}
			if !ok {
				t.Fatalf("came out %v, want %v", seen, want)
			}
		}
		time.Sleep(50 * time.Millisecond)
		b.Release() // CoDel's first interval begins: the longest wait is 50ms
		out("CP1", bulkhead.ReasonNone)
		time.Sleep(50 * time.Millisecond)
		joinLine(b, got, "CP3", bulkhead.CriticalPlus)
		time.Sleep(100 * time.Millisecond)
		b.Release() // at 200ms: the interval stood above the target; the first of the next is never shed
		out("CP2", bulkhead.ReasonNone)
		time.Sleep(10 * time.Millisecond)
		b.Release() // CP3 has waited 110ms, S1 and S2 210ms: S1 goes in CP3's place
		out("S1", bulkhead.ReasonCoDel, "CP3", bulkhead.ReasonNone)
		if s := b.Stats(); s.Waiting != 1 || s.RejectedBy[bulkhead.ReasonCoDel] != 1 {
			t.Fatalf("S2 should still wait: %+v", s)
		}
		b.Release() // no lower class: S2 is shed itself
		out("S2", bulkhead.ReasonCoDel)
	})
}

// Under a storm of calls of every class while Reconfigure switches
// Priorities, Aging, MaxWaitingCalls, LIFO and CoDel on and off, the
// largest limit holds and nothing is lost: at rest no permit is held,
// nobody waits, and every permit granted was given back.
func TestPriorityReconfigureStress(t *testing.T) {
	const maxLimit = 6
	b, _ := semaphore.New("storm", semaphore.Config{MaxConcurrentCalls: maxLimit, MaxWaitDuration: time.Millisecond})
	var in, high, ran atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	reconfigured := make(chan int)
	go func() {
		r := rand.New(rand.NewPCG(7, 7))
		n := 0
		defer func() { reconfigured <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			cfg := semaphore.Config{MaxConcurrentCalls: 3 + r.IntN(maxLimit-2), MaxWaitDuration: time.Millisecond}
			if r.IntN(2) == 0 {
				cfg.Priorities = &bulkhead.Priorities{Sheddable: 0.3, Aging: time.Duration(r.IntN(2)) * 200 * time.Microsecond}
			}
			if r.IntN(2) == 0 {
				cfg.MaxWaitingCalls = 3
			}
			if r.IntN(3) == 0 {
				cfg.QueueOrder = bulkhead.LIFO
			}
			if r.IntN(3) == 0 {
				cfg.CoDel = &bulkhead.CoDel{Target: 100 * time.Microsecond, Interval: time.Millisecond}
			}
			if err := b.Reconfigure(cfg); err != nil {
				t.Error(err)
				return
			}
			n++
			time.Sleep(100 * time.Microsecond) // the pace of the changes, not a pass criterion
		}
	}()
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 2))
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
	close(stop)
	if n := <-reconfigured; n == 0 {
		t.Fatal("no Reconfigure ran during the storm")
	}
	s := b.Stats()
	if high.Load() > maxLimit || s.InFlight != 0 || s.Waiting != 0 || s.Permitted != s.Finished ||
		s.Permitted != uint64(ran.Load()) || s.Permitted+s.Rejected+s.Cancelled > 8*400 {
		t.Fatalf("high water %d, Stats %+v", high.Load(), s)
	}
}

// asFull returns err's *bulkhead.FullError.
func asFull(err error) (*bulkhead.FullError, bool) { return errors.AsType[*bulkhead.FullError](err) }
