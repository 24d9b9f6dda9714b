package pool_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// ants starts a default pool with two goroutines when it is imported; they
// exist before any test runs, so IgnoreCurrent ignores exactly them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

// guard bounds a wait that must end; it is never a pass criterion.
const guard = 10 * time.Second

func guardCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(cancel)
	return ctx
}

// until yields until cond holds and reports whether it did before the
// guard ran out (the guard only keeps a broken test from spinning forever).
func until(cond func() bool) bool {
	for end := time.Now().Add(guard); !cond(); {
		if time.Now().After(end) {
			return false
		}
		runtime.Gosched()
	}
	return true
}

// collect runs the garbage collector until n values have come on ch (from
// runtime.AddCleanup functions) and returns them; fewer if the guard runs
// out first (it only keeps a broken test from waiting forever).
func collect[T any](ch <-chan T, n int) []T {
	var got []T
	for end := time.Now().Add(guard); len(got) < n; {
		runtime.GC()
		select {
		case v := <-ch:
			got = append(got, v)
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(end) {
				return got
			}
		}
	}
	return got
}

// newPool returns a bulkhead that the test closes at its end, checking that
// Close returns nil and no goroutine of it is left.
func newPool(t testing.TB, cfg pool.Config) *pool.Bulkhead {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	b, err := pool.New("test", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(guardCtx(t)); err != nil {
			t.Errorf("Close: %v", err)
		}
		if tt, ok := t.(*testing.T); ok {
			goleak.VerifyNone(tt, ignore)
		}
	})
	return b
}

// gate holds tasks until it is opened, and tells the test when each starts.
type gate struct {
	started chan struct{}
	open    chan struct{}
	ran     atomic.Int32
}

func newGate() *gate { return &gate{started: make(chan struct{}, 1024), open: make(chan struct{})} }

// task blocks until the gate opens (or its context ends, if honourCtx).
func (g *gate) task(v int) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		g.ran.Add(1)
		g.started <- struct{}{}
		<-g.open
		return v, nil
	}
}

func (g *gate) waitStarted(t testing.TB, n int) {
	t.Helper()
	timeout := time.After(guard)
	for range n {
		select {
		case <-g.started:
		case <-timeout:
			t.Fatalf("tasks did not start")
		}
	}
}

func (g *gate) release() { close(g.open) }

// recv receives from ch, failing the test if nothing comes within guard.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(guard):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func mustSubmit[T any](t testing.TB, b *pool.Bulkhead, fn func(context.Context) (T, error)) *future.Future[T] {
	t.Helper()
	f, err := pool.Submit(context.Background(), b, fn)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	return f
}

func wait[T any](t testing.TB, f *future.Future[T]) (T, error) {
	t.Helper()
	return f.Wait(guardCtx(t))
}

// wantStats fails unless b's Stats are want. The rejections by reason must
// add up to Rejected; their split is checked only if want gives one.
func wantStats(t testing.TB, b *pool.Bulkhead, want bulkhead.Stats) {
	t.Helper()
	got := b.Stats()
	want.Name, want.Kind = "test", bulkhead.Pool
	var sum uint64
	for _, n := range got.RejectedBy {
		sum += n
	}
	if sum != got.Rejected {
		t.Fatalf("Stats: rejections by reason %v add up to %d, Rejected is %d", got.RejectedBy, sum, got.Rejected)
	}
	if want.RejectedBy == ([len(bulkhead.Reasons) + 1]uint64{}) {
		want.RejectedBy = got.RejectedBy
	}
	if got != want {
		t.Fatalf("Stats:\n got %+v\nwant %+v", got, want)
	}
}

// atRest checks the accounting identity once nothing runs or waits.
func atRest(t testing.TB, b *pool.Bulkhead) bulkhead.Stats {
	t.Helper()
	s := b.Stats()
	if s.InFlight != 0 || s.QueueDepth != 0 {
		t.Fatalf("not at rest: %+v", s)
	}
	if s.Permitted != s.Finished+uint64(s.InFlight) {
		t.Fatalf("Permitted %d != Finished %d + InFlight %d", s.Permitted, s.Finished, s.InFlight)
	}
	return s
}
