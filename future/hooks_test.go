package future_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/bulkhead-go/bulkhead/future"
)

// Callbacks run in the order Then was called.
func TestThenCallbacksRunInOrder(t *testing.T) {
	p := future.NewPromise[int](nil)
	var mu sync.Mutex
	var order []int
	for i := range 5 {
		future.Then(p.Future(), func(v int) (int, error) {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			return v, nil
		})
	}
	p.Complete(1, nil)
	for i, v := range order {
		if v != i {
			t.Fatalf("callbacks ran in order %v, want registration order", order)
		}
	}
	if len(order) != 5 {
		t.Fatalf("%d callbacks ran, want 5", len(order))
	}
}

// A Then function that calls runtime.Goexit (t.FailNow in a test's
// callback) ends the completing goroutine after its own future has failed;
// the callbacks before it ran, those after it miss this completion (the
// root package's callback contract), and the source is complete.
func TestGoexitInCallback(t *testing.T) {
	p := future.NewPromise[int](nil)
	before := future.Then(p.Future(), func(v int) (int, error) { return v + 1, nil })
	exits := future.Then(p.Future(), func(int) (int, error) { runtime.Goexit(); return 0, nil })
	after := future.Then(p.Future(), func(v int) (int, error) { return v + 2, nil })
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Complete(1, nil)
		t.Error("Complete returned: the callback did not call Goexit")
	}()
	<-done
	if v, err := before.Result(); err != nil || v != 2 {
		t.Errorf("before: %v, %v", v, err)
	}
	if _, err := exits.Result(); err == nil || err == future.ErrNotDone {
		t.Errorf("the exiting stage: %v, want failed", err)
	}
	if _, err := after.Result(); err != future.ErrNotDone {
		t.Errorf("after: %v, want it to have missed the completion", err)
	}
	if v, err := p.Future().Result(); v != 1 || err != nil {
		t.Errorf("source: %v, %v", v, err)
	}
	after.Cancel()
}

// All returns as soon as one future fails, without waiting for those before
// it in argument order, and with the error of the first to fail in time.
// In the synctest bubble, All is known to be waiting before the futures
// complete.
func TestAllFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := []*future.Promise[int]{future.NewPromise[int](nil), future.NewPromise[int](nil), future.NewPromise[int](nil)}
		fs := []*future.Future[int]{ps[0].Future(), ps[1].Future(), ps[2].Future()}
		type result struct {
			vals []int
			err  error
		}
		got := make(chan result, 1)
		go func() {
			vals, err := future.All(context.Background(), fs...)
			got <- result{vals, err}
		}()
		synctest.Wait() // All is waiting
		e2, e1 := errors.New("third fails first"), errors.New("second fails later")
		ps[2].Complete(0, e2)
		synctest.Wait()
		ps[1].Complete(0, e1)
		select {
		case r := <-got:
			if !errors.Is(r.err, e2) || len(r.vals) != 3 {
				t.Fatalf("All = %v, %v; want zero values, %v", r.vals, r.err, e2)
			}
		default:
			t.Fatal("All still waits although a future failed")
		}
		ps[0].Complete(1, nil) // never waited for
	})
}

// All keeps argument order for values however the futures complete, and
// waits for the last of them.
func TestAllWaitsForTheLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := []*future.Promise[int]{future.NewPromise[int](nil), future.NewPromise[int](nil), future.NewPromise[int](nil)}
		fs := []*future.Future[int]{ps[0].Future(), ps[1].Future(), ps[2].Future()}
		var vals []int
		var err error
		done := make(chan struct{})
		go func() { defer close(done); vals, err = future.All(context.Background(), fs...) }()
		for _, i := range []int{1, 2, 0} {
			synctest.Wait()
			select {
			case <-done:
				t.Fatalf("All returned %v, %v before the last future completed", vals, err)
			default:
			}
			ps[i].Complete(10+i, nil)
		}
		<-done
		if err != nil || len(vals) != 3 || vals[0] != 10 || vals[1] != 11 || vals[2] != 12 {
			t.Fatalf("All = %v, %v", vals, err)
		}
	})
}

