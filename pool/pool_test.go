package pool_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

var _ bulkhead.Instance = (*pool.Bulkhead)(nil)

func TestNewValidates(t *testing.T) {
	ok := pool.Config{MaxWorkers: 1}
	for _, tc := range []struct {
		name string
		cfg  pool.Config
		want string
	}{
		{"", ok, "name must not be empty"},
		{"p\xff", ok, `name "p\xff" is not valid UTF-8`},
		{"p", pool.Config{}, "maxWorkers must be >= 1, got 0"},
		{"p", pool.Config{MaxWorkers: -3}, "maxWorkers must be >= 1, got -3"},
		{"p", pool.Config{MaxWorkers: pool.MaxLimit + 1}, "maxWorkers must be <= 1048576, got 1048577"},
		{"p", pool.Config{MaxWorkers: 1, QueueCapacity: -1}, "queueCapacity must be >= 0, got -1"},
		{"p", pool.Config{MaxWorkers: 1, QueueCapacity: pool.MaxLimit + 1}, "queueCapacity must be <= 1048576, got 1048577"},
		{"p", pool.Config{MaxWorkers: 1, QueueTimeout: -time.Second}, "queueTimeout must be >= 0, got -1s"},
		{"p", pool.Config{MaxWorkers: 1, KeepAlive: -time.Millisecond}, "keepAlive must be >= 0, got -1ms"},
	} {
		b, err := pool.New(tc.name, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q, %+v) = %v; want error containing %q", tc.name, tc.cfg, err, tc.want)
		}
		if b != nil {
			t.Errorf("New returned a bulkhead with an error")
		}
	}
	b := newPool(t, ok)
	if err := b.Reconfigure(pool.Config{MaxWorkers: 0}); err == nil || !strings.Contains(err.Error(), `pool "test": maxWorkers must be >= 1, got 0`) {
		t.Errorf("Reconfigure: %v", err)
	}
	if b.Config() != ok {
		t.Errorf("a rejected Reconfigure changed the config to %+v", b.Config())
	}
}

func TestDefaultConfig(t *testing.T) {
	c := pool.DefaultConfig()
	want := pool.Config{MaxWorkers: runtime.GOMAXPROCS(0), QueueCapacity: 100, KeepAlive: pool.DefaultKeepAlive}
	if c != want {
		t.Fatalf("DefaultConfig() = %+v, want %+v", c, want)
	}
	b := newPool(t, pool.Config{MaxWorkers: 1}) // KeepAlive 0: the default
	if b.Name() != "test" || b.String() != `pool bulkhead "test"` {
		t.Fatalf("Name %q, String %q", b.Name(), b.String())
	}
	wantStats(t, b, bulkhead.Stats{MaxConcurrentCalls: 1, AvailableConcurrentCalls: 1})
}

func TestSubmitAndGo(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 2, QueueCapacity: 2})
	f := mustSubmit(t, b, func(context.Context) (string, error) { return "v", nil })
	if v, err := wait(t, f); v != "v" || err != nil {
		t.Fatalf("Submit: %q, %v", v, err)
	}
	boom := errors.New("boom")
	g, err := b.TryGo(context.Background(), func(context.Context) error { return boom })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wait(t, g); err != boom {
		t.Fatalf("Go: %v", err)
	}
	wantStats(t, b, bulkhead.Stats{MaxConcurrentCalls: 2, AvailableConcurrentCalls: 2, QueueCapacity: 2,
		Permitted: 2, Finished: 2, Failed: 1})
}

