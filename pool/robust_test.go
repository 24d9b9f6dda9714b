package pool_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// Submit never blocks, even when every goroutine of the ants pool is still
// busy with the callbacks of tasks that have finished (their slots are free,
// so the bulkhead admits the task). With MaxWorkers 1 the ants pool has two
// goroutines; here both sit in a slow callback, one a subscriber and one a
// Then callback. In the synctest bubble, "Submit has not returned once
// everything is blocked" means it is blocked.
func TestSubmitNeverBlocks(t *testing.T) {
	for _, via := range []string{"subscriber", "Then"} {
		t.Run(via, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, err := pool.New("test", pool.Config{MaxWorkers: 1})
				if err != nil {
					t.Fatal(err)
				}
				hold := make(chan struct{})
				in := make(chan struct{}, 2)
				slow := func() { in <- struct{}{}; <-hold }
				if via == "subscriber" {
					b.Subscribe(func(e bulkhead.Event) {
						if e.Type == bulkhead.EventFinished {
							slow()
						}
					})
				}
				for range 2 {
					goOn := make(chan struct{})
					f := mustSubmit(t, b, func(context.Context) (int, error) { <-goOn; return 1, nil })
					if via == "Then" {
						future.Then(f, func(v int) (int, error) { slow(); return v, nil })
					}
					close(goOn)
					<-in // the task is done; its goroutine is held in the callback
				}
				if s := b.Stats(); s.InFlight != 0 || s.Finished != 2 {
					t.Fatalf("Stats %+v, want both tasks finished", s)
				}
				done := make(chan error, 1)
				var ran atomic.Bool
				go func() {
					_, err := pool.Submit(context.Background(), b, func(context.Context) (int, error) { ran.Store(true); return 3, nil })
					done <- err
				}()
				synctest.Wait()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("third Submit: %v", err)
					}
					synctest.Wait()
					if !ran.Load() {
						t.Error("the third task did not run while the callbacks held their goroutines")
					}
					close(hold)
				default:
					t.Errorf("the third Submit blocked although no task was running: %+v", b.Stats())
					close(hold)
					<-done
				}
				if err := b.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				atRest(t, b)
			})
		})
	}
}

// Once Close has returned nil, every later Close returns nil, whatever its
// context: a released bulkhead is checked before an ended ctx.
func TestCloseTwiceWithEndedContext(t *testing.T) {
	b, err := pool.New("test", pool.Config{MaxWorkers: 1})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, mustSubmit(t, b, func(context.Context) (int, error) { return 1, nil }))
	if err := b.Close(guardCtx(t)); err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 200 {
		if err := b.Close(ended); err != nil {
			t.Fatalf("Close #%d with an ended context after a successful Close: %v", i+2, err)
		}
	}
}

// goexitOnce returns a subscriber that calls runtime.Goexit the first time
// it sees an event of type typ once armed, as t.FailNow would in a test's
// callback.
func goexitOnce(typ bulkhead.EventType, armed *atomic.Bool) func(bulkhead.Event) {
	var done atomic.Bool
	return func(e bulkhead.Event) {
		if e.Type == typ && armed.Load() && done.CompareAndSwap(false, true) {
			runtime.Goexit()
		}
	}
}

// A callback that calls runtime.Goexit on the worker that finished task A,
// after the worker has taken queued task B: A's future still completes, B
// still runs, and Close returns.
func TestGoexitInCallbackAfterTask(t *testing.T) {
	for _, via := range []string{"subscriber", "Then"} {
		t.Run(via, func(t *testing.T) {
			b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1})
			if via == "subscriber" {
				var armed atomic.Bool
				armed.Store(true)
				b.Subscribe(goexitOnce(bulkhead.EventFinished, &armed))
			}
			release := make(chan struct{})
			a := mustSubmit(t, b, func(context.Context) (int, error) { <-release; return 1, nil })
			var then *future.Future[int]
			if via == "Then" {
				then = future.Then(a, func(int) (int, error) { runtime.Goexit(); return 0, nil })
			}
			bq := mustSubmit(t, b, func(context.Context) (int, error) { return 2, nil })
			close(release)
			if v, err := wait(t, a); v != 1 || err != nil {
				t.Fatalf("A: %v, %v", v, err)
			}
			if v, err := wait(t, bq); v != 2 || err != nil {
				t.Fatalf("queued B: %v, %v; stats %+v", v, err, b.Stats())
			}
			if then != nil {
				// It fails on A's worker, which handed B to another worker
				// before running the callback: wait for it.
				if _, err := wait(t, then); err == nil {
					t.Fatalf("the Then future of a callback that never returned: %v, want failed", err)
				}
			}
			atRest(t, b)
		})
	}
}

