package pool_test

// Found by a review of pool.Group (each failed before its fix).

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/pool"
)

var errBoomB = errors.New("boom")

// B1: a subscriber that calls runtime.Goexit (as t.FailNow would) in the
// EventCancelled that the group's fail-fast publishes for a queued task it
// drops, on the failing task's worker, before that worker freed its slot:
// the package doc promises the pool's state is already consistent.
func TestGroupGoexitInASubscriberDuringFailFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("g", pool.Config{MaxWorkers: 1, QueueCapacity: 2})
		if err != nil {
			t.Fatal(err)
		}
		var armed atomic.Bool
		armed.Store(true)
		b.Subscribe(goexitOnce(bulkhead.EventCancelled, &armed))
		g := pool.NewGroup[int](context.Background(), b)
		g.SetLimit(-1)
		release := make(chan struct{})
		g.Go(func(context.Context) (int, error) { <-release; return 0, errBoomB })
		g.Go(func(context.Context) (int, error) { return 1, nil }) // queued
		close(release)
		done := make(chan error, 1)
		go func() { _, err := g.Wait(); done <- err }()
		synctest.Wait()
		s := b.Stats()
		select {
		case err := <-done:
			if !errors.Is(err, errBoomB) {
				t.Errorf("Wait: %v, want boom", err)
			}
		default:
			t.Errorf("Wait never returns after the subscriber's Goexit; stats %+v", s)
		}
		if s.InFlight != 0 || s.Permitted != s.Finished {
			t.Errorf("the failing task's slot is never freed: InFlight %d, Permitted %d, Finished %d", s.InFlight, s.Permitted, s.Finished)
			return // Close would never return
		}
		b.Close(context.Background())
	})
}

// B2: a subscriber that panics in the EventRejected that TryGo's refusal
// publishes on the caller's goroutine; the caller recovers (as net/http
// does). The group must not count a task that was never in the pool.
func TestGroupPanicInASubscriberOfARefusedTryGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("g", pool.Config{MaxWorkers: 1, QueueCapacity: 0})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(context.Background())
		defer b.Subscribe(func(e bulkhead.Event) {
			if e.Type == bulkhead.EventRejected {
				panic("subscriber")
			}
		})()
		g := pool.NewGroup[int](context.Background(), b)
		g.SetLimit(2)
		release := make(chan struct{})
		if !g.TryGo(func(context.Context) (int, error) { <-release; return 1, nil }) {
			t.Fatal("TryGo refused on an idle pool")
		}
		func() {
			defer func() { recover() }()
			g.TryGo(func(context.Context) (int, error) { return 2, nil }) // the pool is full: rejected
		}()
		close(release)
		done := make(chan struct{})
		var vals []int
		go func() { vals, err = g.Wait(); close(done) }()
		synctest.Wait()
		select {
		case <-done:
			if err != nil || len(vals) != 1 {
				t.Errorf("Wait: %v, %v; want [1], nil", vals, err)
			}
		default:
			t.Errorf("Wait never returns: the refused TryGo's task is still counted; stats %+v", b.Stats())
		}
	})
}

// B3: the same Goexit in EventCancelled, on the goroutine of the group's
// context watch (ended) as the group's context ends with two queued tasks.
func TestGroupGoexitInASubscriberWhenTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("g", pool.Config{MaxWorkers: 1, QueueCapacity: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(context.Background())
		var armed atomic.Bool
		armed.Store(true)
		b.Subscribe(goexitOnce(bulkhead.EventCancelled, &armed))
		ctx, cancel := context.WithCancel(context.Background())
		g := pool.NewGroup[int](ctx, b)
		g.SetLimit(-1)
		release := make(chan struct{})
		g.Go(func(context.Context) (int, error) { <-release; return 0, nil })
		g.Go(func(context.Context) (int, error) { return 1, nil }) // queued
		g.Go(func(context.Context) (int, error) { return 2, nil }) // queued
		cancel()
		synctest.Wait()
		close(release)
		done := make(chan error, 1)
		go func() { _, err := g.Wait(); done <- err }()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Errorf("Wait never returns after the subscriber's Goexit; stats %+v", b.Stats())
		}
	})
}