func TestStartQueueReject(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 2, QueueCapacity: 1})
	g := newGate()
	f1 := mustSubmit(t, b, g.task(1))
	f2 := mustSubmit(t, b, g.task(2))
	g.waitStarted(t, 2)
	f3 := mustSubmit(t, b, g.task(3))
	wantStats(t, b, bulkhead.Stats{MaxConcurrentCalls: 2, InFlight: 2, QueueDepth: 1, QueueCapacity: 1, Permitted: 2})

	f4, err := pool.Submit(context.Background(), b, g.task(4))
	var fe *bulkhead.FullError
	if f4 != nil || !errors.Is(err, bulkhead.ErrBulkheadFull) || !errors.As(err, &fe) {
		t.Fatalf("Submit on a full pool: %v, %v", f4, err)
	}
	if *fe != (bulkhead.FullError{Name: "test", Kind: bulkhead.Pool, MaxConcurrentCalls: 2, QueueCapacity: 1, Reason: bulkhead.ReasonFull}) {
		t.Fatalf("FullError = %+v", *fe)
	}
	if _, err := b.TryGo(context.Background(), func(context.Context) error { return nil }); !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("Go on a full pool: %v", err)
	}
	g.release()
	for i, f := range []*future.Future[int]{f1, f2, f3} {
		if v, err := wait(t, f); v != i+1 || err != nil {
			t.Fatalf("task %d: %d, %v", i+1, v, err)
		}
	}
	if g.ran.Load() != 3 {
		t.Fatalf("%d tasks ran, want 3", g.ran.Load())
	}
	s := atRest(t, b)
	if s.Permitted != 3 || s.Rejected != 2 || s.Cancelled != 0 {
		t.Fatalf("Stats %+v", s)
	}
}

func TestHandOffOnly(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1}) // QueueCapacity 0
	g := newGate()
	f := mustSubmit(t, b, g.task(1))
	g.waitStarted(t, 1)
	if _, err := pool.Submit(context.Background(), b, g.task(2)); !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("second Submit: %v", err)
	}
	g.release()
	wait(t, f)
	// The worker is free again the moment the future is done.
	f = mustSubmit(t, b, func(context.Context) (int, error) { return 0, nil })
	wait(t, f)
}

func TestRejectionDoesNotAllocate(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1})
	g := newGate()
	defer g.release()
	mustSubmit(t, b, g.task(1))
	mustSubmit(t, b, g.task(2))
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 0, nil }
	a := testing.AllocsPerRun(1000, func() {
		if _, err := pool.Submit(ctx, b, fn); err == nil {
			t.Fatal("not rejected")
		}
	})
	if a != 0 {
		t.Fatalf("rejection allocates %v times", a)
	}
}

func TestFIFO(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 50})
	g := newGate()
	mustSubmit(t, b, g.task(0))
	g.waitStarted(t, 1)
	var mu sync.Mutex
	var order []int
	var fs []*future.Future[int]
	for i := range 50 {
		fs = append(fs, mustSubmit(t, b, func(context.Context) (int, error) {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			return i, nil
		}))
	}
	g.release()
	if _, err := future.All(guardCtx(t), fs...); err != nil {
		t.Fatal(err)
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("run order %v", order)
		}
	}
}

func TestContextAlreadyDoneAndClosed(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fn := func(context.Context) (int, error) { t.Error("ran"); return 0, nil }
	if f, err := pool.Submit(ctx, b, fn); f != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Submit with a done ctx: %v, %v", f, err)
	}
	if err := b.Close(guardCtx(t)); err != nil {
		t.Fatal(err)
	}
	if f, err := pool.Submit(context.Background(), b, fn); f != nil || err != bulkhead.ErrClosed {
		t.Fatalf("Submit after Close: %v, %v", f, err)
	}
	if _, err := b.TryGo(context.Background(), func(context.Context) error { return nil }); err != bulkhead.ErrClosed {
		t.Fatalf("Go after Close: %v", err)
	}
	if err := b.Reconfigure(pool.Config{MaxWorkers: 2}); err != bulkhead.ErrClosed {
		t.Fatalf("Reconfigure after Close: %v", err)
	}
	wantStats(t, b, bulkhead.Stats{MaxConcurrentCalls: 1, AvailableConcurrentCalls: 1}) // counted nowhere
}

func TestNilFunctionPanics(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1})
	for _, fn := range []func(){
		func() { pool.Submit[int](context.Background(), b, nil) },
		func() { b.TryGo(context.Background(), nil) },
		func() { b.Subscribe(nil) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "nil function") {
					t.Errorf("recover() = %v", r)
				}
			}()
			fn()
		}()
	}
}

type ctxKey struct{}

