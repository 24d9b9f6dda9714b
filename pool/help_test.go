package pool_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// Helping (a Wait inside a task starting the queued task it waits for)
// assumes that the task's own goroutine waits. Waits from goroutines the
// task started, with its context, while the task itself runs on, lend its
// slot to one queued task at a time: at most MaxWorkers+1 tasks run at
// once on a pool whose one task does so, and the other waits start their
// tasks in turn, so all of them complete (even the task's own Wait, made
// while its slot was lent).
func TestHelpFromGoroutinesOfATaskIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 10})
		if err != nil {
			t.Fatal(err)
		}
		const leaves = 5
		var cur, peak atomic.Int32
		enter := func() {
			if c := cur.Add(1); c > peak.Load() {
				peak.Store(c)
			}
		}
		started := make(chan struct{}, leaves)
		gate := make(chan struct{})
		leaf := func(context.Context) error {
			enter()
			defer cur.Add(-1)
			started <- struct{}{}
			<-gate
			return nil
		}
		checked := make(chan struct{})
		parent, err := b.TryGo(context.Background(), func(ctx context.Context) error {
			enter()
			defer cur.Add(-1)
			var fs []*future.Future[struct{}]
			for range leaves {
				f, err := b.TryGo(ctx, leaf)
				if err != nil {
					return err
				}
				fs = append(fs, f)
			}
			var wg sync.WaitGroup
			for _, f := range fs[:leaves-1] {
				wg.Go(func() {
					if _, err := f.Wait(ctx); err != nil {
						t.Errorf("Wait from a goroutine of the task: %v", err)
					}
				})
			}
			<-checked
			// The task's own Wait, while its slot is lent to a leaf.
			_, err := fs[leaves-1].Wait(ctx)
			wg.Wait()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // every goroutine of the task is blocked
		if n := len(started); n != 1 {
			t.Errorf("%d leaves started beside the running task on a pool of one worker, want 1", n)
		}
		if s := b.Stats(); s.InFlight != 2 || s.QueueDepth != leaves-1 {
			t.Errorf("Stats %+v, want InFlight 2 (the task and one leaf in its slot) and %d queued", s, leaves-1)
		}
		close(checked)
		close(gate)
		if _, err := parent.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if p := peak.Load(); p != 2 {
			t.Errorf("peak of %d tasks running at once, want 2 (MaxWorkers 1, plus one in the lent slot)", p)
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s := b.Stats(); s.Permitted != leaves+1 || s.Finished != leaves+1 || s.Failed != 0 || s.InFlight != 0 {
			t.Fatalf("Stats %+v", s)
		}
	})
}

// A helped task runs in its lender's slot, and takes no other: with
// MaxWorkers 2, A blocked helping Q1 (in A's slot) and X running, X
// finishing frees a slot, and the next queued task Q2 starts in it at once,
// while Q1 still runs; once Q1 has finished, A has its slot back.
func TestHelpedTaskFinishingStartsTheNextQueued(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 2, QueueCapacity: 10})
	xRelease, q1Started, q1Release, aRelease := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	q2Ran := make(chan struct{})
	aReady := make(chan *future.Future[struct{}], 1)
	x, _ := b.TryGo(context.Background(), func(context.Context) error { <-xRelease; return nil })
	a, _ := b.TryGo(context.Background(), func(ctx context.Context) error {
		f := <-aReady
		if _, err := f.Wait(ctx); err != nil { // starts Q1 in A's slot
			return err
		}
		<-aRelease // A keeps its worker, and does not wait for Q2
		return nil
	})
	q1, _ := b.TryGo(context.Background(), func(context.Context) error { close(q1Started); <-q1Release; return nil })
	q2, _ := b.TryGo(context.Background(), func(context.Context) error { close(q2Ran); return nil })
	aReady <- q1
	recv(t, q1Started, "Q1 to start in A's slot")
	if s := b.Stats(); s.InFlight != 3 || s.AvailableConcurrentCalls != 0 || s.QueueDepth != 1 {
		t.Fatalf("Stats %+v, want X, A and Q1 running (Q1 in A's slot), Q2 queued", s)
	}
	close(xRelease)
	wait(t, x)
	recv(t, q2Ran, "Q2 to start in the slot X freed")
	wait(t, q2)
	if s := b.Stats(); s.InFlight != 2 || s.AvailableConcurrentCalls != 1 || s.QueueDepth != 0 {
		t.Fatalf("Stats %+v, want A and Q1 running in one slot", s)
	}
	close(q1Release)
	wait(t, q1)
	close(aRelease)
	wait(t, a)
	if s := atRest(t, b); s.Permitted != 4 || s.Finished != 4 || s.Failed != 0 {
		t.Fatalf("Stats %+v", s)
	}
}

