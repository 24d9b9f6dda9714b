package semaphore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// The rules of the line (issue 24): bounded waiters, deadline-aware
// admission, LIFO and adaptive LIFO, CoDel, and the head rule. Every timing
// rule runs in a testing/synctest bubble, so that times are exact.

func newShed(t testing.TB, cfg semaphore.Config) *semaphore.Bulkhead {
	t.Helper()
	b, err := semaphore.New("shed", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// caller is one Acquire on its own goroutine.
type caller struct {
	id    int
	start time.Time
	took  time.Duration // how long Acquire took
	err   error
	done  chan struct{}
}

// join starts an Acquire with ctx and waits until it blocks (or returns).
func join(b *semaphore.Bulkhead, ctx context.Context, id int) *caller {
	c := &caller{id: id, start: time.Now(), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = b.Acquire(ctx)
		c.took = time.Since(c.start)
	}()
	synctest.Wait()
	return c
}

func (c *caller) returned() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wantRefused fails unless err is a FullError with reason r and waited.
func wantRefused(t *testing.T, what string, err error, r bulkhead.Reason, waited bool) {
	t.Helper()
	var fe *bulkhead.FullError
	if !errors.As(err, &fe) || fe.Reason != r || fe.Waited != waited || !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("%s: got %v (%+v), want a FullError with reason %v, waited %v", what, err, fe, r, waited)
	}
}

// grantOrder releases the permit held by the test once per waiter, and
// returns the ids of the waiters in the order they got it.
func grantOrder(t *testing.T, b *semaphore.Bulkhead, cs ...*caller) []int {
	t.Helper()
	var order []int
	for range cs {
		b.Release()
		synctest.Wait()
		for _, c := range cs {
			if c.returned() && c.err == nil && !containsID(order, c.id) {
				order = append(order, c.id)
			}
		}
	}
	return order
}

func containsID(ids []int, id int) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func equalIDs(a, b []int) bool {
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

func TestMaxWaitingCallsFIFORefusesTheNewcomer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newShed(t, semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour, MaxWaitingCalls: 2})
		ctx := context.Background()
		b.Acquire(ctx)
		w1, w2 := join(b, ctx, 1), join(b, ctx, 2)
		w3 := join(b, ctx, 3)
		if !w3.returned() || w3.took != 0 {
			t.Fatalf("the third caller did not return at once (returned %v after %v)", w3.returned(), w3.took)
		}
		wantRefused(t, "third caller", w3.err, bulkhead.ReasonWaiters, false)
		if s := b.Stats(); s.Waiting != 2 || s.RejectedBy[bulkhead.ReasonWaiters] != 1 || s.LIFO {
			t.Fatalf("stats: %+v", s)
		}
		if got := grantOrder(t, b, w1, w2); !equalIDs(got, []int{1, 2}) {
			t.Fatalf("granted in order %v, want [1 2]", got)
		}
		b.Release()
		if s := b.Stats(); s.Rejected != 1 || s.Permitted != 3 || s.InFlight != 0 {
			t.Fatalf("stats at the end: %+v", s)
		}
	})
}

func TestMaxWaitingCallsLIFODropsTheOldest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newShed(t, semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour, MaxWaitingCalls: 2,
			QueueOrder: bulkhead.LIFO})
		ctx := context.Background()
		b.Acquire(ctx)
		w1, w2 := join(b, ctx, 1), join(b, ctx, 2)
		w3 := join(b, ctx, 3)
		if w3.returned() || !w1.returned() {
			t.Fatalf("want the oldest refused and the newcomer waiting: w1 returned %v, w3 returned %v", w1.returned(), w3.returned())
		}
		wantRefused(t, "oldest waiter", w1.err, bulkhead.ReasonWaiters, true)
		if s := b.Stats(); s.Waiting != 2 || !s.LIFO {
			t.Fatalf("stats: %+v", s)
		}
		w4 := join(b, ctx, 4) // drops w2
		wantRefused(t, "second oldest", w2.err, bulkhead.ReasonWaiters, true)
		if got := grantOrder(t, b, w3, w4); !equalIDs(got, []int{4, 3}) {
			t.Fatalf("granted in order %v, want the newest first: [4 3]", got)
		}
		b.Release()
		if s := b.Stats(); s.Waiting != 0 || s.RejectedBy[bulkhead.ReasonWaiters] != 2 || s.Rejected != 2 {
			t.Fatalf("stats: %+v", s)
		}
	})
}

