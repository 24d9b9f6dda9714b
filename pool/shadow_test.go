package pool_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// A pool's Shadow (issue 25): its figures against scripted schedules, the
// enforced outcome unchanged by it, its places given back whatever the
// tasks' outcomes, its configuration.

func poolShadow(t *testing.T, b *pool.Bulkhead) bulkhead.ShadowStats {
	t.Helper()
	ss, ok := b.ShadowStats()
	if !ok {
		t.Fatal("ShadowStats reports no shadow")
	}
	return ss
}

func wantShadow(t *testing.T, b *pool.Bulkhead, when string, want bulkhead.ShadowStats) {
	t.Helper()
	if got := poolShadow(t, b); got != want {
		t.Fatalf("%s: shadow %+v, want %+v", when, got, want)
	}
}

// held submits a task that runs until the returned function is called, or
// the test ends.
func held(t *testing.T, b *pool.Bulkhead) (*future.Future[int], func()) {
	t.Helper()
	ch := make(chan struct{})
	f := mustSubmit(t, b, func(context.Context) (int, error) { <-ch; return 0, nil })
	release := sync.OnceFunc(func() { close(ch) })
	t.Cleanup(release) // before the pool's Close, if the test fails
	return f, release
}

// TestPoolShadowSchedule runs a pool of 4 workers and 4 queue slots with a
// shadow of 1 worker, 1 queue slot and a 100ms timeout, and checks the
// shadow's figures at each step: A takes the shadow's worker, B its queue
// slot (would wait), C nothing (would reject) though all three run; A's end
// gives the worker to B; D queued in the shadow past its timeout counts
// would time out and frees its slot for E.
func TestPoolShadowSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, done := shedPool(t, pool.Config{MaxWorkers: 4, QueueCapacity: 4, QueueTimeout: time.Second,
			Shadow: &pool.Shadow{MaxWorkers: 1, QueueCapacity: 1, QueueTimeout: 100 * time.Millisecond}})
		t.Cleanup(done) // after held's cleanups
		sh := bulkhead.ShadowStats{Limit: 1, QueueCapacity: 1}
		wantShadow(t, b, "at rest", sh)
		fa, a := held(t, b)
		fb, bb := held(t, b)
		fc, c := held(t, b)
		synctest.Wait()
		sh.InUse, sh.QueueDepth, sh.WouldWait, sh.WouldReject = 1, 1, 1, 1
		wantShadow(t, b, "A, B, C running", sh)
		if s := b.Stats(); s.InFlight != 3 {
			t.Fatalf("in flight %d, want 3: the shadow must not hold tasks back", s.InFlight)
		}
		time.Sleep(50 * time.Millisecond)
		a()
		wait(t, fa)
		sh.QueueDepth = 0 // B has A's shadow worker, 50ms after it was admitted
		wantShadow(t, b, "A done", sh)
		fd, d := held(t, b)
		synctest.Wait()
		sh.QueueDepth, sh.WouldWait = 1, 2
		wantShadow(t, b, "D", sh)
		time.Sleep(150 * time.Millisecond) // D has waited 150ms in the shadow's queue
		sh.QueueDepth, sh.WouldTimeOut = 0, 1
		wantShadow(t, b, "D past the shadow's timeout", sh)
		fe, e := held(t, b)
		synctest.Wait()
		sh.QueueDepth, sh.WouldWait = 1, 3
		wantShadow(t, b, "E", sh)
		time.Sleep(50 * time.Millisecond)
		bb()
		wait(t, fb)
		sh.QueueDepth = 0 // E has B's shadow worker, 50ms after it was admitted
		wantShadow(t, b, "B done", sh)
		for _, f := range []func(){c, d, e} {
			f()
		}
		for _, f := range []*future.Future[int]{fc, fd, fe} {
			wait(t, f)
		}
		sh.InUse = 0
		wantShadow(t, b, "all done", sh)
	})
}

