package future

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead/internal/join"
)

// task is a Canceler standing for a queued pool task: fakeHelper "starts"
// it by completing its future.
type task struct {
	name string
	p    *Promise[int]
	v    int
}

func (*task) Cancel() {}

// fakeHelper stands for a pool task's context: Help records each target,
// and returns busy for the first busyFor calls (the task's slot lent
// elsewhere), then completes the target.
type fakeHelper struct {
	mu      sync.Mutex
	calls   []string
	busyFor int
	busy    chan struct{}
	gave    chan struct{} // buffered; told each time busy is returned
}

func (h *fakeHelper) Help(target any, decided func() bool) <-chan struct{} {
	t, ok := target.(*task)
	if !ok {
		return nil
	}
	h.mu.Lock()
	h.calls = append(h.calls, t.name)
	if h.busyFor > 0 {
		h.busyFor--
		h.mu.Unlock()
		h.gave <- struct{}{}
		return h.busy
	}
	h.mu.Unlock()
	t.p.Complete(t.v, nil)
	return nil
}

func helperCtx(h join.Helper) context.Context {
	return context.WithValue(context.Background(), join.Key, h)
}

func newTask(name string, v int) *task {
	t := &task{name: name, v: v}
	t.p = NewPromise[int](t)
	return t
}

// Wait on a chain of Then stages asks the helper for the chain's source.
func TestWaitHelpsThroughThen(t *testing.T) {
	h := &fakeHelper{}
	src := newTask("src", 1)
	g := Then(Then(src.p.Future(), func(v int) (int, error) { return v + 1, nil }),
		func(v int) (int, error) { return v * 10, nil })
	if v, err := g.Wait(helperCtx(h)); v != 20 || err != nil {
		t.Fatalf("Wait = %d, %v", v, err)
	}
	if len(h.calls) != 1 || h.calls[0] != "src" {
		t.Fatalf("Help calls %v, want [src]", h.calls)
	}
}

// A Wait told that the slot is lent elsewhere asks again once it is free.
func TestWaitHelpsAgainOnceTheSlotIsFree(t *testing.T) {
	h := &fakeHelper{busyFor: 1, busy: make(chan struct{}), gave: make(chan struct{}, 1)}
	tk := newTask("a", 3)
	go func() {
		<-h.gave // Wait was told the slot is lent: now give it back
		close(h.busy)
	}()
	ctx, cancel := context.WithTimeout(helperCtx(h), 10*time.Second)
	defer cancel()
	if v, err := tk.p.Future().Wait(ctx); v != 3 || err != nil {
		t.Fatalf("Wait = %d, %v", v, err)
	}
	if len(h.calls) != 2 {
		t.Fatalf("Help calls %v, want two for a", h.calls)
	}
}

// All, Settle and First ask the helper for their pending futures in
// argument order, and none for a completed one.
func TestGatherHelpsInOrder(t *testing.T) {
	for _, name := range []string{"All", "Settle", "First"} {
		t.Run(name, func(t *testing.T) {
			h := &fakeHelper{}
			a, b, c := newTask("a", 1), newTask("b", 2), newTask("c", 3)
			b.p.Complete(2, nil)
			fs := []*Future[int]{a.p.Future(), b.p.Future(), c.p.Future()}
			ctx := helperCtx(h)
			want := "[a c]"
			switch name {
			case "All":
				if vs, err := All(ctx, fs...); err != nil || vs[2] != 3 {
					t.Fatal(vs, err)
				}
			case "Settle":
				Settle(ctx, fs...)
			case "First":
				want = "[a]" // a decides First; c is not started
				if v, err := First(ctx, fs[0], fs[2]); v != 1 || err != nil {
					t.Fatal(v, err)
				}
			}
			if got := fmt.Sprint(h.calls); got != want {
				t.Fatalf("Help calls %s, want %s", got, want)
			}
		})
	}
}