// Reconfigure to fewer waiters than wait: nobody already in line is
// refused for it, newcomers are refused until the line is short enough.
func TestMaxWaitingCallsLoweredByReconfigure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour}
		b := newShed(t, cfg)
		ctx := context.Background()
		b.Acquire(ctx)
		w := []*caller{join(b, ctx, 1), join(b, ctx, 2), join(b, ctx, 3)}
		cfg.MaxWaitingCalls = 1
		if err := b.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		c := join(b, ctx, 4)
		wantRefused(t, "newcomer", c.err, bulkhead.ReasonWaiters, false)
		if got := grantOrder(t, b, w...); !equalIDs(got, []int{1, 2, 3}) {
			t.Fatalf("granted in order %v", got)
		}
		b.Release()
	})
}

func TestDeadlineRefusedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newShed(t, semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Second,
			MinDeadlineSlack: 10 * time.Millisecond})
		near, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		if err := b.Acquire(near); err != nil {
			t.Fatalf("a free permit must not look at the deadline: %v", err)
		}
		c := join(b, near, 1)
		if !c.returned() || c.took != 0 {
			t.Fatal("a caller whose deadline is within the slack waited")
		}
		wantRefused(t, "near deadline", c.err, bulkhead.ReasonDeadline, false)
		if near.Err() != nil || errors.Is(c.err, context.DeadlineExceeded) {
			t.Fatal("the refusal must not be (or wait for) the context's own error")
		}
		far, cancel2 := context.WithTimeout(context.Background(), 11*time.Millisecond)
		defer cancel2()
		if w := join(b, far, 2); w.returned() {
			t.Fatalf("a caller with 1ms to spare returned %v instead of waiting", w.err)
		}
		b.Release()
		synctest.Wait()
		b.Release()
		if s := b.Stats(); s.RejectedBy[bulkhead.ReasonDeadline] != 1 || s.Rejected != 1 || s.Permitted != 2 {
			t.Fatalf("stats: %+v", s)
		}
	})
}

// A 50ms deadline with 10ms of slack: the waiter is refused at 40ms, not
// granted the permit freed at 45ms, which goes to the next waiter.
func TestDeadlineNeverGrantedTooLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newShed(t, semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Second,
			MinDeadlineSlack: 10 * time.Millisecond})
		b.Acquire(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		a := join(b, ctx, 1)
		other := join(b, context.Background(), 2)
		time.Sleep(45 * time.Millisecond)
		if !a.returned() {
			t.Fatal("the waiter whose deadline is 50ms away was still waiting at 45ms")
		}
		if a.took != 40*time.Millisecond {
			t.Fatalf("refused after %v, want 40ms", a.took)
		}
		wantRefused(t, "deadline waiter", a.err, bulkhead.ReasonDeadline, true)
		b.Release()
		synctest.Wait()
		if !other.returned() || other.err != nil {
			t.Fatalf("the permit freed at 45ms did not go to the next waiter: %v", other.err)
		}
		b.Release()
	})
}

// A permit freed at the very moment the deadline (less the slack) comes is
// never granted to that waiter, whichever runs first: the timer's expiry
// or the release.
func TestDeadlineRaceWithRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newShed(t, semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Second,
			MinDeadlineSlack: 10 * time.Millisecond})
		b.Acquire(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		a := join(b, ctx, 1)
		time.Sleep(40 * time.Millisecond)
		b.Release()
		<-a.done
		wantRefused(t, "deadline waiter", a.err, bulkhead.ReasonDeadline, true)
		if s := b.Stats(); s.InFlight != 0 || s.Waiting != 0 {
			t.Fatalf("stats: %+v", s)
		}
	})
}