// future.All, Settle and First inside a task start the queued tasks of the
// task's pool that they wait for, one at a time: the fan-out-and-gather
// that docs/pool.md recommends completes on a pool of one worker.
func TestGatherInsideTaskHelps(t *testing.T) {
	gathers := map[string]func(ctx context.Context, fs ...*future.Future[int]) (int, error){
		"All": func(ctx context.Context, fs ...*future.Future[int]) (int, error) {
			vs, err := future.All(ctx, fs...)
			sum := 0
			for _, v := range vs {
				sum += v
			}
			return sum, err
		},
		"Settle": func(ctx context.Context, fs ...*future.Future[int]) (int, error) {
			vs, errs := future.Settle(ctx, fs...)
			sum := 0
			for _, v := range vs {
				sum += v
			}
			return sum, errors.Join(errs...)
		},
		"First": func(ctx context.Context, fs ...*future.Future[int]) (int, error) {
			v, err := future.First(ctx, fs...)
			if err != nil {
				return 0, err
			}
			for _, f := range fs[1:] { // the rest are started in turn, too
				if _, err := f.Wait(ctx); err != nil {
					return 0, err
				}
			}
			return v * 3, nil
		},
	}
	for name, gather := range gathers {
		t.Run(name, func(t *testing.T) {
			b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 10})
			parent := mustSubmit(t, b, func(ctx context.Context) (int, error) {
				var fs []*future.Future[int]
				for range 3 {
					f, err := pool.Submit(ctx, b, func(context.Context) (int, error) { return 2, nil })
					if err != nil {
						return 0, err
					}
					fs = append(fs, f)
				}
				return gather(ctx, fs...)
			})
			if v, err := wait(t, parent); v != 6 || err != nil {
				t.Fatalf("%s inside a task of a pool of one worker: %d, %v (Stats %+v)", name, v, err, b.Stats())
			}
			if s := atRest(t, b); s.Permitted != 4 || s.Finished != 4 {
				t.Fatalf("Stats %+v", s)
			}
		})
	}
}

// Wait on a Then future (or a chain of them) inside a task starts the
// queued task at the chain's source.
func TestWaitOnThenInsideTaskHelps(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 10})
	parent := mustSubmit(t, b, func(ctx context.Context) (int, error) {
		f, err := pool.Submit(ctx, b, func(context.Context) (int, error) { return 1, nil })
		if err != nil {
			return 0, err
		}
		g := future.Then(f, func(v int) (int, error) { return v + 1, nil })
		g = future.Then(g, func(v int) (int, error) { return v * 10, nil })
		return g.Wait(ctx)
	})
	if v, err := wait(t, parent); v != 20 || err != nil {
		t.Fatalf("Wait on Then(queued) inside a task: %d, %v", v, err)
	}
	if s := atRest(t, b); s.Permitted != 2 || s.Finished != 2 {
		t.Fatalf("Stats %+v", s)
	}
}

