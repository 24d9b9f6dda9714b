package pool

import (
	"context"
	"runtime"
	"testing"
	"weak"
)

// A group keeps the tasks in the pool alive, not the ones that have ended:
// their values are kept, their memory is the collector's.
func TestGroupForgetsEndedTasks(t *testing.T) {
	b, err := New("forget", Config{MaxWorkers: 1, QueueCapacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	g := NewGroup[int](context.Background(), b)
	g.SetLimit(1)
	const n = 10
	ws := make(chan weak.Pointer[node], n)
	for i := range n {
		g.Go(func(ctx context.Context) (int, error) {
			ws <- weak.Make(ctx.(*node))
			return i, nil
		})
		g.mu.Lock()
		for g.ts[i] != nil { // the next Go finds it ended
			g.cond.Wait()
		}
		g.mu.Unlock()
	}
	runtime.GC()
	runtime.GC()
	alive := 0
	for range n - 2 {
		if (<-ws).Value() != nil {
			alive++
		}
	}
	vals, err := g.Wait()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if v != i {
			t.Fatalf("value %d is %d", i, v)
		}
	}
	if alive > 1 {
		t.Errorf("%d of the first %d ended tasks are still alive", alive, n-2)
	}
}
