package pool_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// executing counts the task functions that execute at one moment, from
// inside them: a task counts itself from entry to return, except while it
// is blocked in a call that may lend its slot (a wait on a future of the
// pool, Go), and peak records the most ever counted.
type executing struct{ cur, peak atomic.Int32 }

func (e *executing) enter() {
	v := e.cur.Add(1)
	for p := e.peak.Load(); v > p && !e.peak.CompareAndSwap(p, v); p = e.peak.Load() {
	}
}

func (e *executing) leave() { e.cur.Add(-1) }

// blocked runs fn, a call that may lend the task's slot, with the task not
// counted as executing.
func (e *executing) blocked(fn func()) {
	e.leave()
	defer e.enter()
	fn()
}

// bubbleGuard is a context for waits inside a synctest bubble that must
// end: an hour of the bubble's virtual time. The ants pool's own timers
// keep virtual time moving, so a deadlock shows as this guard running out
// (at once, in real time) rather than as synctest's deadlock panic.
func bubbleGuard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	t.Cleanup(cancel)
	return ctx
}

// Reproduction 1 of issue 19: a chain of tasks on one worker, each waiting
// for the next with a deadline (a WithTimeout child of its own context) that
// passes while the task it waits for still runs. The waiter must not run on
// beside the task it lent its slot to: one task function executes at a
// time, at every depth. (Before the fix, 8 executed at once.)
func TestTimedNestedWaitsKeepTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const depth = 8
		b, err := pool.New("chain", pool.Config{MaxWorkers: 1, QueueCapacity: depth})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close(bubbleGuard(t)) }) // unblocks what a failure left
		var e executing
		var level func(i int) func(context.Context) (int, error)
		level = func(i int) func(context.Context) (int, error) {
			return func(ctx context.Context) (int, error) {
				e.enter()
				defer e.leave()
				time.Sleep(10 * time.Millisecond) // longer than the waiter's deadline
				if i == depth {
					return i, nil
				}
				f, err := pool.Submit(ctx, b, level(i+1))
				if err != nil {
					return 0, err
				}
				wctx, cancel := context.WithTimeout(ctx, time.Millisecond)
				defer cancel()
				var v int
				e.blocked(func() { v, err = f.Wait(wctx) })
				return v, err
			}
		}
		f, err := pool.Submit(context.Background(), b, level(0))
		if err != nil {
			t.Fatal(err)
		}
		if v, err := f.Wait(bubbleGuard(t)); v != depth || err != nil {
			t.Fatalf("the chain returned %d, %v; want %d, nil", v, err, depth)
		}
		if p := e.peak.Load(); p != 1 {
			t.Fatalf("%d task functions executed at once on a pool of 1 worker", p)
		}
		if err := b.Close(bubbleGuard(t)); err != nil {
			t.Fatal(err)
		}
	})
}