// B4: a Go waiting at the group's limit sees the limit SetLimit raises at
// once, not when one of the group's tasks ends: here the task in the pool
// waits for the next one to start.
func TestGroupRaisedLimitReachesAWaitingGo(t *testing.T) {
	for _, how := range []string{"SetLimit"} { // a Go waiting at the default limit sees a new MaxWorkers once a task of the group ends (SetLimit doc)
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, err := pool.New("g", pool.Config{MaxWorkers: 1, QueueCapacity: 0})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close(context.Background())
				g := pool.NewGroup[int](context.Background(), b)
				if how == "SetLimit" {
					if err := b.Reconfigure(pool.Config{MaxWorkers: 2}); err != nil {
						t.Fatal(err)
					}
					g.SetLimit(1)
				}
				bStarted := make(chan struct{})
				var once sync.Once
				started := func() { once.Do(func() { close(bStarted) }) }
				g.Go(func(context.Context) (int, error) { <-bStarted; return 0, nil })
				goReturned := make(chan struct{})
				go func() {
					defer close(goReturned)
					g.Go(func(context.Context) (int, error) { started(); return 1, nil })
				}()
				synctest.Wait() // the second Go waits at the group's limit
				if how == "SetLimit" {
					g.SetLimit(2)
				} else if err := b.Reconfigure(pool.Config{MaxWorkers: 2}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				select {
				case <-goReturned:
				default:
					t.Errorf("%s raised the limit, but the waiting Go still waits (stats %+v)", how, b.Stats())
					started() // lets the test end
				}
				if _, err := g.Wait(); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// B6: fail-fast with a Go of the group waiting for room in the pool (the
// pool is full): the failing task's own worker, as it frees its slot,
// starts that waiting task, though the group has failed and its context
// is cancelled already.
func TestGroupFailFastStartsNoWaitingGo(t *testing.T) {
	// One P: the failing worker goes on from cancel to freeing its slot
	// before the waiting Go's goroutine, woken by the cancel, runs (the
	// outcome with more Ps is a race, lost about half the time under -race).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, queue := range []int{0, 1} {
		synctest.Test(t, func(t *testing.T) {
			b, err := pool.New("g", pool.Config{MaxWorkers: 1, QueueCapacity: queue})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close(context.Background())
			g := pool.NewGroup[int](context.Background(), b)
			g.SetLimit(-1)
			release := make(chan struct{})
			g.Go(func(context.Context) (int, error) { <-release; return 0, errBoomB })
			for range queue {
				g.Go(func(context.Context) (int, error) { return 1, nil }) // queued
			}
			var ran atomic.Int32
			var sawCancelled atomic.Bool
			goReturned := make(chan struct{})
			go func() {
				defer close(goReturned)
				g.Go(func(ctx context.Context) (int, error) {
					ran.Add(1)
					sawCancelled.Store(ctx.Err() != nil)
					return 2, nil
				})
			}()
			synctest.Wait()
			if s := b.Stats(); s.Waiting != 1 {
				t.Fatalf("queue %d: the last Go does not wait for room: %+v", queue, s)
			}
			close(release)
			<-goReturned
			vals, err := g.Wait()
			if !errors.Is(err, errBoomB) {
				t.Fatalf("Wait: %v", err)
			}
			if ran.Load() != 0 {
				t.Errorf("queue %d: the Go that waited for room ran its task after the group failed (its ctx cancelled: %v); values %v, stats %+v",
					queue, sawCancelled.Load(), vals, b.Stats())
			}
		})
	}
}

// B2b: the same with Go: a refusal for MaxWaitingCalls publishes
// EventRejected on Go's goroutine before Go records the failure.
func TestGroupPanicInASubscriberOfARefusedGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("g", pool.Config{MaxWorkers: 1, QueueCapacity: 0, MaxWaitingCalls: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(context.Background())
		defer b.Subscribe(func(e bulkhead.Event) {
			if e.Type == bulkhead.EventRejected {
				panic("subscriber")
			}
		})()
		g := pool.NewGroup[int](context.Background(), b)
		g.SetLimit(-1)
		release := make(chan struct{})
		g.Go(func(context.Context) (int, error) { <-release; return 1, nil })
		go g.Go(func(context.Context) (int, error) { return 2, nil }) // waits for room
		synctest.Wait()
		func() {
			defer func() { recover() }()
			g.Go(func(context.Context) (int, error) { return 3, nil }) // refused: ReasonWaiters
		}()
		close(release)
		done := make(chan error, 1)
		go func() { _, err := g.Wait(); done <- err }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Logf("Wait: %v", err)
		default:
			t.Errorf("Wait never returns: the refused Go's task is still counted; stats %+v", b.Stats())
		}
	})
}

// B5: TryGo from another goroutine while Wait waits on a running task.
// TryGo counts its task before it submits, so Wait waits for it; but the
// task gets its place (and its value) only once TryGo re-locks the group
// after the pool took it. If the task and the last other one end first,
// Wait returns without the value of a task TryGo reports submitted.
func TestGroupTryGoDuringWaitKeepsItsValue(t *testing.T) {
	b := newGroupPool(t, 2, 0)
	lost := 0
	for i := range 10000 {
		g := pool.NewGroup[int](context.Background(), b)
		release := make(chan struct{})
		g.Go(func(context.Context) (int, error) { <-release; return 1, nil })
		res := make(chan []int)
		go func() { vals, _ := g.Wait(); res <- vals }()
		ok := make(chan bool)
		go func() { ok <- g.TryGo(func(context.Context) (int, error) { close(release); return 2, nil }) }()
		vals, took := <-res, <-ok
		if took && len(vals) != 2 {
			lost++
			if lost == 1 {
				t.Errorf("iteration %d: TryGo returned true, its task ran (it released the other), but Wait returned %v without its value", i, vals)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of 10000 iterations lost the TryGo's value", lost)
	}
}