// TestPoolShadowRealWait: a task the pool queued longer than the shadow's
// QueueTimeout counts would time out, whether the shadow had a worker for
// it at once (a shadow with the pool's workers, a shorter timeout) or gave
// it one only later.
func TestPoolShadowRealWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, done := shedPool(t, pool.Config{MaxWorkers: 1, QueueCapacity: 2, QueueTimeout: time.Second,
			Shadow: &pool.Shadow{QueueTimeout: 100 * time.Millisecond}})
		t.Cleanup(done) // after held's cleanups
		fa, a := held(t, b)
		fb, bb := held(t, b) // queued, in the shadow too
		synctest.Wait()
		wantShadow(t, b, "A running, B queued", bulkhead.ShadowStats{Limit: 1, InUse: 1, QueueDepth: 1, QueueCapacity: 2, WouldWait: 1})
		time.Sleep(150 * time.Millisecond)
		a()
		wait(t, fa)
		synctest.Wait()
		// B started after 150ms: the shadow would have dropped it at 100ms
		wantShadow(t, b, "B started late", bulkhead.ShadowStats{Limit: 1, QueueCapacity: 2, WouldWait: 1, WouldTimeOut: 1})
		fc, c := held(t, b) // queued behind B, which holds no shadow worker
		synctest.Wait()
		wantShadow(t, b, "C queued", bulkhead.ShadowStats{Limit: 1, InUse: 1, QueueCapacity: 2, WouldWait: 1, WouldTimeOut: 1})
		time.Sleep(100 * time.Millisecond)
		bb()
		wait(t, fb)
		synctest.Wait()
		// C had a shadow worker at once but started only after 100ms
		wantShadow(t, b, "C started late", bulkhead.ShadowStats{Limit: 1, QueueCapacity: 2, WouldWait: 1, WouldTimeOut: 2})
		c()
		wait(t, fc)
	})
}

// TestPoolShadowDoesNotChangeEnforcement runs one scripted schedule (tasks
// that run, queue, are rejected, time out, are cancelled, fail and panic,
// and a Go that waits for room) with and without a shadow, and compares
// what the pool did: its events in order, the futures' outcomes, its
// Stats.
func TestPoolShadowDoesNotChangeEnforcement(t *testing.T) {
	run := func(sh *pool.Shadow) (log []string, ss bulkhead.ShadowStats) {
		synctest.Test(t, func(t *testing.T) {
			b, done := shedPool(t, pool.Config{MaxWorkers: 2, QueueCapacity: 2, QueueTimeout: 100 * time.Millisecond, Shadow: sh})
			var mu sync.Mutex
			var events []string // by time, and in a fixed order within an instant: the workers publish concurrently
			start := time.Now()
			cancelSub := b.Subscribe(func(e bulkhead.Event) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, fmt.Sprintf("%8v %v %v wait=%v run=%v", e.Time.Sub(start), e.Type, e.Err, e.Wait, e.Run))
			})
			step := func(name string, err error) {
				mu.Lock()
				defer mu.Unlock()
				log = append(log, fmt.Sprintf("%s: %v", name, err))
			}
			gate := make(chan struct{})
			submit := func(name string, fn func(context.Context) (int, error)) *future.Future[int] {
				f, err := pool.Submit(context.Background(), b, fn)
				step("submit "+name, err)
				return f
			}
			// a holds a worker until 400ms; b fails at 50ms; c, queued,
			// then starts and panics at 250ms; d is cancelled in the
			// queue; e is rejected; g, queued by Go, times out at 100ms.
			fa := submit("a", func(context.Context) (int, error) { <-gate; return 1, nil })
			fb := submit("b", func(context.Context) (int, error) {
				time.Sleep(50 * time.Millisecond)
				return 0, errors.New("b failed")
			})
			fc := submit("c", func(context.Context) (int, error) { time.Sleep(200 * time.Millisecond); panic("c") })
			fd := submit("d", func(context.Context) (int, error) { return 4, nil })
			submit("e", func(context.Context) (int, error) { return 5, nil })
			synctest.Wait()
			fd.Cancel()
			synctest.Wait()
			fg, err := b.Go(context.Background(), func(context.Context) error { return nil })
			step("go g", err)
			time.Sleep(400 * time.Millisecond)
			close(gate)
			for i, f := range []*future.Future[int]{fa, fb, fc, fd} {
				v, err := wait(t, f)
				if pe, ok := errors.AsType[*bulkhead.PanicError](err); ok {
					err = fmt.Errorf("panic %v", pe.Value) // its stack differs
				}
				step(fmt.Sprintf("result %d: %d", i, v), err)
			}
			_, err = wait(t, fg)
			step("result g", err)
			synctest.Wait()
			cancelSub()
			slices.Sort(events)
			log = append(log, events...)
			s := b.Stats()
			step(fmt.Sprintf("stats %+v", s), nil)
			if sh != nil {
				ss = poolShadow(t, b)
			}
			done()
		})
		return log, ss
	}
	plain, _ := run(nil)
	for _, sh := range []*pool.Shadow{{MaxWorkers: 1}, {QueueCapacity: 1}, {QueueTimeout: 10 * time.Millisecond}, {MaxWorkers: 1, QueueCapacity: 1, QueueTimeout: time.Millisecond}} {
		log, ss := run(sh)
		if strings.Join(log, "\n") != strings.Join(plain, "\n") {
			t.Errorf("shadow %+v changed the enforced schedule:\n%s\nwithout a shadow:\n%s", *sh, strings.Join(log, "\n"), strings.Join(plain, "\n"))
		}
		if ss.WouldReject+ss.WouldWait+ss.WouldTimeOut == 0 || ss.InUse != 0 || ss.QueueDepth != 0 {
			t.Errorf("shadow %+v: %+v, want something counted and nothing held", *sh, ss)
		}
	}
}