// Reproduction 2 of issue 19: the documented fan-out (Go in a loop, then
// future.All) inside a task of the same pool, with one worker and a queue
// of 2, and three submits: the third finds the queue full and runs in the
// task's slot instead of waiting for room only the task could make. Inside
// a synctest bubble, a deadlock fails the test.
func TestNestedGoWithFullQueueCompletes(t *testing.T) {
	for _, untyped := range []bool{false, true} {
		t.Run(fmt.Sprint("untyped=", untyped), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, err := pool.New("fanout", pool.Config{MaxWorkers: 1, QueueCapacity: 2})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = b.Close(bubbleGuard(t)) }) // unblocks what a failure left
				var e executing
				outer, err := pool.Submit(context.Background(), b, func(ctx context.Context) (int, error) {
					e.enter()
					defer e.leave()
					var fs []*future.Future[int]
					for i := range 3 {
						var f *future.Future[int]
						var err error
						e.blocked(func() {
							if untyped {
								var g *future.Future[struct{}]
								g, err = b.Go(ctx, func(context.Context) error { e.enter(); e.leave(); return nil })
								if err == nil {
									f = future.Then(g, func(struct{}) (int, error) { return i, nil })
								}
								return
							}
							f, err = pool.Go(ctx, b, func(context.Context) (int, error) { e.enter(); defer e.leave(); return i, nil })
						})
						if err != nil {
							return 0, err
						}
						fs = append(fs, f)
					}
					var vs []int
					var err error
					e.blocked(func() { vs, err = future.All(ctx, fs...) })
					if err != nil {
						return 0, err
					}
					return vs[0] + vs[1] + vs[2], nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if v, err := outer.Wait(bubbleGuard(t)); v != 3 || err != nil {
					t.Fatalf("the fan-out returned %d, %v; want 3, nil", v, err)
				}
				if p := e.peak.Load(); p != 1 {
					t.Fatalf("%d task functions executed at once on a pool of 1 worker", p)
				}
				if s := b.Stats(); s.Permitted != 4 || s.Finished != 4 || s.Rejected != 0 || s.InFlight != 0 {
					t.Fatalf("Stats %+v", s)
				}
				if err := b.Close(bubbleGuard(t)); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// Every combination of nested submit and wait that the package
// documentation calls safe completes on a pool of one worker: each way of
// submitting from inside a task (Submit, Go, TryGo, Bulkhead.Go), with the
// queue empty, with room or full, and each way of waiting with the task's
// context (Wait, Wait on a Then future, a WithTimeout child, All, Settle,
// First, Wait newest first), on a plain pool and on one with Priorities.
// A synctest bubble fails the test if any goroutine is left durably
// blocked; a refused Submit or TryGo (they never wait) counts as completed.
func TestNestedCombinationsComplete(t *testing.T) {
	submits := []string{"Submit", "Go", "TryGo", "Bulkhead.Go"}
	waits := []string{"Wait", "Then", "WithTimeout", "All", "Settle", "First", "Newest"}
	for _, prio := range []bool{false, true} {
		for _, queue := range []int{0, 1, 3} {
			for _, sub := range submits {
				for _, w := range waits {
					t.Run(fmt.Sprintf("prio=%v/queue%d/%s/%s", prio, queue, sub, w), func(t *testing.T) {
						synctest.Test(t, func(t *testing.T) { nestedCombination(t, prio, queue, sub, w) })
					})
				}
			}
		}
	}
}

func nestedCombination(t *testing.T, prio bool, queue int, sub, w string) {
	cfg := pool.Config{MaxWorkers: 1, QueueCapacity: queue}
	if prio {
		cfg.Priorities = &bulkhead.Priorities{}
	}
	b, err := pool.New("nested", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(bubbleGuard(t)) }) // unblocks what a failure left
	var e executing
	leaf := func(i int) func(context.Context) (int, error) {
		return func(context.Context) (int, error) { e.enter(); defer e.leave(); return i, nil }
	}
	outer, err := pool.Submit(context.Background(), b, func(ctx context.Context) (int, error) {
		e.enter()
		defer e.leave()
		var fs []*future.Future[int]
		for i := range 3 {
			var f *future.Future[int]
			var err error
			e.blocked(func() {
				switch sub {
				case "Submit":
					f, err = pool.Submit(ctx, b, leaf(i))
				case "Go":
					f, err = pool.Go(ctx, b, leaf(i))
				case "TryGo", "Bulkhead.Go":
					var g *future.Future[struct{}]
					fn := func(ctx context.Context) error { _, err := leaf(i)(ctx); return err }
					if sub == "TryGo" {
						g, err = b.TryGo(ctx, fn)
					} else {
						g, err = b.Go(ctx, fn)
					}
					if err == nil {
						f = future.Then(g, func(struct{}) (int, error) { return i, nil })
					}
				}
			})
			if errors.Is(err, bulkhead.ErrBulkheadFull) && (sub == "Submit" || sub == "TryGo") {
				continue // they never wait: refused at once
			}
			if err != nil {
				return 0, err
			}
			fs = append(fs, f)
		}
		var err error
		e.blocked(func() {
			switch w {
			case "Wait", "Then", "WithTimeout":
				wctx := ctx
				if w == "WithTimeout" {
					var cancel context.CancelFunc
					wctx, cancel = context.WithTimeout(ctx, time.Hour)
					defer cancel()
				}
				for _, f := range fs {
					if w == "Then" {
						f = future.Then(f, func(v int) (int, error) { return v, nil })
					}
					if _, err = f.Wait(wctx); err != nil {
						return
					}
				}
			case "All":
				_, err = future.All(ctx, fs...)
			case "Settle":
				future.Settle(ctx, fs...)
			case "First":
				if len(fs) > 0 {
					_, err = future.First(ctx, fs...)
				}
			case "Newest": // the newest first: it is queued behind the others
				for i := len(fs) - 1; i >= 0 && err == nil; i-- {
					_, err = fs[i].Wait(ctx)
				}
			}
		})
		return len(fs), err
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := outer.Wait(bubbleGuard(t))
	if err != nil {
		t.Fatalf("the waiting task: %v", err)
	}
	if (sub == "Go" || sub == "Bulkhead.Go") && n != 3 {
		t.Fatalf("%d of 3 tasks accepted, want every one: %s waits for room", n, sub)
	}
	if p := e.peak.Load(); p != 1 {
		t.Fatalf("%d task functions executed at once on a pool of 1 worker", p)
	}
	if err := b.Close(bubbleGuard(t)); err != nil {
		t.Fatal(err)
	}
}

// Chaos with timed nested waits, under -race: tasks submit children (with
// Submit and with Go), wait for them with short deadlines from their own
// context, gather them, panic, call runtime.Goexit, cancel futures, while
// MaxWorkers is resized between 2 and 3 and Close races the end. The
// high-water mark of executing task functions, recorded inside them, never
// exceeds the largest MaxWorkers, and every accepted task completes.
func TestChaosTimedNestedWaitsKeepTheBound(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for it := range rounds {
		timedNestedRound(t, it)
		if t.Failed() {
			return
		}
	}
}

func timedNestedRound(t *testing.T, it int) {
	resize := it%2 == 1
	b, err := pool.New("chaos", pool.Config{MaxWorkers: 2, QueueCapacity: 1 + it%4})
	if err != nil {
		t.Fatal(err)
	}
	var e executing
	var task func(depth int, seed uint64) func(context.Context) (int, error)
	task = func(depth int, seed uint64) func(context.Context) (int, error) {
		return func(ctx context.Context) (int, error) {
			e.enter()
			defer e.leave()
			rng := rand.New(rand.NewPCG(seed, uint64(depth)))
			spin(rng.IntN(50))
			var fs []*future.Future[int]
			for i := range rng.IntN(4) {
				if depth >= 4 {
					break
				}
				var f *future.Future[int]
				var err error
				next := task(depth+1, seed*31+uint64(i))
				e.blocked(func() {
					if rng.IntN(2) == 0 {
						f, err = pool.Go(ctx, b, next)
					} else {
						f, err = pool.Submit(ctx, b, next)
					}
				})
				if err != nil {
					continue
				}
				fs = append(fs, f)
			}
			switch rng.IntN(8) {
			case 0:
				panic("chaos")
			case 1:
				runtime.Goexit()
			case 2:
				for _, f := range fs {
					f.Cancel()
				}
			}
			for _, f := range fs {
				wctx, cancel := context.WithTimeout(ctx, time.Duration(rng.IntN(100))*time.Microsecond)
				e.blocked(func() {
					if rng.IntN(3) == 0 {
						_, _ = future.All(wctx, fs...)
					} else {
						_, _ = f.Wait(wctx)
					}
				})
				cancel()
			}
			spin(rng.IntN(50))
			return depth, nil
		}
	}
	stop := make(chan struct{})
	var resizer sync.WaitGroup
	if resize {
		resizer.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				cfg := b.Config()
				cfg.MaxWorkers = 2 + i%2
				_ = b.Reconfigure(cfg)
				runtime.Gosched()
			}
		})
	}
	var fs []*future.Future[int]
	for i := range 30 {
		f, err := pool.Go(guardCtx(t), b, task(0, uint64(it*1000+i)))
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	future.Settle(guardCtx(t), fs...)
	close(stop)
	resizer.Wait()
	if err := b.Close(guardCtx(t)); err != nil {
		t.Fatal(err)
	}
	limit := int32(2)
	if resize {
		limit = 3
	}
	if p := e.peak.Load(); p > limit {
		t.Fatalf("round %d: %d task functions executed at once, MaxWorkers at most %d", it, p, limit)
	}
	if s := b.Stats(); s.InFlight != 0 || s.QueueDepth != 0 || s.Permitted != s.Finished {
		t.Fatalf("round %d: Stats %+v", it, s)
	}
}

// spin does n units of work without blocking.
func spin(n int) {
	for range n {
		runtime.Gosched()
	}
}