// A subscriber that calls runtime.Goexit in a task's permitted event (on
// the worker, before the task runs) fails that task unrun, saying why, and
// strands nothing: the slot is freed and the queued task after it runs. One
// that calls it in the limit-changed event of Reconfigure finds the new
// limits applied and the queued tasks started.
func TestGoexitInSubscriberWhileStarting(t *testing.T) {
	t.Run("worker", func(t *testing.T) {
		b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1})
		var armed atomic.Bool
		armed.Store(true)
		b.Subscribe(goexitOnce(bulkhead.EventPermitted, &armed))
		g := newGate()
		first := mustSubmit(t, b, g.task(1))
		second := mustSubmit(t, b, func(context.Context) (int, error) { return 2, nil })
		if _, err := wait(t, first); err == nil || !strings.Contains(err.Error(), "did not run") {
			t.Fatalf("first: %v, want the not-run error", err)
		}
		if v, err := wait(t, second); v != 2 || err != nil {
			t.Fatalf("second: %v, %v", v, err)
		}
		if g.ran.Load() != 0 {
			t.Fatal("the first task ran")
		}
		if s := atRest(t, b); s.Permitted != 2 || s.Finished != 2 || s.Failed != 1 {
			t.Fatalf("Stats %+v", s)
		}
	})
	t.Run("Reconfigure", func(t *testing.T) {
		b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 3})
		var armed atomic.Bool
		b.Subscribe(goexitOnce(bulkhead.EventLimitChanged, &armed))
		g := newGate()
		fs := []*future.Future[int]{mustSubmit(t, b, g.task(0))}
		g.waitStarted(t, 1)
		for i := range 3 {
			fs = append(fs, mustSubmit(t, b, g.task(i+1)))
		}
		armed.Store(true)
		exited := make(chan struct{})
		go func() {
			defer close(exited)
			b.Reconfigure(pool.Config{MaxWorkers: 4, QueueCapacity: 3})
			t.Error("Reconfigure returned: the subscriber did not call Goexit")
		}()
		recv(t, exited, "Reconfigure's goroutine to end")
		g.waitStarted(t, 3) // all three queued tasks started
		g.release()
		if _, err := future.All(guardCtx(t), fs...); err != nil {
			t.Fatal(err)
		}
		if s := atRest(t, b); s.MaxConcurrentCalls != 4 || s.Permitted != 4 {
			t.Fatalf("Stats %+v", s)
		}
	})
}

// A subscriber that calls runtime.Goexit while Close drops the queue does
// not leave the other dropped tasks' futures pending.
func TestGoexitInSubscriberWhileDropping(t *testing.T) {
	b, err := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 3})
	if err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	armed.Store(true)
	b.Subscribe(goexitOnce(bulkhead.EventCancelled, &armed))
	g := newGate()
	running := mustSubmit(t, b, g.task(0))
	g.waitStarted(t, 1)
	var queued []*future.Future[int]
	for i := range 3 {
		queued = append(queued, mustSubmit(t, b, g.task(i+1)))
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		b.Close(ended)
		t.Error("Close returned: the subscriber did not call Goexit")
	}()
	recv(t, exited, "the Close goroutine to end")
	for i, f := range queued {
		if _, err := wait(t, f); err != bulkhead.ErrClosed {
			t.Fatalf("queued task %d: %v, want ErrClosed", i+1, err)
		}
	}
	g.release()
	wait(t, running)
	if err := b.Close(guardCtx(t)); err != nil {
		t.Fatal(err)
	}
	if s := atRest(t, b); s.Cancelled != 3 {
		t.Fatalf("Stats %+v", s)
	}
}