// TestPoolShadowReturnsEveryPlace gives the shadow's places out to tasks of
// every outcome (success, error, panic, Goexit, a queued future cancelled,
// a submitter's context ended while queued, a queue timeout, a wait inside
// a task, Go waiting for room, Close giving up) and checks that none is
// held at the end.
func TestPoolShadowReturnsEveryPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := pool.New("test", pool.Config{MaxWorkers: 2, QueueCapacity: 3, QueueTimeout: time.Second,
			Shadow: &pool.Shadow{MaxWorkers: 1, QueueCapacity: 2, QueueTimeout: 500 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close(context.Background()) }) // if the test fails
		for _, fn := range []func(context.Context) (int, error){
			func(context.Context) (int, error) { return 0, nil },
			func(context.Context) (int, error) { return 0, errors.New("fail") },
			func(context.Context) (int, error) { panic("boom") },
			func(context.Context) (int, error) { runtime.Goexit(); return 0, nil },
		} {
			wait(t, mustSubmit(t, b, fn))
		}
		wantShadow(t, b, "after the quick ones", bulkhead.ShadowStats{Limit: 1, QueueCapacity: 2})
		// a task that waits inside for a queued task of the pool lends it its slot
		gate := make(chan struct{})
		open := sync.OnceFunc(func() { close(gate) })
		t.Cleanup(open)
		f1, r1 := held(t, b)
		outer := mustSubmit(t, b, func(ctx context.Context) (int, error) {
			<-gate
			inner, err := pool.Submit(ctx, b, func(context.Context) (int, error) { return 7, nil })
			if err != nil {
				return 0, err
			}
			return inner.Wait(ctx)
		})
		synctest.Wait()
		sh := bulkhead.ShadowStats{Limit: 1, InUse: 1, QueueDepth: 1, QueueCapacity: 2, WouldWait: 1}
		wantShadow(t, b, "f1 and outer running", sh)
		queued := mustSubmit(t, b, func(context.Context) (int, error) { return 0, nil })
		queued.Cancel()
		sh.WouldWait = 2
		wantShadow(t, b, "a queued task cancelled", sh)
		ctx, cancel := context.WithCancel(context.Background())
		byCtx, err := pool.Submit(ctx, b, func(context.Context) (int, error) { return 0, nil })
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		synctest.Wait()
		sh.WouldWait = 3
		wantShadow(t, b, "a queued task's context ended", sh)
		timedOut := mustSubmit(t, b, func(context.Context) (int, error) { return 0, nil })
		time.Sleep(2 * time.Second)
		if _, err := wait(t, timedOut); !errors.Is(err, bulkhead.ErrBulkheadFull) {
			t.Fatalf("timed out task: %v", err)
		}
		open()
		if v, err := wait(t, outer); v != 7 || err != nil {
			t.Fatalf("outer: %v, %v", v, err)
		}
		for _, f := range []*future.Future[int]{queued, byCtx} {
			wait(t, f)
		}
		// Go waiting for room; Close giving up on queued and running tasks
		_, r2 := held(t, b)
		for range 3 {
			mustSubmit(t, b, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, nil })
		}
		goErr := make(chan error)
		go func() {
			_, err := b.Go(context.Background(), func(context.Context) error { return nil })
			goErr <- err
		}()
		synctest.Wait()
		r1()
		wait(t, f1)
		if err := <-goErr; err != nil {
			t.Fatal(err)
		}
		r2()
		ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if err := b.Close(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		ss := poolShadow(t, b)
		if ss.InUse != 0 || ss.QueueDepth != 0 {
			t.Fatalf("after every outcome the shadow holds %d workers and %d queue slots: %+v", ss.InUse, ss.QueueDepth, ss)
		}
		if ss.WouldReject == 0 || ss.WouldWait == 0 || ss.WouldTimeOut == 0 {
			t.Fatalf("the schedule should count every figure: %+v", ss)
		}
	})
}

