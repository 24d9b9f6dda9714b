package pool_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// Priorities in pool mode (issue 25): start order across classes, the
// reserved headroom, aging, and what Validate refuses.

// prioTask submits a task of class p to b that records its name in order
// once it starts, and returns its future.
func prioTask(t *testing.T, b *pool.Bulkhead, p bulkhead.Priority, name string, mu *sync.Mutex, order *[]string) *future.Future[int] {
	t.Helper()
	ctx := bulkhead.WithPriority(context.Background(), p)
	f, err := pool.Submit(ctx, b, func(context.Context) (int, error) {
		mu.Lock()
		*order = append(*order, name)
		mu.Unlock()
		return 0, nil
	})
	if err != nil {
		t.Fatalf("submit %s: %v", name, err)
	}
	return f
}

func TestPoolPriorityStartOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		all := &bulkhead.Priorities{Sheddable: 1, SheddablePlus: 1} // no class reserved: order only
		b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 4, Priorities: all})
		defer done()
		hold := make(chan struct{})
		release := sync.OnceFunc(func() { close(hold) })
		defer release()
		held := mustSubmit(t, b, func(context.Context) (int, error) { <-hold; return 0, nil })
		synctest.Wait()
		var mu sync.Mutex
		var order []string
		var fs []*future.Future[int]
		for i, p := range []bulkhead.Priority{bulkhead.Sheddable, bulkhead.Critical, bulkhead.Sheddable, bulkhead.CriticalPlus} {
			fs = append(fs, prioTask(t, b, p, p.String()+string(rune('0'+i)), &mu, &order))
		}
		if s := b.Stats(); s.QueueDepth != 4 {
			t.Fatalf("queue depth %d, want 4", s.QueueDepth)
		}
		release()
		wait(t, held)
		for _, f := range fs {
			wait(t, f)
		}
		if got, want := strings.Join(order, " "), "criticalPlus3 critical1 sheddable0 sheddable2"; got != want {
			t.Fatalf("start order %q, want %q", got, want)
		}
	})
}

func TestPoolPriorityReservedHeadroom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 4 workers, 4 queue slots: Sheddable may take 2 of each,
		// SheddablePlus 3 (ceil 0.8 × 4 = 4 is capped by Critical 0.75),
		// Critical 3, CriticalPlus all 4.
		prios := &bulkhead.Priorities{SheddablePlus: 0.75, Critical: 0.75}
		b, done := shedPool(t, pool.Config{MaxWorkers: 4, QueueCapacity: 4, Priorities: prios})
		defer done()
		hold := make(chan struct{})
		release := sync.OnceFunc(func() { close(hold) })
		defer release()
		fn := func(context.Context) (int, error) { <-hold; return 0, nil }
		submit := func(p bulkhead.Priority) error {
			_, err := pool.Submit(bulkhead.WithPriority(context.Background(), p), b, fn)
			return err
		}
		mustRefuse := func(p bulkhead.Priority, r bulkhead.Reason) {
			t.Helper()
			var fe *bulkhead.FullError
			if err := submit(p); !errors.As(err, &fe) || fe.Reason != r {
				t.Fatalf("%v: got %v, want a refusal for %v", p, err, r)
			}
		}
		for range 2 {
			if err := submit(bulkhead.Sheddable); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if s := b.Stats(); s.InFlight != 2 || s.QueueDepth != 0 {
			t.Fatalf("2 Sheddable tasks: %d running, %d queued; want 2 running", s.InFlight, s.QueueDepth)
		}
		// Two workers are free, but above Sheddable's ceiling: it queues.
		for range 2 {
			if err := submit(bulkhead.Sheddable); err != nil {
				t.Fatal(err)
			}
		}
		if s := b.Stats(); s.InFlight != 2 || s.QueueDepth != 2 {
			t.Fatalf("4 Sheddable tasks: %d running, %d queued; want 2 and 2", s.InFlight, s.QueueDepth)
		}
		mustRefuse(bulkhead.Sheddable, bulkhead.ReasonPriority)
		// Critical takes the third worker, not the fourth.
		if err := submit(bulkhead.Critical); err != nil {
			t.Fatal(err)
		}
		if s := b.Stats(); s.InFlight != 3 {
			t.Fatalf("after a Critical task: %d running, want 3", s.InFlight)
		}
		if err := submit(bulkhead.Critical); err != nil { // queued: the third slot
			t.Fatal(err)
		}
		if s := b.Stats(); s.InFlight != 3 || s.QueueDepth != 3 {
			t.Fatalf("after two Critical tasks: %d running, %d queued; want 3 and 3", s.InFlight, s.QueueDepth)
		}
		mustRefuse(bulkhead.Critical, bulkhead.ReasonPriority)
		mustRefuse(bulkhead.SheddablePlus, bulkhead.ReasonPriority)
		// CriticalPlus gets the last worker and the last queue slot.
		if err := submit(bulkhead.CriticalPlus); err != nil {
			t.Fatal(err)
		}
		if err := submit(bulkhead.CriticalPlus); err != nil {
			t.Fatal(err)
		}
		if s := b.Stats(); s.InFlight != 4 || s.QueueDepth != 4 {
			t.Fatalf("full: %d running, %d queued; want 4 and 4", s.InFlight, s.QueueDepth)
		}
		mustRefuse(bulkhead.CriticalPlus, bulkhead.ReasonFull)
		if s := b.Stats(); s.RejectedBy[bulkhead.ReasonPriority] != 3 || s.RejectedBy[bulkhead.ReasonFull] != 1 {
			t.Fatalf("rejected by reason %v, want 3 priority and 1 full", s.RejectedBy)
		}
		release()
		synctest.Wait()
		if s := b.Stats(); s.Finished != 8 || s.InFlight != 0 || s.QueueDepth != 0 {
			t.Fatalf("at rest: %+v", s)
		}
	})
}