// A helped task runs as a task on a worker does: its runtime.Goexit or
// panic fails its own future, not the task that waits for it, and its
// future keeps nothing of it once complete.
func TestHelpedTaskExitsAlone(t *testing.T) {
	cases := map[string]struct {
		fn   func()
		want func(error) bool
	}{
		"Goexit": {func() { runtime.Goexit() }, func(err error) bool { return err != nil && !errors.As(err, new(*bulkhead.PanicError)) }},
		"panic":  {func() { panic("child") }, func(err error) bool { return errors.As(err, new(*bulkhead.PanicError)) }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			collected := make(chan struct{}, 1)
			var child *future.Future[int]
			var childErr error
			func() {
				b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 10})
				parent := mustSubmit(t, b, func(ctx context.Context) (int, error) {
					captured := &[1 << 16]byte{1}
					runtime.AddCleanup(captured, func(struct{}) { collected <- struct{}{} }, struct{}{})
					f, err := pool.Submit(ctx, b, func(context.Context) (int, error) {
						if captured[0] == 1 {
							tc.fn()
						}
						return 0, nil
					})
					if err != nil {
						return 0, err
					}
					child = f
					_, childErr = f.Wait(ctx)
					return 7, nil
				})
				if v, err := wait(t, parent); v != 7 || err != nil {
					t.Fatalf("the waiting task: %d, %v; want it to go on after its helped task's %s", v, err, name)
				}
				if !tc.want(childErr) {
					t.Fatalf("the helped task's future: %v", childErr)
				}
				if s := atRest(t, b); s.Permitted != 2 || s.Finished != 2 || s.Failed != 1 {
					t.Fatalf("Stats %+v", s)
				}
			}()
			if len(collect(collected, 1)) < 1 {
				t.Fatal("the completed future of the helped task retains its function")
			}
			if _, err := child.Result(); !tc.want(err) {
				t.Fatal(err)
			}
		})
	}
}

// A callback of a helped task's future runs on the helped task's worker, as
// for any task, not on the waiting task's goroutine: a Goexit in it leaves
// the waiting task running and the pool consistent.
func TestHelpedTaskCallbackRunsOnItsWorker(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 10})
	var waiterG, callbackG atomic.Uint64
	called := make(chan struct{})
	parent := mustSubmit(t, b, func(ctx context.Context) (int, error) {
		waiterG.Store(goid())
		f, err := pool.Submit(ctx, b, func(context.Context) (int, error) { return 1, nil })
		if err != nil {
			return 0, err
		}
		f.OnComplete(func(int, error) {
			callbackG.Store(goid())
			close(called)
			runtime.Goexit() // the callback contract: it ends that goroutine only
		})
		v, err := f.Wait(ctx)
		return v + 1, err
	})
	if v, err := wait(t, parent); v != 2 || err != nil {
		t.Fatalf("the waiting task: %d, %v", v, err)
	}
	recv(t, called, "the callback")
	if w, c := waiterG.Load(), callbackG.Load(); c == 0 || w == c {
		t.Fatalf("the helped task's callback ran on goroutine %d, the waiting task's is %d", c, w)
	}
	if s := atRest(t, b); s.Permitted != 2 || s.Finished != 2 || s.Failed != 0 {
		t.Fatalf("Stats %+v", s)
	}
}

// Many tasks on a small pool fan out to it and gather, from their own
// goroutine and from goroutines they start, while children panic, call
// runtime.Goexit, fail or are cancelled: every task completes, and the
// counters stay exact.
func TestHelpUnderMixedOutcomes(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 2, QueueCapacity: 64})
	const parents, children = 16, 4
	child := func(i int) func(context.Context) (int, error) {
		return func(ctx context.Context) (int, error) {
			switch i % 5 {
			case 1:
				panic("child")
			case 2:
				runtime.Goexit()
			case 3:
				return 0, errors.New("child failed")
			}
			return 1, nil
		}
	}
	var fs []*future.Future[int]
	for p := range parents {
		f, err := pool.Go(guardCtx(t), b, func(ctx context.Context) (int, error) {
			var cs []*future.Future[int]
			for i := range children {
				c, err := pool.Go(ctx, b, child(p+i))
				if err != nil {
					return 0, err
				}
				cs = append(cs, c)
			}
			if p%4 == 0 {
				cs[children-1].Cancel()
			}
			switch p % 3 {
			case 0:
				future.Settle(ctx, cs...)
			case 1:
				var wg sync.WaitGroup
				for _, c := range cs {
					wg.Go(func() { c.Wait(ctx) })
				}
				wg.Wait()
			default:
				for _, c := range cs {
					c.Wait(ctx)
				}
			}
			for _, c := range cs {
				if _, err := c.Result(); err == future.ErrNotDone {
					return 0, errors.New("a child is not done")
				}
			}
			return 1, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	if _, errs := future.Settle(guardCtx(t), fs...); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	s := atRest(t, b)
	if total := uint64(parents * (children + 1)); s.Permitted+s.Cancelled != total || s.Rejected != 0 {
		t.Fatalf("Stats %+v, want %d permitted or cancelled", s, total)
	}
}