// TestPoolShadowChurn: submitters of random outcomes on a shadowed pool
// with priorities and displacement, and a resize and a shadow change
// meanwhile; at rest, the shadow holds nothing.
func TestPoolShadowChurn(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 4, QueueCapacity: 4, QueueTimeout: time.Millisecond,
		Priorities: &bulkhead.Priorities{}, Displace: true, Shadow: &pool.Shadow{MaxWorkers: 2, QueueCapacity: 1}})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 200 {
				ctx, cancel := context.WithCancel(bulkhead.WithPriority(context.Background(), bulkhead.Sheddable+bulkhead.Priority(r.IntN(4))))
				fn := func(ctx context.Context) (int, error) {
					switch i % 4 {
					case 1:
						return 0, errors.New("fail")
					case 2:
						panic("boom")
					}
					return 0, nil
				}
				var f *future.Future[int]
				var err error
				if r.IntN(2) == 0 {
					f, err = pool.Go(ctx, b, fn)
				} else {
					f, err = pool.Submit(ctx, b, fn)
				}
				switch {
				case err != nil:
				case r.IntN(5) == 0:
					f.Cancel()
				case r.IntN(5) == 0:
					cancel()
				}
				if f != nil {
					f.Wait(guardCtx(t))
				}
				cancel()
			}
		})
	}
	wg.Go(func() {
		cfg := b.Config()
		cfg.MaxWorkers, cfg.Shadow = 2, &pool.Shadow{MaxWorkers: 1, QueueCapacity: 2, QueueTimeout: time.Microsecond}
		if err := b.Reconfigure(cfg); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	if ss := poolShadow(t, b); ss.InUse != 0 || ss.QueueDepth != 0 || ss.Limit != 1 {
		t.Fatalf("at rest: %+v, want nothing held, limit 1", ss)
	}
}

func TestPoolShadowConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  pool.Config
		want string
	}{
		{pool.Config{MaxWorkers: 2, QueueCapacity: 2, Shadow: &pool.Shadow{MaxWorkers: 3}}, "shadow.maxWorkers must be from 0 (maxWorkers) to maxWorkers 2, got 3"},
		{pool.Config{MaxWorkers: 2, QueueCapacity: 2, Shadow: &pool.Shadow{MaxWorkers: -1}}, "got -1"},
		{pool.Config{MaxWorkers: 2, QueueCapacity: 2, Shadow: &pool.Shadow{QueueCapacity: 3}}, "shadow.queueCapacity must be from 0 (queueCapacity) to queueCapacity 2, got 3"},
		{pool.Config{MaxWorkers: 2, QueueTimeout: time.Second, Shadow: &pool.Shadow{QueueTimeout: 2 * time.Second}}, "shadow.queueTimeout must be from 0 (queueTimeout) to queueTimeout 1s, got 2s"},
		{pool.Config{MaxWorkers: 2, Shadow: &pool.Shadow{QueueTimeout: -1}}, "got -1ns"},
		{pool.Config{MaxWorkers: 2, QueueCapacity: 2, Shadow: &pool.Shadow{MaxWorkers: 2, QueueCapacity: 2}}, "is the enforced pool itself"},
		{pool.Config{MaxWorkers: 2, Shadow: &pool.Shadow{}}, "is the enforced pool itself"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want %q", *c.cfg.Shadow, err, c.want)
		}
	}
	for _, sh := range []*pool.Shadow{{MaxWorkers: 1}, {QueueCapacity: 1}, {QueueTimeout: time.Hour}} {
		if err := (pool.Config{MaxWorkers: 2, QueueCapacity: 2, Shadow: sh}).Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", *sh, err)
		}
	}
	kc := pool.KeyedConfig{Config: pool.Config{MaxWorkers: 2, Shadow: &pool.Shadow{MaxWorkers: 1}}}
	if err := kc.Validate(); err == nil || !strings.Contains(err.Error(), "shadow is not available in a keyed pool") {
		t.Errorf("keyed: %v", err)
	}
}