func TestLIFOServesNewestAndTimesOutTheOldest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newShed(t, semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: 100 * time.Millisecond,
			QueueOrder: bulkhead.LIFO})
		ctx := context.Background()
		b.Acquire(ctx)
		old := join(b, ctx, 1)
		time.Sleep(10 * time.Millisecond)
		w := []*caller{join(b, ctx, 2), join(b, ctx, 3)}
		if got := grantOrder(t, b, w...); !equalIDs(got, []int{3, 2}) {
			t.Fatalf("granted in order %v, want [3 2]", got)
		}
		time.Sleep(100 * time.Millisecond)
		if !old.returned() || old.took != 100*time.Millisecond {
			t.Fatalf("the oldest waiter must be refused at its MaxWaitDuration (returned %v after %v)", old.returned(), old.took)
		}
		wantRefused(t, "oldest", old.err, bulkhead.ReasonTimeout, true)
		b.Release()
	})
}

// Adaptive LIFO with a threshold of 2: the newest first while more than 2
// wait, first come first served again once the line is short, and back to
// newest first when it grows again.
func TestAdaptiveLIFOSwitchesBothWays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newShed(t, semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour,
			QueueOrder: bulkhead.AdaptiveLIFO, LIFOThreshold: 2})
		ctx := context.Background()
		b.Acquire(ctx)
		w := []*caller{join(b, ctx, 1), join(b, ctx, 2)}
		if b.Stats().LIFO {
			t.Fatal("LIFO with 2 waiting, threshold 2")
		}
		w = append(w, join(b, ctx, 3), join(b, ctx, 4))
		if !b.Stats().LIFO {
			t.Fatal("not LIFO with 4 waiting, threshold 2")
		}
		// 4 wait: newest (4); 3 wait: newest (3); then 2 and 1 wait: oldest.
		if got := grantOrder(t, b, w...); !equalIDs(got, []int{4, 3, 1, 2}) {
			t.Fatalf("granted in order %v, want [4 3 1 2]", got)
		}
		if b.Stats().LIFO {
			t.Fatal("still LIFO with nobody waiting")
		}
		w = []*caller{join(b, ctx, 5), join(b, ctx, 6), join(b, ctx, 7)}
		if got := grantOrder(t, b, w...); !equalIDs(got, []int{7, 5, 6}) {
			t.Fatalf("second line granted in order %v, want [7 5 6]", got)
		}
		b.Release()
	})
}

// load runs, in a bubble, calls that arrive every gap for the span and
// hold the permit for service each; it returns the CoDel refusals, and
// fails the test if one of them had waited 2*target or less, or if any call
// failed otherwise.
func load(t *testing.T, b *semaphore.Bulkhead, gap, span, service, target time.Duration) (shed int) {
	t.Helper()
	if gap <= 0 {
		panic("load: gap must be positive")
	}
	done := make(chan error, 1024)
	n := 0
	for at := time.Duration(0); at < span; at += gap {
		n++
		go func() {
			start := time.Now()
			err := b.Do(context.Background(), func(context.Context) error {
				time.Sleep(service)
				return nil
			})
			var fe *bulkhead.FullError
			if errors.As(err, &fe) && fe.Reason == bulkhead.ReasonCoDel && time.Since(start) <= 2*target {
				err = errors.New("shed by CoDel after only " + time.Since(start).String())
			}
			done <- err
		}()
		time.Sleep(gap)
	}
	for range n {
		err := <-done
		var fe *bulkhead.FullError
		switch {
		case errors.As(err, &fe) && fe.Reason == bulkhead.ReasonCoDel && fe.Waited:
			shed++
		case err != nil:
			t.Fatal(err)
		}
	}
	return shed
}

