package pool

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// A queued task past its QueueTimeout (or its deadline less the slack) is
// never started, even if a worker frees before its timer's callback has
// the lock: here the timer is stopped, as if its callback were late, and
// the worker refuses the task itself.
func TestPoolExpiredHeadNeverStartsBeforeItsTimer(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ctx  func() (context.Context, context.CancelFunc)
		want bulkhead.Reason
	}{
		{"QueueTimeout", Config{MaxWorkers: 1, QueueCapacity: 2, QueueTimeout: 10 * time.Millisecond},
			func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }, bulkhead.ReasonTimeout},
		{"MinDeadlineSlack", Config{MaxWorkers: 1, QueueCapacity: 2, MinDeadlineSlack: 10 * time.Millisecond},
			func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 20*time.Millisecond)
			}, bulkhead.ReasonDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, err := New("head", tc.cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close(context.Background())
				hold := make(chan struct{})
				if _, err := b.TryGo(context.Background(), func(context.Context) error { <-hold; return nil }); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := tc.ctx()
				defer cancel()
				ran, nextRan := false, false
				f, err := b.TryGo(ctx, func(context.Context) error { ran = true; return nil })
				if err != nil {
					t.Fatal(err)
				}
				b.mu.Lock()
				b.queue.head.x.expiry.Stop() // its callback is late
				b.mu.Unlock()
				time.Sleep(5 * time.Millisecond)
				next, err := b.TryGo(context.Background(), func(context.Context) error { nextRan = true; return nil })
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(7 * time.Millisecond) // f is 2ms past its point, next 3ms before its QueueTimeout
				close(hold)
				if _, err := next.Wait(context.Background()); err != nil || !nextRan {
					t.Fatalf("the task behind it: ran %v, err %v", nextRan, err)
				}
				_, err = f.Result()
				var fe *bulkhead.FullError
				if ran || !errors.As(err, &fe) || fe.Reason != tc.want || !fe.Waited {
					t.Fatalf("expired task: ran %v, err %v; want a FullError with reason %v", ran, err, tc.want)
				}
				if s := b.Stats(); s.RejectedBy[tc.want] != 1 || s.Finished != 2 {
					t.Fatalf("stats %+v", s)
				}
			})
		})
	}
}

// A submitter waiting for room whose deadline less the slack has come is
// neither started (no queue) nor queued by a worker that frees before its
// timer has woken it: here its point is moved to now, as if its timer were
// late, and the worker refuses it.
func TestPoolLateWaiterNeverAdmittedBeforeItsTimer(t *testing.T) {
	for _, queue := range []int{0, 1} {
		synctest.Test(t, func(t *testing.T) {
			b, err := New("late", Config{MaxWorkers: 1, QueueCapacity: queue, MinDeadlineSlack: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close(context.Background())
			hold := make(chan struct{})
			for range 1 + queue {
				if _, err := b.TryGo(context.Background(), func(context.Context) error { <-hold; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			ran := false
			errc := make(chan error, 1)
			go func() {
				_, err := b.Go(ctx, func(context.Context) error { ran = true; return nil })
				errc <- err
			}()
			time.Sleep(30 * time.Millisecond)
			b.mu.Lock()
			b.waiting.head.x.deadline = b.now() // its point has come; its timer is late
			b.mu.Unlock()
			close(hold)
			err = <-errc
			var fe *bulkhead.FullError
			if synctest.Wait(); ran || !errors.As(err, &fe) || fe.Reason != bulkhead.ReasonDeadline {
				t.Fatalf("queue %d: ran %v, err %v; want a FullError with reason deadline", queue, ran, err)
			}
			if s := b.Stats(); s.Permitted != uint64(1+queue) || s.QueueDepth != 0 {
				t.Fatalf("queue %d: stats %+v", queue, s)
			}
		})
	}
}

// The same in a keyed pool, whose workers refill the queue lane by lane
// (refillKeyedLocked, queue 1) or start a waiter's task that its lane
// would start (popKeyedLocked, queue 0), and in a pool with priorities,
// whose class lanes do the same (refillPrioLocked, popPrioLocked).
func TestLanesLateWaiterNeverAdmittedBeforeItsTimer(t *testing.T) {
	cfg := func(queue int) Config {
		return Config{MaxWorkers: 1, QueueCapacity: queue, MinDeadlineSlack: 10 * time.Millisecond}
	}
	type lanePool struct {
		b      *Bulkhead
		submit func(ctx context.Context, fn func(context.Context) error, wait bool) error
	}
	kinds := map[string]func(t *testing.T, queue int) lanePool{
		"keyed": func(t *testing.T, queue int) lanePool {
			k, err := NewKeyed[string]("late", KeyedConfig{Config: cfg(queue)})
			if err != nil {
				t.Fatal(err)
			}
			return lanePool{k.b, func(ctx context.Context, fn func(context.Context) error, wait bool) error {
				f := func(ctx context.Context) (int, error) { return 0, fn(ctx) }
				var err error
				if wait {
					_, err = GoKeyed(ctx, k, "b", f)
				} else {
					_, err = SubmitKeyed(ctx, k, "a", f)
				}
				return err
			}}
		},
		"priorities": func(t *testing.T, queue int) lanePool {
			c := cfg(queue)
			c.Priorities = &bulkhead.Priorities{}
			b, err := New("late", c)
			if err != nil {
				t.Fatal(err)
			}
			return lanePool{b, func(ctx context.Context, fn func(context.Context) error, wait bool) error {
				var err error
				if wait {
					_, err = b.Go(ctx, fn)
				} else {
					_, err = b.TryGo(ctx, fn)
				}
				return err
			}}
		},
	}
	for name, open := range kinds {
		for _, queue := range []int{0, 1} {
			synctest.Test(t, func(t *testing.T) {
				p := open(t, queue)
				b := p.b
				defer b.Close(context.Background())
				hold := make(chan struct{})
				for range 1 + queue {
					if err := p.submit(context.Background(), func(context.Context) error { <-hold; return nil }, false); err != nil {
						t.Fatal(err)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				ran := false
				errc := make(chan error, 1)
				go func() { errc <- p.submit(ctx, func(context.Context) error { ran = true; return nil }, true) }()
				time.Sleep(30 * time.Millisecond)
				b.mu.Lock()
				b.waiting.head.x.deadline = b.now() // its point has come; its timer is late
				b.mu.Unlock()
				close(hold)
				err := <-errc
				var fe *bulkhead.FullError
				if synctest.Wait(); ran || !errors.As(err, &fe) || fe.Reason != bulkhead.ReasonDeadline {
					t.Fatalf("%s, queue %d: ran %v, err %v; want a FullError with reason deadline", name, queue, ran, err)
				}
				if s := b.Stats(); s.Permitted != uint64(1+queue) || s.QueueDepth != 0 || s.Waiting != 0 {
					t.Fatalf("%s, queue %d: stats %+v", name, queue, s)
				}
			})
		}
	}
}
