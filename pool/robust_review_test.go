package pool_test

// Found by a review of the pool's core (each failed before its fix).

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// hookCtx is a context whose end runs the functions registered through its
// AfterFunc method (the context package's afterFuncer hook) in the order
// it is told to; between them it can wait.
type hookCtx struct {
	context.Context // Background: no deadline, no values
	mu              sync.Mutex
	done            chan struct{}
	err             error
	fns             []func()
}

func newHookCtx() *hookCtx { return &hookCtx{Context: context.Background(), done: make(chan struct{})} }

func (c *hookCtx) Done() <-chan struct{} { return c.done }
func (c *hookCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
func (c *hookCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fns = append(c.fns, f)
	return func() bool { return false }
}
func (c *hookCtx) registered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.fns)
}

// A queued task whose submitter's context ends must fail with that
// context's error. When a Wait with the submitter's context has asked for
// the task's Signal (which replaces the node's parent by a
// context.WithCancel of it), the queue's watch can run before that child
// is cancelled: dropQueued reads n.parent.Err() == nil, and the future of
// a task that never ran completes with (zero, nil).
func TestQueuedTaskDroppedAfterSignalFailsWithItsContextsError(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1})
	release := make(chan struct{})
	blocker, err := pool.Submit(context.Background(), b, func(context.Context) (int, error) { <-release; return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx := newHookCtx()
	ran := false
	f, err := pool.Submit(ctx, b, func(context.Context) (int, error) { ran = true; return 42, nil })
	if err != nil {
		t.Fatal(err)
	}
	// one watch: the queue's context.AfterFunc
	if !until(func() bool { return ctx.registered() == 1 }) {
		t.Fatal("the queue did not watch the context")
	}
	waited := make(chan error, 1)
	go func() { _, err := f.Wait(ctx); waited <- err }()
	// two: Wait's Signal made the node's context.WithCancel of ctx
	if !until(func() bool { return ctx.registered() == 2 }) {
		t.Fatal("Wait did not ask for the task's Signal")
	}
	ctx.mu.Lock()
	ctx.err = context.Canceled
	close(ctx.done)
	fns := ctx.fns
	ctx.mu.Unlock()
	fns[0]() // the queue's watch first: dropBy runs on a goroutine of its own
	<-f.Done()
	fns[1]() // then the WithCancel child

	v, ferr := f.Wait(context.Background())
	close(release)
	blocker.Wait(context.Background())
	<-waited
	if ran {
		t.Fatal("the task ran")
	}
	if ferr == nil {
		t.Fatalf("future of a task dropped unrun because its context ended = (%d, nil); want context.Canceled", v)
	}
}

// The root package's "Callbacks": a callback that calls runtime.Goexit
// leaves the module's state consistent. In work's defer (the task panicked
// or called runtime.Goexit), finish runs the future's callbacks before
// b.workDone(): a callback's Goexit aborts the rest of that deferred
// function, the busy count is never given back, and Close waits forever.
func TestGoexitInACallbackAfterAPanicLeavesCloseWorking(t *testing.T) {
	for _, tc := range []struct {
		name string
		exit func()
	}{
		{"panic", func() { panic("boom") }},
		{"Goexit", runtime.Goexit},
		{"return (control: passes)", func() {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 1})
			if err != nil {
				t.Fatal(err)
			}
			hooked := make(chan struct{})
			f, err := pool.Submit(context.Background(), b, func(context.Context) (int, error) {
				<-hooked
				tc.exit()
				return 0, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			ran := make(chan struct{})
			f.OnComplete(func(int, error) { close(ran); runtime.Goexit() })
			close(hooked)
			<-ran
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // a guard only: Close returns at once when nothing is lost
			defer cancel()
			if err := b.Close(ctx); err != nil {
				t.Fatalf("Close = %v (Stats %+v); want nil: the worker's busy count was lost", err, b.Stats())
			}
		})
	}
}

// A failing task of a Group stops the group from its worker before its
// slot is freed (finishMore calls grp.end first): grp.end drops the group's
// queued tasks, and droppedAll publishes EventCancelled for them on that
// worker. A subscriber that calls runtime.Goexit there (the callbacks
// contract allows it: "nothing is lost") aborts finishMore before it takes
// b.mu: the failing task is never counted finished, its slot is never
// freed, the group's Wait never returns, Close never returns.
func TestGoexitInASubscriberWhileAGroupStopsLosesNoSlot(t *testing.T) {
	b, err := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	g := pool.NewGroup[int](context.Background(), b)
	g.SetLimit(-1)
	release := make(chan struct{})
	g.Go(func(context.Context) (int, error) { <-release; return 0, errors.New("fail") })
	g.Go(func(context.Context) (int, error) { return 1, nil }) // queued
	var once atomic.Bool
	b.Subscribe(func(e bulkhead.Event) {
		if e.Type == bulkhead.EventCancelled && once.CompareAndSwap(false, true) {
			runtime.Goexit()
		}
	})
	close(release)

	waited := make(chan struct{})
	go func() { g.Wait(); close(waited) }()
	guard := time.After(2 * time.Second) // a guard only: Wait returns at once when nothing is lost
	select {
	case <-waited:
	case <-guard:
		t.Errorf("Group.Wait did not return (Stats %+v)", b.Stats())
	}
	if s := b.Stats(); s.InFlight != 0 || s.AvailableConcurrentCalls != 1 {
		t.Errorf("after the group ended: InFlight %d, AvailableConcurrentCalls %d; want 0, 1 (the failing task's slot is lost)", s.InFlight, s.AvailableConcurrentCalls)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Errorf("Close = %v; want nil", err)
	}
}

// popLocked/takeLocked never start a queued task whose submitter's context
// has ended (or whose QueueTimeout or slack point has come) while the
// drop that the watch (or timer) runs has not taken the lock yet. help,
// which starts a queued task in a waiter's slot, makes none of these
// checks: the task starts though its context had ended. Here the watch's
// callback is held back by the context (context.AfterFunc runs f "in its
// own goroutine after ctx is canceled": later is legal). The control
// (the worker's next task, popLocked) sheds it.
func TestHelpRefusesAQueuedTaskWhoseContextEnded(t *testing.T) {
	for _, help := range []bool{true, false} {
		name := "help"
		if !help {
			name = "popLocked (control: passes)"
		}
		t.Run(name, func(t *testing.T) {
			b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1})
			sub := newHookCtx()
			queued, ended := make(chan struct{}), make(chan struct{})
			ran := make(chan struct{}, 1)
			var inner *future.Future[int]
			outer, err := pool.Submit(context.Background(), b, func(ctx context.Context) (int, error) {
				f, err := pool.Submit(sub, b, func(context.Context) (int, error) { ran <- struct{}{}; return 1, nil })
				if err != nil {
					return 0, err
				}
				inner = f
				close(queued)
				<-ended
				if help {
					return f.Wait(ctx) // lends this slot, f being queued
				}
				return 0, nil // the worker's next task is f
			})
			if err != nil {
				t.Fatal(err)
			}
			<-queued
			sub.mu.Lock()
			sub.err = context.Canceled
			close(sub.done) // ended; its watch not run yet
			fns := sub.fns
			sub.mu.Unlock()
			close(ended)
			outer.Wait(guardCtx(t))
			v, err := inner.Wait(guardCtx(t))
			for _, f := range fns {
				f()
			}
			select {
			case <-ran:
				t.Fatalf("a queued task whose submitter's context had ended was started (its future: %d, %v)", v, err)
			default:
			}
		})
	}
}