// CoDel (5ms target, 100ms interval) spares a burst that drains within an
// interval, sheds a standing line (arrivals twice as fast as service) of
// waiters that waited more than 10ms once an interval of it has passed,
// and sheds nothing once arrivals drop below the service rate.
func TestCoDelShedsAStandingLineAndSparesABurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := 5 * time.Millisecond
		b := newShed(t, semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Second,
			CoDel: &bulkhead.CoDel{}})
		if got := b.Config().CoDel; got == nil || *got != (bulkhead.CoDel{}) {
			t.Fatalf("Config().CoDel = %v", got)
		}
		// A burst: 15 calls within 15ns, 5ms each, drained in 75ms.
		if shed := load(t, b, time.Nanosecond, 15*time.Nanosecond, 5*time.Millisecond, target); shed != 0 {
			t.Fatalf("a burst that drains within the interval: %d shed", shed)
		}
		time.Sleep(time.Second)
		// A standing line for 400ms: an arrival every 2ms, 4ms of service.
		standing := load(t, b, 2*time.Millisecond, 400*time.Millisecond, 4*time.Millisecond, target)
		if standing == 0 {
			t.Fatal("a standing line was not shed")
		}
		if s := b.Stats(); s.RejectedBy[bulkhead.ReasonCoDel] != uint64(standing) || s.Rejected != uint64(standing) {
			t.Fatalf("stats after the standing line: %+v", s)
		}
		// Arrivals below the service rate: an arrival every 6ms for 400ms.
		if shed := load(t, b, 6*time.Millisecond, 400*time.Millisecond, 4*time.Millisecond, target); shed != 0 {
			t.Fatalf("light load after the standing line: %d shed", shed)
		}
		if s := b.Stats(); s.Overloaded || s.InFlight != 0 || s.Waiting != 0 {
			t.Fatalf("stats at the end: %+v", s)
		}
	})
}

// The head rule: a head that leaves the line (its context cancelled, its
// deadline passed) never holds up the waiters behind it.
func TestCancelledOrExpiredHeadDoesNotBlock(t *testing.T) {
	for _, order := range []bulkhead.QueueOrder{bulkhead.FIFO, bulkhead.LIFO} {
		t.Run(order.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newShed(t, semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Second,
					QueueOrder: order, MinDeadlineSlack: time.Millisecond})
				b.Acquire(context.Background())
				cctx, cancel := context.WithCancel(context.Background())
				cancelled := join(b, cctx, 1)
				dctx, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
				defer cancel2()
				expired := join(b, dctx, 2)
				next := join(b, context.Background(), 3)
				cancel()
				time.Sleep(20 * time.Millisecond)
				if !cancelled.returned() || !expired.returned() {
					t.Fatal("the cancelled or the expired waiter is still waiting")
				}
				if cancelled.err != context.Canceled {
					t.Fatalf("cancelled head: %v", cancelled.err)
				}
				wantRefused(t, "expired", expired.err, bulkhead.ReasonDeadline, true)
				b.Release()
				synctest.Wait()
				if !next.returned() || next.err != nil {
					t.Fatalf("the waiter behind a cancelled and an expired one was not granted the permit (%v)", next.err)
				}
				b.Release()
				if s := b.Stats(); s.InFlight != 0 || s.Waiting != 0 || s.Cancelled != 1 || s.Rejected != 1 {
					t.Fatalf("stats: %+v", s)
				}
			})
		})
	}
}

func TestRejectionErrorsArePrebuiltPerReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newShed(t, semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour, MaxWaitingCalls: 1,
			MinDeadlineSlack: time.Second})
		ctx := context.Background()
		b.Acquire(ctx)
		w := join(b, ctx, 1)
		near, cancel := context.WithTimeout(ctx, time.Millisecond)
		defer cancel()
		allocs := testing.AllocsPerRun(100, func() {
			if err := b.Acquire(ctx); err == nil {
				t.Fatal("admitted")
			}
			if err := b.Acquire(near); err == nil {
				t.Fatal("admitted")
			}
		})
		if allocs != 0 {
			t.Fatalf("%v allocations per pair of rejections", allocs)
		}
		e1, e2 := b.Acquire(ctx), b.Acquire(near)
		if e1 != b.Acquire(ctx) || e2 != b.Acquire(near) {
			t.Fatal("rejections of one reason do not share their error")
		}
		for _, c := range []struct {
			err  error
			r    bulkhead.Reason
			text string
		}{{e1, bulkhead.ReasonWaiters, "too many callers waiting"}, {e2, bulkhead.ReasonDeadline, "minDeadlineSlack"}} {
			wantRefused(t, c.r.String(), c.err, c.r, false)
			if !strings.Contains(c.err.Error(), c.text) {
				t.Fatalf("%v: error %q does not say %q", c.r, c.err, c.text)
			}
		}
		b.Release()
		synctest.Wait()
		if w.err != nil {
			t.Fatal(w.err)
		}
		b.Release()
	})
}

