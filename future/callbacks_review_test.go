package future_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/bulkhead-go/bulkhead/future"
)

// a callback added by a callback that runs "at once" (the future was
// already complete) must run after it, on that goroutine (root doc,
// "Callbacks": "one added to a future while its earlier ones still run,
// even by one of them, runs after them on that goroutine"). It runs nested,
// before the outer one finishes.
func TestNestedOnCompleteOnCompletedFuture(t *testing.T) {
	for _, name := range []string{"Completed", "completed Promise"} {
		var f *future.Future[int]
		if name == "Completed" {
			f = future.Completed(1, nil)
		} else {
			p := future.NewPromise[int](nil)
			p.Complete(1, nil)
			f = p.Future()
		}
		var log []string
		f.OnComplete(func(int, error) {
			f.OnComplete(func(int, error) { log = append(log, "inner") })
			log = append(log, "outer")
		})
		if got := strings.Join(log, " "); got != "outer inner" {
			t.Errorf("%s: callbacks ran %q, want \"outer inner\" (as on the completer's goroutine)", name, got)
		}
	}
	// The same registration on the completer's goroutine keeps the order:
	p := future.NewPromise[int](nil)
	f := p.Future()
	var log []string
	f.OnComplete(func(int, error) {
		f.OnComplete(func(int, error) { log = append(log, "inner") })
		log = append(log, "outer")
	})
	p.Complete(1, nil)
	if got := strings.Join(log, " "); got != "outer inner" {
		t.Errorf("completer: callbacks ran %q", got)
	}
}

// a callback registered on another goroutine while an earlier one still
// runs "at once" runs at once too, concurrently with it, instead of after it.
func TestOnCompleteWhileInlineCallbackRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := future.Completed(1, nil)
		in, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var log []string
		go func() {
			defer close(done)
			f.OnComplete(func(int, error) { close(in); <-release; log = append(log, "first") })
		}()
		<-in
		second, registered := make(chan struct{}), make(chan struct{})
		go func() {
			f.OnComplete(func(int, error) { log = append(log, "second"); close(second) })
			close(registered)
		}()
		synctest.Wait()
		select {
		case <-second:
			t.Errorf("the second callback ran while the first (registered before it) still runs")
		default:
		}
		close(release)
		<-done
		<-registered
		<-second
		if got := strings.Join(log, " "); got != "first second" {
			t.Errorf("callbacks ran %q, want \"first second\"", got)
		}
	})
}

// a callback that calls runtime.Goexit (t.FailNow in a callback) or
// panics (recovered by the completer) loses the completion for every All,
// Settle and First hooked after it: they block forever on a future that is
// complete. The root doc says futures stay consistent and nothing is lost;
// Wait on the same future returns.
func TestGatherHearsOfACompletionAfterACallbackExits(t *testing.T) {
	for _, mode := range []string{"All", "Settle", "First"} {
		for _, how := range []string{"Goexit", "recovered panic"} {
			t.Run(mode+"/"+how, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					p := future.NewPromise[int](nil)
					f := p.Future()
					f.OnComplete(func(int, error) {
						if how == "Goexit" {
							runtime.Goexit()
						}
						panic("callback")
					})
					ctx, cancel := context.WithCancel(context.Background()) // ends the gather after the check
					defer cancel()
					gathered := make(chan struct{})
					go func() {
						defer close(gathered)
						switch mode {
						case "All":
							future.All(ctx, f)
						case "Settle":
							future.Settle(ctx, f)
						case "First":
							future.First(ctx, f)
						}
					}()
					waited := make(chan struct{})
					go func() { defer close(waited); f.Wait(context.Background()) }()
					synctest.Wait() // both are waiting, All's hook after the callback's
					completed := make(chan struct{})
					go func() {
						defer close(completed)
						defer func() { recover() }()
						p.Complete(1, nil)
					}()
					<-completed
					synctest.Wait()
					if _, err := f.Result(); err != nil {
						t.Fatalf("Result = %v", err)
					}
					select {
					case <-waited:
					default:
						t.Error("Wait did not return")
					}
					select {
					case <-gathered:
					default:
						t.Errorf("%s still blocks on a future that is complete", mode)
						cancel()
						<-gathered
					}
				})
			})
		}
	}
}