func TestTaskContext(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 2})
	deadline := time.Now().Add(time.Hour)
	parent, cancelParent := context.WithDeadline(context.WithValue(context.Background(), ctxKey{}, "v"), deadline)
	defer cancelParent()

	var taskCtx context.Context
	f, err := pool.Submit(parent, b, func(ctx context.Context) (string, error) {
		taskCtx = ctx
		d, ok := ctx.Deadline()
		if !ok || !d.Equal(deadline) {
			t.Errorf("Deadline = %v, %v", d, ok)
		}
		return ctx.Value(ctxKey{}).(string), ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := wait(t, f); v != "v" || err != nil {
		t.Fatalf("%q, %v", v, err)
	}
	// The task's context ends once the task has returned.
	if !errors.Is(taskCtx.Err(), context.Canceled) {
		t.Fatalf("task ctx after return: %v", taskCtx.Err())
	}
	<-taskCtx.Done()
}

func TestRunningTaskCancelled(t *testing.T) {
	for _, how := range []string{"submitter ctx", "future"} {
		t.Run(how, func(t *testing.T) {
			b := newPool(t, pool.Config{MaxWorkers: 1})
			parent, cancel := context.WithCancel(context.Background())
			defer cancel()
			started := make(chan struct{})
			var child context.Context
			f, err := pool.Submit(parent, b, func(ctx context.Context) (int, error) {
				var stop context.CancelFunc
				child, stop = context.WithTimeout(ctx, time.Hour) // derived inside the task
				defer stop()
				close(started)
				<-ctx.Done()
				<-child.Done()
				return 0, context.Cause(ctx)
			})
			if err != nil {
				t.Fatal(err)
			}
			recv(t, started, "the task to start")
			if how == "future" {
				f.Cancel()
			} else {
				cancel()
			}
			if _, err := wait(t, f); !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			s := atRest(t, b)
			if s.Permitted != 1 || s.Finished != 1 || s.Failed != 1 || s.Cancelled != 0 {
				t.Fatalf("Stats %+v", s)
			}
		})
	}
}

func TestRunningTaskDeadline(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	f, err := pool.Submit(ctx, b, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wait(t, f); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
}

func TestQueuedTaskCancelled(t *testing.T) {
	for _, how := range []string{"submitter ctx", "future"} {
		t.Run(how, func(t *testing.T) {
			b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1})
			g := newGate()
			running := mustSubmit(t, b, g.task(0))
			g.waitStarted(t, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var ran atomic.Bool
			queued, err := pool.Submit(ctx, b, func(context.Context) (int, error) { ran.Store(true); return 1, nil })
			if err != nil {
				t.Fatal(err)
			}
			if how == "future" {
				queued.Cancel()
			} else {
				cancel()
			}
			if _, err := wait(t, queued); !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			// The slot is free at once: another task can queue.
			other := mustSubmit(t, b, func(context.Context) (int, error) { return 2, nil })
			wantStats(t, b, bulkhead.Stats{MaxConcurrentCalls: 1, InFlight: 1, QueueDepth: 1, QueueCapacity: 1,
				Permitted: 1, Cancelled: 1})
			g.release()
			wait(t, running)
			if v, err := wait(t, other); v != 2 || err != nil {
				t.Fatalf("other: %v, %v", v, err)
			}
			if ran.Load() {
				t.Fatal("the cancelled task ran")
			}
			s := atRest(t, b)
			if s.Permitted != 2 || s.Cancelled != 1 {
				t.Fatalf("Stats %+v", s)
			}
		})
	}
}

func TestPanicFailsFutureWorkerSurvives(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1})
	g := newGate()
	blocker := mustSubmit(t, b, g.task(0))
	g.waitStarted(t, 1)
	boom := errors.New("boom")
	p := mustSubmit(t, b, func(context.Context) (int, error) { panic(boom) })
	g.release()
	wait(t, blocker)
	_, err := wait(t, p)
	var pe *bulkhead.PanicError
	if !errors.As(err, &pe) || pe.Value != boom || !errors.Is(err, boom) {
		t.Fatalf("err = %v, want a PanicError wrapping boom", err)
	}
	if !strings.Contains(string(pe.Stack), "TestPanicFailsFutureWorkerSurvives") {
		t.Fatalf("stack does not show the panicking function:\n%s", pe.Stack)
	}
	for i := range 3 { // the pool still works
		if v, err := wait(t, mustSubmit(t, b, func(context.Context) (int, error) { return i, nil })); v != i || err != nil {
			t.Fatalf("after panic: %v, %v", v, err)
		}
	}
	s := atRest(t, b)
	if s.Finished != 5 || s.Failed != 1 {
		t.Fatalf("Stats %+v", s)
	}
}