// TestPoolPriorityAging: a Sheddable task queued behind a steady stream of
// CriticalPlus tasks starts once it has aged past them (three Agings),
// where strict priority starves it.
func TestPoolPriorityAging(t *testing.T) {
	for _, aging := range []time.Duration{0, time.Second} {
		synctest.Test(t, func(t *testing.T) {
			b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 8, Priorities: &bulkhead.Priorities{Aging: aging}})
			defer done()
			step := func(context.Context) (int, error) { time.Sleep(100 * time.Millisecond); return 0, nil }
			top := bulkhead.WithPriority(context.Background(), bulkhead.CriticalPlus)
			if _, err := pool.Submit(top, b, step); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			var started time.Duration
			low, err := pool.Submit(bulkhead.WithPriority(context.Background(), bulkhead.Sheddable), b,
				func(context.Context) (int, error) { started = time.Since(start); return 0, nil })
			if err != nil {
				t.Fatal(err)
			}
			// a stream: a CriticalPlus task queued every 100ms for 10s
			for range 100 {
				if _, err := pool.Submit(top, b, step); err != nil {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if aging == 0 {
				select {
				case <-low.Done():
					t.Fatal("strict priority: the Sheddable task started under a stream of CriticalPlus")
				default:
				}
				wait(t, low)
				return
			}
			wait(t, low)
			// three Agings to reach CriticalPlus, then it is the oldest
			// of its class: at most 3s plus one task's run
			if started < 3*time.Second || started > 3*time.Second+100*time.Millisecond {
				t.Fatalf("aged Sheddable task started after %v, want 3s to 3.1s", started)
			}
		})
	}
}

func TestPoolPriorityValidate(t *testing.T) {
	p := &bulkhead.Priorities{}
	for _, c := range []struct {
		cfg  pool.Config
		want string
	}{
		{pool.Config{MaxWorkers: 1, QueueCapacity: 1, QueueTimeout: time.Second, QueueOrder: bulkhead.LIFO, Priorities: p}, "queueOrder must be fifo with priorities"},
		{pool.Config{MaxWorkers: 1, QueueCapacity: 1, CoDel: &bulkhead.CoDel{}, Priorities: p}, "codel is not available with priorities"},
		{pool.Config{MaxWorkers: 1, Priorities: &bulkhead.Priorities{Sheddable: 2}}, "sheddable must be in (0, 1]"},
		{pool.Config{MaxWorkers: 1, QueueCapacity: 1, Displace: true}, "displace needs priorities"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate() = %v, want %q", err, c.want)
		}
	}
	kc := pool.KeyedConfig{Config: pool.Config{MaxWorkers: 1, Priorities: p}}
	if err := kc.Validate(); err == nil || !strings.Contains(err.Error(), "priorities are not available in a keyed pool") {
		t.Errorf("KeyedConfig.Validate() = %v", err)
	}
	b := newPool(t, pool.Config{MaxWorkers: 1})
	if err := b.Reconfigure(pool.Config{MaxWorkers: 1, Priorities: p}); err == nil || !strings.Contains(err.Error(), "priorities cannot be switched on or off") {
		t.Errorf("Reconfigure switching priorities on = %v", err)
	}
}