// First and All take their hooks off the futures they waited for: calling
// them again and again on a future that never completes does not grow it.
func TestFirstAndAllLeaveNoHooks(t *testing.T) {
	pending := future.NewPromise[int](nil)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	done := future.Completed(1, nil)
	for range 1000 {
		if _, err := future.First(ended, pending.Future(), pending.Future()); !errors.Is(err, context.Canceled) {
			t.Fatalf("First: %v", err)
		}
		if _, err := future.All(ended, done, pending.Future()); !errors.Is(err, context.Canceled) {
			t.Fatalf("All: %v", err)
		}
	}
	if n := future.HookCount(pending.Future()); n != 0 {
		t.Fatalf("%d hooks left on the pending future", n)
	}
	// First that returned a winner leaves none on the losers either.
	winner := future.NewPromise[int](nil)
	go winner.Complete(2, nil)
	if v, err := future.First(context.Background(), pending.Future(), winner.Future()); v != 2 || err != nil {
		t.Fatalf("First = %v, %v", v, err)
	}
	if n := future.HookCount(pending.Future()); n != 0 {
		t.Fatalf("%d hooks left on the losing future", n)
	}
}

func TestThenAndAllCosts(t *testing.T) {
	done := future.Completed(1, nil)
	if a := testing.AllocsPerRun(100, func() {
		future.Then(done, func(v int) (int, error) { return v, nil })
	}); a > 1 {
		t.Errorf("Then: %v allocs, want <= 1", a)
	}
	fs := []*future.Future[int]{done, done, done}
	if a := testing.AllocsPerRun(100, func() { future.All(context.Background(), fs...) }); a > 1 {
		t.Errorf("All of complete futures: %v allocs, want 1 (the result)", a)
	}
	if a := testing.AllocsPerRun(100, func() {
		p := future.NewPromise[int](nil)
		f := future.Then(p.Future(), func(v int) (int, error) { return v, nil })
		future.Then(f, func(v int) (int, error) { return v, nil })
		p.Future().OnComplete(func(int, error) {})
		p.Complete(1, nil)
	}); a > 4 {
		t.Errorf("a chain: %v allocs, want 4 (the promise, two Thens, the callback): completing allocates", a)
	}
}

// OnComplete callbacks run once, in registration order with Then's, on the
// completing goroutine, or at once on a completed future.
func TestOnComplete(t *testing.T) {
	p := future.NewPromise[int](nil)
	var log []string
	p.Future().OnComplete(func(v int, err error) { log = append(log, "a") })
	future.Then(p.Future(), func(v int) (int, error) { log = append(log, "then"); return v, nil })
	p.Future().OnComplete(func(v int, err error) {
		if v != 5 || err != nil {
			t.Errorf("OnComplete got %v, %v", v, err)
		}
		log = append(log, "b")
	})
	p.Complete(5, nil)
	p.Future().OnComplete(func(int, error) { log = append(log, "late") })
	if got := strings.Join(log, " "); got != "a then b late" {
		t.Fatalf("callbacks ran %q", got)
	}
}

// An OnComplete registered while the completer is still running an earlier
// callback (here after Wait has returned) runs after it, on the completing
// goroutine, rather than at once on the caller's.
func TestOnCompleteWhileCallbacksRun(t *testing.T) {
	p := future.NewPromise[int](nil)
	f := p.Future()
	var log []string
	in, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	f.OnComplete(func(int, error) { close(in); <-release; log = append(log, "first") })
	go func() { defer close(done); p.Complete(1, nil) }()
	<-in
	if _, err := f.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.OnComplete(func(int, error) { log = append(log, "second") })
	close(release)
	<-done
	if got := strings.Join(log, " "); got != "first second" {
		t.Fatalf("callbacks ran %q, want \"first second\"", got)
	}
	f.OnComplete(func(int, error) { log = append(log, "late") }) // all fired: at once
	if got := strings.Join(log, " "); got != "first second late" {
		t.Fatalf("callbacks ran %q, want \"first second late\"", got)
	}
}

// TestOnCompleteRacesCompletion: callbacks registered while the future
// completes (and while its completer ends the firing without the lock) all
// run, once each.
func TestOnCompleteRacesCompletion(t *testing.T) {
	for range 3000 {
		p := future.NewPromise[int](nil)
		var ran sync.WaitGroup
		ran.Add(4)
		p.Future().OnComplete(func(int, error) { ran.Done() }) // a firing to end
		start := make(chan struct{})
		for range 3 {
			go func() { <-start; p.Future().OnComplete(func(int, error) { ran.Done() }) }()
		}
		close(start)
		p.Complete(1, nil)
		ran.Wait() // a lost callback hangs here; one run twice panics (negative counter)
	}
}