// TestPanicDoesNotStrandQueue: the task queued behind one that panics
// runs (on another worker: the panicking one's goroutine returns to ants).
func TestPanicDoesNotStrandQueue(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1})
	started := make(chan struct{})
	release := make(chan struct{})
	f := mustSubmit(t, b, func(context.Context) (int, error) {
		close(started)
		<-release
		panic("boom")
	})
	recv(t, started, "the task to start")
	next := mustSubmit(t, b, func(context.Context) (int, error) { return 9, nil })
	close(release)
	var pe *bulkhead.PanicError
	if _, err := wait(t, f); !errors.As(err, &pe) || pe.Value != "boom" {
		t.Fatalf("err = %v, want a PanicError", err)
	}
	if v, err := wait(t, next); v != 9 || err != nil {
		t.Fatalf("queued task after a panic: %v, %v", v, err)
	}
	if s := atRest(t, b); s.Finished != 2 || s.Failed != 1 {
		t.Fatalf("Stats %+v", s)
	}
}

func TestGoexitDoesNotStrandQueue(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1})
	started := make(chan struct{})
	release := make(chan struct{})
	f := mustSubmit(t, b, func(context.Context) (int, error) {
		close(started)
		<-release
		runtime.Goexit()
		return 0, nil
	})
	recv(t, started, "the task to start")
	next := mustSubmit(t, b, func(context.Context) (int, error) { return 9, nil })
	close(release)
	if _, err := wait(t, f); err == nil || !strings.Contains(err.Error(), "Goexit") {
		t.Fatalf("err = %v", err)
	}
	if v, err := wait(t, next); v != 9 || err != nil {
		t.Fatalf("queued task after Goexit: %v, %v", v, err)
	}
	atRest(t, b)
}

func TestReconfigureGrowStartsQueued(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 5})
	g := newGate()
	var fs []*future.Future[int]
	for i := range 4 {
		fs = append(fs, mustSubmit(t, b, g.task(i)))
	}
	g.waitStarted(t, 1)
	wantStats(t, b, bulkhead.Stats{MaxConcurrentCalls: 1, InFlight: 1, QueueDepth: 3, QueueCapacity: 5, Permitted: 1})
	if err := b.Reconfigure(pool.Config{MaxWorkers: 4, QueueCapacity: 5}); err != nil {
		t.Fatal(err)
	}
	g.waitStarted(t, 3) // the queued tasks start without any task finishing
	wantStats(t, b, bulkhead.Stats{MaxConcurrentCalls: 4, InFlight: 4, QueueCapacity: 5, Permitted: 4})
	g.release()
	if _, err := future.All(guardCtx(t), fs...); err != nil {
		t.Fatal(err)
	}
	atRest(t, b)
}

func TestReconfigureShrinkLetsRunningFinish(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 3, QueueCapacity: 5})
	gates := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
	started := make(chan int, 3)
	var fs []*future.Future[int]
	for i, gt := range gates {
		fs = append(fs, mustSubmit(t, b, func(context.Context) (int, error) { started <- i; <-gt; return i, nil }))
	}
	for range 3 {
		recv(t, started, "the tasks to start")
	}
	if err := b.Reconfigure(pool.Config{MaxWorkers: 1, QueueCapacity: 5}); err != nil {
		t.Fatal(err)
	}
	var queuedRan atomic.Bool
	q := mustSubmit(t, b, func(context.Context) (int, error) { queuedRan.Store(true); return 9, nil })
	wantStats(t, b, bulkhead.Stats{MaxConcurrentCalls: 1, InFlight: 3, QueueDepth: 1, QueueCapacity: 5, Permitted: 3})
	// Two of the three finish: two still run... one runs, which is the new limit.
	close(gates[0])
	wait(t, fs[0])
	close(gates[1])
	wait(t, fs[1])
	if queuedRan.Load() {
		t.Fatal("a queued task started while the new limit was reached")
	}
	wantStats(t, b, bulkhead.Stats{MaxConcurrentCalls: 1, InFlight: 1, QueueDepth: 1, QueueCapacity: 5,
		Permitted: 3, Finished: 2})
	close(gates[2])
	if v, err := wait(t, q); v != 9 || err != nil {
		t.Fatalf("queued task: %v, %v", v, err)
	}
	atRest(t, b)
}