// TestPoolPriorityDisplace: a task that finds the queue full pushes out
// the newest queued task of the lowest class below its own, whose future
// fails with ReasonDisplaced; a task with no lower class queued is refused.
func TestPoolPriorityDisplace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		all := &bulkhead.Priorities{Sheddable: 1, SheddablePlus: 1}
		b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 2, Priorities: all, Displace: true})
		defer done()
		hold := make(chan struct{})
		release := sync.OnceFunc(func() { close(hold) })
		defer release()
		held := mustSubmit(t, b, func(context.Context) (int, error) { <-hold; return 0, nil })
		synctest.Wait()
		var mu sync.Mutex
		var order []string
		a := prioTask(t, b, bulkhead.Sheddable, "a", &mu, &order)
		bb := prioTask(t, b, bulkhead.Sheddable, "b", &mu, &order)
		c := prioTask(t, b, bulkhead.Critical, "c", &mu, &order)      // displaces b, the newer Sheddable
		d := prioTask(t, b, bulkhead.SheddablePlus, "d", &mu, &order) // displaces a
		if _, err := pool.Submit(bulkhead.WithPriority(context.Background(), bulkhead.Sheddable), b, answer); !isReason(err, bulkhead.ReasonFull) {
			t.Fatalf("Sheddable with nothing lower queued: %v, want ReasonFull", err)
		}
		g := prioTask(t, b, bulkhead.CriticalPlus, "g", &mu, &order) // displaces d
		for name, f := range map[string]*future.Future[int]{"a": a, "b": bb, "d": d} {
			var fe *bulkhead.FullError
			if _, err := wait(t, f); !errors.As(err, &fe) || fe.Reason != bulkhead.ReasonDisplaced || !fe.Waited {
				t.Fatalf("task %s: %v, want a FullError of ReasonDisplaced that waited", name, err)
			}
		}
		if s := b.Stats(); s.RejectedBy[bulkhead.ReasonDisplaced] != 3 || s.RejectedBy[bulkhead.ReasonFull] != 1 || s.QueueDepth != 2 {
			t.Fatalf("stats %+v, want 3 displaced, 1 full, 2 queued", s)
		}
		release()
		wait(t, held)
		wait(t, c)
		wait(t, g)
		if got := strings.Join(order, " "); got != "g c" {
			t.Fatalf("start order %q, want \"g c\"", got)
		}
	})
}

func isReason(err error, r bulkhead.Reason) bool {
	var fe *bulkhead.FullError
	return errors.As(err, &fe) && fe.Reason == r
}

// TestPoolPriorityChurn submits tasks of random classes from many
// goroutines, with Go, cancellations, queue timeouts, displacement, a
// capped line of waiting submitters, aging and a resize that switches it
// off, and checks that no worker or queue slot is lost: every submission
// is refused or its future completes, at most MaxWorkers run at once, and
// the pool ends at rest with exact counters.
func TestPoolPriorityChurn(t *testing.T) {
	for _, displace := range []bool{false, true} {
		b := newPool(t, pool.Config{MaxWorkers: 3, QueueCapacity: 5, QueueTimeout: 2 * time.Millisecond, MaxWaitingCalls: 3,
			Priorities: &bulkhead.Priorities{Aging: time.Millisecond}, Displace: displace})
		var running, over, submitted, refused, completed atomic.Int64
		fn := func(ctx context.Context) (int, error) {
			if running.Add(1) > 3 {
				over.Add(1)
			}
			defer running.Add(-1)
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(rand.IntN(300)) * time.Microsecond):
			}
			return 0, nil
		}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 200 {
					ctx, cancel := context.WithCancel(bulkhead.WithPriority(context.Background(), bulkhead.Priority(rand.IntN(4)-2)))
					submitted.Add(1)
					var f *future.Future[int]
					var err error
					if (g+i)%3 == 0 {
						f, err = pool.Go(ctx, b, fn)
					} else {
						f, err = pool.Submit(ctx, b, fn)
					}
					if i%7 == 0 {
						cancel()
					}
					if err != nil {
						refused.Add(1)
					} else {
						f.Wait(context.Background())
						completed.Add(1)
					}
					cancel()
					if g == 0 && i == 100 {
						if err := b.Reconfigure(pool.Config{MaxWorkers: 2, QueueCapacity: 3, QueueTimeout: time.Millisecond, MaxWaitingCalls: 2,
							Priorities: &bulkhead.Priorities{Sheddable: 0.4}, Displace: displace}); err != nil {
							t.Error(err)
						}
					}
				}
			})
		}
		wg.Wait()
		if over.Load() > 0 {
			t.Fatalf("displace %v: more than MaxWorkers ran at once %d times", displace, over.Load())
		}
		if submitted.Load() != refused.Load()+completed.Load() {
			t.Fatalf("displace %v: %d submitted, %d refused, %d completed", displace, submitted.Load(), refused.Load(), completed.Load())
		}
		s := atRest(t, b)
		if s.Permitted != s.Finished || s.InFlight != 0 || s.QueueDepth != 0 || s.Waiting != 0 {
			t.Fatalf("displace %v: not at rest: %+v", displace, s)
		}
		if got := s.Permitted + s.Rejected + s.Cancelled; got != uint64(submitted.Load()) {
			t.Fatalf("displace %v: permitted+rejected+cancelled %d, submitted %d: %+v", displace, got, submitted.Load(), s)
		}
		t.Logf("displace %v: rejected by reason %v, cancelled %d", displace, s.RejectedBy, s.Cancelled)
		if !displace && s.RejectedBy[bulkhead.ReasonDisplaced] != 0 {
			t.Fatalf("displaced without Displace: %+v", s)
		}
	}
}