// A task that started at once, and looks at its context only after the
// submitter's context ended, sees it ended, through Err, Done, a derived
// context and AfterFunc, with the submitter's cause (context.Cause), and
// still sees the submitter's values.
func TestTaskContextSeesParentEndLate(t *testing.T) {
	for _, look := range []string{"Err", "Done", "derived", "AfterFunc"} {
		t.Run(look, func(t *testing.T) {
			b := newPool(t, pool.Config{MaxWorkers: 1})
			parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), ctxKey{}, "v"))
			started, goOn := make(chan struct{}), make(chan struct{})
			f, err := pool.Submit(parent, b, func(ctx context.Context) (string, error) {
				close(started)
				<-goOn
				switch look {
				case "Err":
					if ctx.Err() == nil {
						return "", errors.New("Err is nil after the submitter's context ended")
					}
				case "Done":
					<-ctx.Done()
				case "derived":
					d, stop := context.WithCancel(ctx)
					defer stop()
					<-d.Done()
				case "AfterFunc":
					fired := make(chan struct{})
					context.AfterFunc(ctx, func() { close(fired) })
					<-fired
				}
				if c := context.Cause(ctx); c == nil || c.Error() != "the submitter's own cause" {
					return "", fmt.Errorf("Cause is %v, want the submitter's cause", c)
				}
				return ctx.Value(ctxKey{}).(string), ctx.Err()
			})
			if err != nil {
				t.Fatal(err)
			}
			recv(t, started, "the task to start")
			cancel(errors.New("the submitter's own cause"))
			close(goOn)
			if v, err := wait(t, f); v != "v" || err != context.Canceled {
				t.Fatalf("%q, %v; want v, context.Canceled", v, err)
			}
		})
	}
}

// context.Cause of a task's context cancelled through its future is
// context.Canceled.
func TestTaskContextCause(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1})
	parent, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	started := make(chan struct{})
	f, err := pool.Submit(parent, b, func(ctx context.Context) (error, error) {
		close(started)
		<-ctx.Done()
		return context.Cause(ctx), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, started, "the task to start")
	f.Cancel()
	if cause, err := wait(t, f); cause != context.Canceled || err != nil {
		t.Fatalf("Cause = %v (%v), want context.Canceled", cause, err)
	}
}

// A task's context after its future has completed (a goroutine of the task
// may hold it): its deadline, Done, Err and cause stay as they were when
// the task returned; only the submitter's values are gone, so that a held
// future does not keep them (TestCompletedFutureDoesNotRetainTask).
func TestTaskContextStableAfterCompletion(t *testing.T) {
	cause := errors.New("the request ended")
	for _, tc := range []struct {
		name   string
		end    bool // the submitter's context ends, with cause, while the task runs
		asks   bool // the task asks for Done
		wantCs error
	}{
		{"returned", false, false, context.Canceled},
		{"returned, Done asked", false, true, context.Canceled},
		{"submitter ended", true, false, cause},
		{"submitter ended, Done asked", true, true, cause},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1})
			deadline := time.Now().Add(time.Hour)
			vctx, stop := context.WithDeadline(context.WithValue(context.Background(), ctxKey{}, "v"), deadline)
			defer stop()
			parent, cancel := context.WithCancelCause(vctx)
			defer cancel(nil)
			var taskCtx context.Context
			f, err := pool.Submit(parent, b, func(ctx context.Context) (int, error) {
				taskCtx = ctx
				if tc.asks {
					ctx.Done()
				}
				if tc.end {
					cancel(cause)
				}
				return 0, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			wait(t, f)
			if err := b.Close(guardCtx(t)); err != nil { // the worker is done with the task
				t.Fatal(err)
			}
			d, ok := taskCtx.Deadline()
			done := false
			select {
			case <-taskCtx.Done():
				done = true
			default:
			}
			if !ok || !d.Equal(deadline) || !done || !errors.Is(taskCtx.Err(), context.Canceled) || context.Cause(taskCtx) != tc.wantCs {
				t.Fatalf("after completion: Deadline %v %v, Done closed %v, Err %v, Cause %v; want %v true, true, Canceled, %v",
					d, ok, done, taskCtx.Err(), context.Cause(taskCtx), deadline, tc.wantCs)
			}
			if v := taskCtx.Value(ctxKey{}); v != nil {
				t.Fatalf("after completion the context still carries the submitter's value %v", v)
			}
		})
	}
}