func TestReconfigureSmallerQueueKeepsItsTasks(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 3})
	g := newGate()
	mustSubmit(t, b, g.task(0))
	g.waitStarted(t, 1)
	var queued []*future.Future[int]
	for i := range 3 {
		queued = append(queued, mustSubmit(t, b, g.task(i+1)))
	}
	if err := b.Reconfigure(pool.Config{MaxWorkers: 1, QueueCapacity: 1}); err != nil {
		t.Fatal(err)
	}
	wantStats(t, b, bulkhead.Stats{MaxConcurrentCalls: 1, InFlight: 1, QueueDepth: 3, QueueCapacity: 1, Permitted: 1})
	fn := func(context.Context) (int, error) { return 0, nil }
	if _, err := pool.Submit(context.Background(), b, fn); !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("Submit over the new capacity: %v", err)
	}
	queued[0].Cancel()
	queued[1].Cancel()
	if _, err := pool.Submit(context.Background(), b, fn); !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("Submit at the new capacity: %v", err)
	}
	queued[2].Cancel()
	f := mustSubmit(t, b, fn) // under the limit again
	g.release()
	wait(t, f)
	s := atRest(t, b)
	if s.Cancelled != 3 || s.Rejected != 2 {
		t.Fatalf("Stats %+v", s)
	}
}

// A new KeepAlive takes effect: the task submitted after Reconfigure runs on
// a worker of a new ants pool, which exits once idle for the new KeepAlive,
// while the old pool (KeepAlive an hour) would have kept it for an hour.
// The fake clock of synctest makes the hour and the second exact.
func TestReconfigureKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("test", pool.Config{MaxWorkers: 2, QueueCapacity: 2, KeepAlive: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		g := newGate()
		f1 := mustSubmit(t, b, g.task(1)) // runs on the old pool through Reconfigure
		g.waitStarted(t, 1)
		cfg := pool.Config{MaxWorkers: 2, QueueCapacity: 2, KeepAlive: time.Second}
		if err := b.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		if b.Config() != cfg {
			t.Fatalf("Config() = %+v", b.Config())
		}
		worker := make(chan uint64, 1)
		f2 := mustSubmit(t, b, func(context.Context) (int, error) { worker <- goid(); return 2, nil })
		if v, err := f2.Wait(context.Background()); v != 2 || err != nil {
			t.Fatalf("f2: %v, %v", v, err)
		}
		id := <-worker
		synctest.Wait()
		if !goroutineExists(id) {
			t.Fatal("the worker exited at once; the test cannot tell the pools apart")
		}
		time.Sleep(10 * time.Second) // ten new KeepAlives, far below the old one
		synctest.Wait()
		if goroutineExists(id) {
			t.Fatalf("the worker goroutine %d is still there after 10 s idle: the task did not run on a pool with the new KeepAlive", id)
		}
		g.release()
		if _, err := f1.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		atRest(t, b)
	})
}

// goroutineExists reports whether a goroutine with the given id exists.
func goroutineExists(id uint64) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Contains(buf, []byte("goroutine "+strconv.FormatUint(id, 10)+" ["))
}

// Close refuses new work at once and waits for the running and queued tasks.
// synctest tells "Close is still waiting" from "Close has not got there yet":
// once every goroutine of the bubble is blocked, Close must be among them.
func TestCloseDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("test", pool.Config{MaxWorkers: 1, QueueCapacity: 2})
		if err != nil {
			t.Fatal(err)
		}
		g := newGate()
		fs := []*future.Future[int]{mustSubmit(t, b, g.task(1)), mustSubmit(t, b, g.task(2)), mustSubmit(t, b, g.task(3))}
		g.waitStarted(t, 1)
		closed := make(chan error, 1)
		go func() { closed <- b.Close(context.Background()) }()
		synctest.Wait()
		if _, err := pool.Submit(context.Background(), b, g.task(4)); err != bulkhead.ErrClosed {
			t.Fatalf("Submit during Close: %v, want ErrClosed", err)
		}
		select {
		case err := <-closed:
			t.Fatalf("Close returned %v while tasks were running", err)
		default:
		}
		g.release()
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
		for i, f := range fs {
			if v, err := f.Result(); v != i+1 || err != nil {
				t.Fatalf("task %d: %v, %v", i+1, v, err)
			}
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		s := atRest(t, b)
		if s.Permitted != 3 || s.Finished != 3 {
			t.Fatalf("Stats %+v", s)
		}
	})
}