// TestPoolPriorityDisplaceAged: displacement compares aged classes: a
// Sheddable task aged to Critical is not pushed out by a Critical
// newcomer; the SheddablePlus task queued after it is.
func TestPoolPriorityDisplaceAged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		all := &bulkhead.Priorities{Sheddable: 1, SheddablePlus: 1, Aging: time.Second}
		b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 2, Priorities: all, Displace: true})
		defer done()
		release := sync.OnceFunc(hold(t, b))
		defer release()
		var mu sync.Mutex
		var order []string
		a := prioTask(t, b, bulkhead.Sheddable, "a", &mu, &order)
		time.Sleep(2 * time.Second) // a is Critical now
		sp := prioTask(t, b, bulkhead.SheddablePlus, "sp", &mu, &order)
		c := prioTask(t, b, bulkhead.Critical, "c", &mu, &order)
		release()
		if _, err := wait(t, sp); !isReason(err, bulkhead.ReasonDisplaced) {
			t.Fatalf("the SheddablePlus task: %v, want ReasonDisplaced", err)
		}
		if _, err := wait(t, a); err != nil {
			t.Fatalf("the Sheddable task aged to Critical: %v, want it kept and run", err)
		}
		wait(t, c)
		if got := strings.Join(order, " "); got != "a c" {
			t.Fatalf("start order %q, want \"a c\" (a aged to Critical and older)", got)
		}
	})
}

// TestPoolPriorityDisplaceCallbacksOffSubmitter: the displaced task's
// future completes on a goroutine of the pool's, not inside the Submit
// that displaced it: that Submit returns its future while the displaced
// task's callback still runs, so a callback that panics or blocks cannot
// lose the newcomer's future. Close waits for the callback.
func TestPoolPriorityDisplaceCallbacksOffSubmitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1, Priorities: &bulkhead.Priorities{}, Displace: true})
		defer done()
		release := sync.OnceFunc(hold(t, b))
		defer release()
		v, err := pool.Submit(bulkhead.WithPriority(context.Background(), bulkhead.Sheddable), b, answer)
		if err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		gateOpen := sync.OnceFunc(func() { close(gate) })
		defer gateOpen()
		inCallback := make(chan struct{})
		v.OnComplete(func(int, error) { close(inCallback); <-gate })
		submitted := make(chan *future.Future[int], 1)
		go func() {
			f, err := pool.Submit(bulkhead.WithPriority(context.Background(), bulkhead.CriticalPlus), b, answer)
			if err != nil {
				t.Error(err)
			}
			submitted <- f
		}()
		<-inCallback
		synctest.Wait()
		var f *future.Future[int]
		select {
		case f = <-submitted:
		default:
			t.Fatal("the displacing Submit has not returned: it runs the displaced task's callback")
		}
		gateOpen()
		if _, err := wait(t, v); !isReason(err, bulkhead.ReasonDisplaced) {
			t.Fatalf("displaced task: %v, want ReasonDisplaced", err)
		}
		release()
		if got, err := wait(t, f); got != 42 || err != nil {
			t.Fatalf("the displacing task: %v, %v", got, err)
		}
	})
}
