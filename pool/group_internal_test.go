package pool

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"weak"

	"github.com/bulkhead-go/bulkhead"
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

// A Go waiting at the group's limit offers its task to the worker of the
// group's task that leaves the pool (take): started in that slot, it is
// counted permitted and finished once, with its events, and the pool runs
// no more than MaxWorkers functions; with a subscriber (the events go out
// on the worker) it starts on another worker.
func TestGroupHandOverCounts(t *testing.T) {
	for _, subscribed := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			b, err := New("hand", Config{MaxWorkers: 1, QueueCapacity: 1})
			if err != nil {
				t.Fatal(err)
			}
			var events [bulkhead.EventFinished + 1]atomic.Int64
			if subscribed {
				defer b.Subscribe(func(e bulkhead.Event) { events[e.Type].Add(1) })()
			}
			var running, most atomic.Int64
			release := make(chan struct{})
			task := func(i int) func(context.Context) (int, error) {
				return func(context.Context) (int, error) {
					most.Store(max(most.Load(), running.Add(1)))
					defer running.Add(-1)
					if i == 0 {
						<-release
					}
					return i, nil
				}
			}
			g := NewGroup[int](context.Background(), b)
			g.SetLimit(1)
			g.Go(task(0))
			goReturned := make(chan struct{})
			go func() {
				defer close(goReturned)
				for i := 1; i < 4; i++ {
					g.Go(task(i))
				}
			}()
			synctest.Wait()
			if g.hand.Load() == nil {
				t.Fatal("Go at the limit did not offer its task")
			}
			close(release)
			<-goReturned
			vals, err := g.Wait()
			if err != nil || vals[3] != 3 {
				t.Fatalf("Wait: %v %v", vals, err)
			}
			s := b.Stats()
			if s.Permitted != 4 || s.Finished != 4 || s.InFlight != 0 || most.Load() != 1 {
				t.Errorf("stats %+v, %d at once; want 4 permitted and finished, 1 at once", s, most.Load())
			}
			if err := b.Close(context.Background()); err != nil { // after the last events
				t.Fatal(err)
			}
			if subscribed && (events[bulkhead.EventPermitted].Load() != 4 || events[bulkhead.EventFinished].Load() != 4) {
				t.Fatalf("%d permitted and %d finished events, want 4 each", events[bulkhead.EventPermitted].Load(), events[bulkhead.EventFinished].Load())
			}
		})
	}
}

// The worker of a group's task that leaves the pool starts a queued task
// of another caller before the group's waiting Go: the pool's line first.
func TestGroupHandOverAfterTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := New("hand", Config{MaxWorkers: 1, QueueCapacity: 1})
		if err != nil {
			t.Fatal(err)
		}
		order := make(chan string, 3)
		release := make(chan struct{})
		g := NewGroup[int](context.Background(), b)
		g.SetLimit(1)
		g.Go(func(context.Context) (int, error) { <-release; order <- "group 0"; return 0, nil })
		f, err := Submit(context.Background(), b, func(context.Context) (int, error) { order <- "other"; return 0, nil })
		if err != nil {
			t.Fatal(err)
		}
		goReturned := make(chan struct{})
		go func() {
			defer close(goReturned)
			g.Go(func(context.Context) (int, error) { order <- "group 1"; return 1, nil })
		}()
		synctest.Wait()
		close(release)
		<-goReturned
		if _, err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		close(order)
		var got []string
		for s := range order {
			got = append(got, s)
		}
		if len(got) != 3 || got[1] != "other" {
			t.Fatalf("order %v, want the other caller's task second", got)
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// handCounter is a task's Group that counts the tasks its take hands over.
type handCounter struct {
	*Group[int]
	handed atomic.Int64
}

func (c *handCounter) take(n *node) *node {
	next := c.Group.take(n)
	if next != nil {
		c.handed.Add(1)
	}
	return next
}

// The hand-over happens: with one worker and a limit of 1, each task of a
// Go waiting at the limit is started by the worker of the group's task
// before it (a test that only checks the counts passes without it).
func TestGroupHandOverHappens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := New("hand", Config{MaxWorkers: 1, QueueCapacity: 1})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		g := NewGroup[int](context.Background(), b)
		g.SetLimit(1)
		counter := &handCounter{Group: g}
		g.Go(func(context.Context) (int, error) { <-release; return 0, nil })
		b.mu.Lock()
		g.ts[0].grp = counter // the worker reads grp under b.mu as the task ends
		b.mu.Unlock()
		goReturned := make(chan struct{})
		go func() {
			defer close(goReturned)
			g.Go(func(context.Context) (int, error) { return 1, nil })
		}()
		synctest.Wait()
		close(release)
		<-goReturned
		if vals, err := g.Wait(); err != nil || vals[1] != 1 {
			t.Fatalf("Wait: %v %v", vals, err)
		}
		if n := counter.handed.Load(); n != 1 {
			t.Errorf("%d tasks handed over, want 1", n)
		}
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