func TestCloseGivesUp(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b, err := pool.New("test", pool.Config{MaxWorkers: 2, QueueCapacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate()
	stubborn := mustSubmit(t, b, g.task(1)) // ignores its context
	sawCancel := make(chan struct{})
	polite := mustSubmit(t, b, func(ctx context.Context) (int, error) {
		g.started <- struct{}{}
		<-ctx.Done()
		close(sawCancel)
		return 0, ctx.Err()
	})
	g.waitStarted(t, 2)
	var ran atomic.Bool
	queued := []*future.Future[int]{
		mustSubmit(t, b, func(context.Context) (int, error) { ran.Store(true); return 0, nil }),
		mustSubmit(t, b, func(context.Context) (int, error) { ran.Store(true); return 0, nil }),
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with an ended ctx: %v", err)
	}
	for _, f := range queued {
		if _, err := f.Result(); err != bulkhead.ErrClosed {
			t.Fatalf("queued task: %v, want ErrClosed", err)
		}
	}
	recv(t, sawCancel, "the running task to see its context cancelled")
	if _, err := wait(t, polite); !errors.Is(err, context.Canceled) {
		t.Fatalf("running task: %v", err)
	}
	select {
	case <-stubborn.Done():
		t.Fatal("the stubborn task was stopped")
	default:
	}
	g.release()
	if err := b.Close(guardCtx(t)); err != nil {
		t.Fatalf("Close after the tasks ended: %v", err)
	}
	if ran.Load() {
		t.Fatal("a dropped task ran")
	}
	s := atRest(t, b)
	if s.Permitted != 2 || s.Cancelled != 2 || s.Finished != 2 {
		t.Fatalf("Stats %+v", s)
	}
}

// Events: the first two are in order (the task starts, then the third
// submit is rejected); after that, events of different tasks come from
// different workers (a worker with callbacks to run hands its next task to
// another first), so they are checked by count. A finished event follows
// its future's completion, so the test waits for it before unsubscribing.
func TestEvents(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 1})
	var mu sync.Mutex
	var events []bulkhead.Event
	finished := make(chan struct{}, 8)
	stop := b.Subscribe(func(e bulkhead.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
		if e.Type == bulkhead.EventFinished {
			finished <- struct{}{}
		}
	})
	g := newGate()
	first := mustSubmit(t, b, g.task(1))
	g.waitStarted(t, 1)
	second := mustSubmit(t, b, g.task(2))
	if _, err := pool.Submit(context.Background(), b, g.task(3)); err == nil {
		t.Fatal("not rejected")
	}
	g.release()
	wait(t, first)
	wait(t, second)
	boom := errors.New("boom")
	wait(t, mustSubmit(t, b, func(context.Context) (int, error) { return 0, boom }))
	for range 3 {
		recv(t, finished, "a finished event")
	}
	stop()
	wait(t, mustSubmit(t, b, func(context.Context) (int, error) { return 0, nil }))

	mu.Lock()
	defer mu.Unlock()
	count := map[string]int{}
	var boomSeen, runSeen bool
	for _, e := range events {
		if e.Name != "test" || e.Kind != bulkhead.Pool || e.Time.IsZero() {
			t.Errorf("event %+v", e)
		}
		count[e.Type.String()]++
		if e.Type == bulkhead.EventFinished {
			boomSeen = boomSeen || e.Err == boom
			runSeen = runSeen || e.Run > 0
		}
	}
	if len(events) != 7 || count["permitted"] != 3 || count["rejected"] != 1 || count["finished"] != 3 {
		t.Fatalf("events %v, want 3 permitted, 1 rejected, 3 finished", count)
	}
	if events[0].Type != bulkhead.EventPermitted || events[1].Type != bulkhead.EventRejected ||
		!errors.Is(events[1].Err, bulkhead.ErrBulkheadFull) || !boomSeen || !runSeen {
		t.Fatalf("event details %+v", events)
	}
}