func TestPoolShadowReconfigure(t *testing.T) {
	b := newPool(t, pool.Config{MaxWorkers: 4, QueueCapacity: 4})
	if _, ok := b.ShadowStats(); ok {
		t.Fatal("ShadowStats reports a shadow for a plain pool")
	}
	f, release := held(t, b)
	cfg := b.Config()
	cfg.Shadow = &pool.Shadow{MaxWorkers: 1}
	if err := b.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Shadow.MaxWorkers = 3 // the caller's copy: no effect
	if got := b.Config().Shadow; got == nil || got.MaxWorkers != 1 {
		t.Fatalf("Config().Shadow = %+v, want MaxWorkers 1", got)
	}
	b.Config().Shadow.MaxWorkers = 3 // a copy too
	f2, release2 := held(t, b)       // the first shadowed task: the shadow's worker
	f3, release3 := held(t, b)
	wantShadow(t, b, "two shadowed tasks", bulkhead.ShadowStats{Limit: 1, InUse: 1, QueueDepth: 1, QueueCapacity: 4, WouldWait: 1})
	cfg.Shadow = &pool.Shadow{MaxWorkers: 2}
	if err := b.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	wantShadow(t, b, "a second shadow worker", bulkhead.ShadowStats{Limit: 2, InUse: 2, QueueCapacity: 4, WouldWait: 1})
	cfg.Shadow = nil
	if err := b.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.ShadowStats(); ok {
		t.Fatal("ShadowStats reports a shadow switched off")
	}
	release2()
	wait(t, f2)
	cfg.Shadow = &pool.Shadow{MaxWorkers: 2}
	if err := b.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	// f3's place came back to the shadow while it was off
	wantShadow(t, b, "back on", bulkhead.ShadowStats{Limit: 2, InUse: 1, QueueCapacity: 4, WouldWait: 1})
	cfg.Shadow = &pool.Shadow{MaxWorkers: 5}
	if err := b.Reconfigure(cfg); err == nil || !strings.Contains(err.Error(), "shadow.maxWorkers") {
		t.Fatalf("Reconfigure with a larger shadow: %v", err)
	}
	release()
	release3()
	wait(t, f)
	wait(t, f3)
	wantShadow(t, b, "at rest", bulkhead.ShadowStats{Limit: 2, QueueCapacity: 4, WouldWait: 1})
}