func TestValidateLineFields(t *testing.T) {
	base := semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Second}
	for _, c := range []struct {
		mod  func(*semaphore.Config)
		want string
	}{
		{func(c *semaphore.Config) { c.MaxWaitingCalls = -1 }, "maxWaitingCalls must be >= 0, got -1"},
		{func(c *semaphore.Config) { c.MinDeadlineSlack = -1 }, "minDeadlineSlack must be >= 0, got -1ns"},
		{func(c *semaphore.Config) { c.QueueOrder = 9 }, "queueOrder must be fifo, lifo or adaptiveLifo, got QueueOrder(9)"},
		{func(c *semaphore.Config) { c.LIFOThreshold = -2 }, "lifoThreshold must be >= 0, got -2"},
		{func(c *semaphore.Config) { c.LIFOThreshold = 3 }, "lifoThreshold 3 applies only to queueOrder adaptiveLifo, got queueOrder fifo"},
		{func(c *semaphore.Config) { c.QueueOrder = bulkhead.AdaptiveLIFO }, "queueOrder adaptiveLifo needs lifoThreshold > 0 or codel"},
		{func(c *semaphore.Config) { c.CoDel = &bulkhead.CoDel{Target: -1} }, "codel.target must be >= 0, got -1ns"},
		{func(c *semaphore.Config) { c.CoDel = &bulkhead.CoDel{Interval: -1} }, "codel.interval must be >= 0, got -1ns"},
		{func(c *semaphore.Config) { c.CoDel = &bulkhead.CoDel{Target: 200 * time.Millisecond} },
			"codel.target must be shorter than codel.interval (100ms), got 200ms"},
		{func(c *semaphore.Config) { c.QueueOrder, c.MaxWaitDuration = bulkhead.LIFO, 0 },
			"queueOrder lifo needs maxWaitDuration > 0 (a bounded wait), got 0"},
		{func(c *semaphore.Config) { c.MaxWaitingCalls, c.MaxWaitDuration = 4, 0 }, "maxWaitingCalls 4 needs maxWaitDuration > 0"},
		{func(c *semaphore.Config) { c.MinDeadlineSlack, c.MaxWaitDuration = time.Millisecond, 0 }, "minDeadlineSlack 1ms needs maxWaitDuration > 0"},
		{func(c *semaphore.Config) { c.CoDel, c.MaxWaitDuration = &bulkhead.CoDel{}, 0 }, "codel needs maxWaitDuration > 0"},
	} {
		cfg := base
		c.mod(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want %q", cfg, err, c.want)
		}
		if _, err := semaphore.New("x", cfg); err == nil {
			t.Errorf("New accepted %+v", cfg)
		}
	}
	ok := base
	ok.MaxWaitingCalls, ok.MinDeadlineSlack, ok.QueueOrder, ok.LIFOThreshold = 3, time.Millisecond, bulkhead.AdaptiveLIFO, 2
	ok.CoDel = &bulkhead.CoDel{Target: 10 * time.Millisecond, Interval: 50 * time.Millisecond}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

// Config returns a copy of the CoDel settings: changing the caller's value,
// or the one Config returned, changes nothing in force.
func TestCoDelSettingsAreCopied(t *testing.T) {
	c := &bulkhead.CoDel{Target: time.Millisecond}
	b := newShed(t, semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Second, CoDel: c})
	c.Target = time.Hour
	b.Config().CoDel.Target = time.Hour
	if got := b.Config().CoDel.Target; got != time.Millisecond {
		t.Fatalf("CoDel.Target in force = %v, want 1ms", got)
	}
}