// TestPoolShadowTimeoutSwitchedOn: a shadow QueueTimeout switched on by
// Reconfigure measures the tasks already holding shadow queue slots from
// the switch, not from the pool's creation.
func TestPoolShadowTimeoutSwitchedOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := pool.Config{MaxWorkers: 2, QueueCapacity: 2, Shadow: &pool.Shadow{MaxWorkers: 1}}
		b, err := pool.New("test", cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(context.Background())
		time.Sleep(10 * time.Hour) // an old pool
		hold := make(chan struct{})
		defer close(hold)
		for range 2 { // both run; the second holds the shadow's queue slot
			if _, err := pool.Submit(context.Background(), b, func(context.Context) (int, error) { <-hold; return 0, nil }); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if st, _ := b.ShadowStats(); st.InUse != 1 || st.QueueDepth != 1 {
			t.Fatalf("before: %+v", st)
		}
		time.Sleep(time.Second)
		cfg.Shadow = &pool.Shadow{MaxWorkers: 1, QueueTimeout: 5 * time.Second}
		if err := b.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		if st, _ := b.ShadowStats(); st.WouldTimeOut != 0 || st.QueueDepth != 1 {
			t.Errorf("a 5s shadow timeout switched on times out a task that has held its shadow queue slot 1s: %+v", st)
		}
	})
}

// TestPoolShadowIdleWorkerTimesOut: a task given a shadow worker by a
// resize while the pool still queues it counts WouldTimeOut once its
// shadow QueueTimeout passes, and gives the worker back.
func TestPoolShadowIdleWorkerTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := pool.Config{MaxWorkers: 3, QueueCapacity: 4, Shadow: &pool.Shadow{MaxWorkers: 1, QueueTimeout: time.Second}}
		b, err := pool.New("test", cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(context.Background())
		hold := make(chan struct{})
		defer close(hold)
		blocked := func(context.Context) (int, error) { <-hold; return 0, nil }
		for range 3 { // A holds the shadow worker, B and C its queue slots
			if _, err := pool.Submit(context.Background(), b, blocked); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(1500 * time.Millisecond)                                      // B and C time out in the shadow
		if _, err := pool.Submit(context.Background(), b, blocked); err != nil { // D: queued in the pool, shadow queue slot
			t.Fatal(err)
		}
		cfg.Shadow = &pool.Shadow{MaxWorkers: 2, QueueTimeout: time.Second}
		if err := b.Reconfigure(cfg); err != nil { // D gets the new shadow worker; the pool still queues it
			t.Fatal(err)
		}
		st, _ := b.ShadowStats()
		if st.InUse != 2 || st.WouldTimeOut != 2 {
			t.Fatalf("setup: %+v", st)
		}
		time.Sleep(1500 * time.Millisecond) // D's shadow timeout passes, the pool has not started it
		st, _ = b.ShadowStats()
		if st.WouldTimeOut != 3 || st.InUse != 1 {
			t.Errorf("D's shadow timeout passed before the pool started it: want WouldTimeOut 3, InUse 1; got %+v (pool %+v)", st, b.Stats())
		}
	})
}

// TestPoolShadowIdleWorkerHeldBack: the same without a Reconfigure: a
// Sheddable task held back by its class's ceiling beside a free worker
// takes a free shadow worker at once; its shadow QueueTimeout passes while
// the pool keeps it queued: it counts WouldTimeOut and frees the worker.
func TestPoolShadowIdleWorkerHeldBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := pool.Config{MaxWorkers: 2, QueueCapacity: 4, Priorities: &bulkhead.Priorities{}, Shadow: &pool.Shadow{QueueTimeout: time.Second}}
		b, err := pool.New("test", cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(context.Background())
		hold := make(chan struct{})
		defer close(hold)
		low := bulkhead.WithPriority(context.Background(), bulkhead.Sheddable)
		for range 2 { // the first runs; the second is held back by Sheddable's ceiling (1 worker)
			if _, err := pool.Submit(low, b, func(context.Context) (int, error) { <-hold; return 0, nil }); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if s := b.Stats(); s.InFlight != 1 || s.QueueDepth != 1 {
			t.Fatalf("setup: %+v", s)
		}
		time.Sleep(2 * time.Second)
		if st, _ := b.ShadowStats(); st.WouldTimeOut != 1 || st.InUse != 1 {
			t.Errorf("a task queued 2s in the pool, past the shadow's 1s QueueTimeout: want WouldTimeOut 1, InUse 1; got %+v", st)
		}
	})
}

// TestPoolShadowIdleWorkerPassedOn: the shadow worker of a task the pool
// still queues goes, when that task's shadow QueueTimeout passes, to the
// oldest task then holding a shadow queue slot, even though that one's own
// timeout has passed too by the time the shadow is next looked at.
func TestPoolShadowIdleWorkerPassedOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := pool.Config{MaxWorkers: 2, QueueCapacity: 4, Priorities: &bulkhead.Priorities{}, Shadow: &pool.Shadow{QueueTimeout: time.Second}}
		b, err := pool.New("test", cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(context.Background())
		hold := make(chan struct{})
		defer close(hold)
		blocked := func(context.Context) (int, error) { <-hold; return 0, nil }
		low := bulkhead.WithPriority(context.Background(), bulkhead.Sheddable)
		for range 2 { // the first runs; D is held back by Sheddable's ceiling and takes the second shadow worker
			if _, err := pool.Submit(low, b, blocked); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(500 * time.Millisecond)
		high := bulkhead.WithPriority(context.Background(), bulkhead.Critical)
		if _, err := pool.Submit(high, b, blocked); err != nil { // E runs, in a shadow queue slot until 1.5s
			t.Fatal(err)
		}
		synctest.Wait()
		if s, st := b.Stats(), poolShadow(t, b); s.InFlight != 2 || s.QueueDepth != 1 || st.InUse != 2 || st.QueueDepth != 1 {
			t.Fatalf("setup: pool %+v, shadow %+v", s, st)
		}
		time.Sleep(1500 * time.Millisecond) // D's shadow timeout passed at 1s: its worker went to E then
		wantShadow(t, b, "2s", bulkhead.ShadowStats{Limit: 2, InUse: 2, QueueCapacity: 4, WouldWait: 1, WouldTimeOut: 1})
	})
}

// BenchmarkShadowSubmitWait is BenchmarkSubmitWait's pool row on a pool
// with a shadow of half its workers, which one task at a time never fills,
// beside the plain pool.
func BenchmarkShadowSubmitWait(b *testing.B) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		shadow *pool.Shadow
	}{{"plain", nil}, {"shadowed", &pool.Shadow{MaxWorkers: 4}}} {
		b.Run(c.name, func(b *testing.B) {
			p := benchPool(b, pool.Config{MaxWorkers: 8, QueueCapacity: 1024, Shadow: c.shadow})
			b.ReportAllocs()
			for b.Loop() {
				f, err := pool.Submit(ctx, p, answer)
				if err != nil {
					b.Fatal(err)
				}
				if v, _ := f.Wait(ctx); v != 42 {
					b.Fatal(v)
				}
			}
		})
	}
}
