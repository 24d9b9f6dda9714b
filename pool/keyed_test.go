package pool_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/pool"
)

func newKeyedPool(t *testing.T, cfg pool.KeyedConfig) *pool.Keyed[int] {
	t.Helper()
	k, err := pool.NewKeyed[int]("keyed", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return k
}

// recorder records the order tasks start in.
type recorder struct {
	mu    sync.Mutex
	order []int
}

func (r *recorder) add(v int) {
	r.mu.Lock()
	r.order = append(r.order, v)
	r.mu.Unlock()
}

// With MaxRunningPerKey 1 a key's tasks run one at a time in submission
// order, on a pool with workers to spare; a task cancelled in the middle
// leaves its place at once.
func TestKeyedSerialOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKeyedPool(t, pool.KeyedConfig{Config: pool.Config{MaxWorkers: 4, QueueCapacity: 100}, MaxRunningPerKey: 1})
		var rec recorder
		var running, high atomic.Int32
		release := make(chan struct{})
		fs := make([]interface{ Cancel() }, 10)
		errs := make([]func() error, 10)
		for i := range 10 {
			f, err := pool.SubmitKeyed(context.Background(), k, 7, func(context.Context) (int, error) {
				if r := running.Add(1); r > high.Load() {
					high.Store(r)
				}
				rec.add(i)
				if i == 0 {
					<-release
				}
				running.Add(-1)
				return i, nil
			})
			if err != nil {
				t.Fatal(i, err)
			}
			fs[i], errs[i] = f, func() error { _, err := f.Result(); return err }
		}
		synctest.Wait()
		if r, q := k.Key(7); r != 1 || q != 9 {
			t.Fatalf("Key(7) = %d running, %d queued; want 1, 9", r, q)
		}
		fs[5].Cancel()
		close(release)
		synctest.Wait()
		want := []int{0, 1, 2, 3, 4, 6, 7, 8, 9}
		if len(rec.order) != len(want) {
			t.Fatalf("start order %v, want %v", rec.order, want)
		}
		for i := range want {
			if rec.order[i] != want[i] {
				t.Fatalf("start order %v, want %v", rec.order, want)
			}
		}
		if high.Load() != 1 {
			t.Fatalf("%d tasks of the key ran at once, want 1", high.Load())
		}
		if err := errs[5](); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled task: %v", err)
		}
		if st := k.KeyStats(); st.ActiveKeys != 0 {
			t.Fatalf("lanes left: %+v", st)
		}
	})
}

// A fan-out of 10 keys x 100 tasks, queued key after key behind one worker,
// starts round robin: one task of each key in turn.
func TestKeyedRoundRobin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKeyedPool(t, pool.KeyedConfig{Config: pool.Config{MaxWorkers: 1, QueueCapacity: 1001}, QueueCapacityPerKey: 100})
		release := make(chan struct{})
		if _, err := pool.SubmitKeyed(context.Background(), k, -1, func(context.Context) (int, error) { <-release; return 0, nil }); err != nil {
			t.Fatal(err)
		}
		var rec recorder
		for key := range 10 {
			for range 100 {
				if _, err := pool.SubmitKeyed(context.Background(), k, key, func(context.Context) (int, error) { rec.add(key); return 0, nil }); err != nil {
					t.Fatal(key, err)
				}
			}
		}
		if _, err := pool.SubmitKeyed(context.Background(), k, 3, func(context.Context) (int, error) { return 0, nil }); !errors.Is(err, bulkhead.ErrBulkheadFull) {
			t.Fatalf("a full lane took a task: %v", err)
		} else if fe := (*bulkhead.FullError)(nil); !errors.As(err, &fe) || fe.Reason != bulkhead.ReasonKey {
			t.Fatalf("full lane: %v, want ReasonKey", err)
		}
		close(release)
		synctest.Wait()
		if len(rec.order) != 1000 {
			t.Fatalf("%d tasks started, want 1000", len(rec.order))
		}
		for i, key := range rec.order {
			if key != i%10 {
				t.Fatalf("start %d was key %d, want %d (order %v...)", i, key, i%10, rec.order[:min(40, len(rec.order))])
			}
		}
		if st := k.KeyStats(); st.ActiveKeys != 0 || st.RejectedKey != 1 {
			t.Fatalf("KeyStats %+v; want no lane left, 1 rejection for a key", st)
		}
	})
}

// A burst of one key takes at most QueueCapacityPerKey queue slots and
// MaxRunningPerKey workers: another key starts at once and queues too.
func TestKeyedBurstLeavesRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKeyedPool(t, pool.KeyedConfig{Config: pool.Config{MaxWorkers: 3, QueueCapacity: 6}, MaxRunningPerKey: 2, QueueCapacityPerKey: 3})
		release := make(chan struct{})
		held := func(context.Context) (int, error) { <-release; return 0, nil }
		var refused error
		for range 10 {
			if _, err := pool.SubmitKeyed(context.Background(), k, 1, held); err != nil {
				refused = err
				break
			}
		}
		if r, q := k.Key(1); r != 2 || q != 3 {
			t.Fatalf("noisy key: %d running, %d queued; want 2, 3", r, q)
		}
		var fe *bulkhead.FullError
		if !errors.As(refused, &fe) || fe.Reason != bulkhead.ReasonKey {
			t.Fatalf("the noisy key's 6th task: %v, want ReasonKey", refused)
		}
		for range 4 {
			if _, err := pool.SubmitKeyed(context.Background(), k, 2, held); err != nil {
				t.Fatalf("the other key was refused: %v", err)
			}
		}
		if r, q := k.Key(2); r != 1 || q != 3 {
			t.Fatalf("other key: %d running, %d queued; want 1, 3", r, q)
		}
		if _, err := pool.SubmitKeyed(context.Background(), k, 3, held); !errors.As(err, &fe) || fe.Reason != bulkhead.ReasonFull {
			t.Fatalf("a full pool: %v, want ReasonFull", err)
		}
		if st := k.Stats(); st.InFlight != 3 || st.QueueDepth != 6 {
			t.Fatalf("Stats %+v", st)
		}
		close(release)
		synctest.Wait()
		if st := k.KeyStats(); st.ActiveKeys != 0 {
			t.Fatalf("lanes left: %+v", st)
		}
	})
}

// QueueTimeout and a submitter's context apply to each queued task; GoKeyed
// waits for room in its lane; Close refuses new work and drains the lanes.
func TestKeyedTimeoutCancelWaitClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, err := pool.NewKeyed[string]("k", pool.KeyedConfig{Config: pool.Config{MaxWorkers: 1, QueueCapacity: 4, QueueTimeout: time.Second}, QueueCapacityPerKey: 1})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		held := func(context.Context) (int, error) { <-release; return 1, nil }
		if _, err := pool.SubmitKeyed(context.Background(), k, "a", held); err != nil {
			t.Fatal(err)
		}
		timedOut, err := pool.SubmitKeyed(context.Background(), k, "b", held)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancelled, err := pool.SubmitKeyed(ctx, k, "c", held)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		synctest.Wait()
		if _, err := cancelled.Result(); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: %v", err)
		}
		if _, q := k.Key("c"); q != 0 || k.KeyStats().ActiveKeys != 2 {
			t.Fatalf("the cancelled task's lane stayed: %+v", k.KeyStats())
		}
		time.Sleep(time.Second) // virtual: the queue timeout passes
		synctest.Wait()
		var fe *bulkhead.FullError
		if _, err := timedOut.Result(); !errors.As(err, &fe) || fe.Reason != bulkhead.ReasonTimeout {
			t.Fatalf("timed out: %v", err)
		}
		if _, err := pool.SubmitKeyed(context.Background(), k, "d", held); err != nil {
			t.Fatal(err)
		}
		waited := make(chan error, 1)
		go func() {
			f, err := pool.GoKeyed(context.Background(), k, "d", held)
			if err == nil {
				_, err = f.Result()
			}
			waited <- err
		}()
		synctest.Wait()
		if _, q := k.Key("d"); q != 2 || k.Stats().Waiting != 1 {
			t.Fatalf("GoKeyed does not wait: %d queued, %+v", q, k.Stats())
		}
		closed := make(chan error, 1)
		go func() { closed <- k.Close(context.Background()) }()
		synctest.Wait()
		if err := <-waited; !errors.Is(err, bulkhead.ErrClosed) {
			t.Fatalf("GoKeyed waiting at Close: %v", err)
		}
		if _, err := pool.SubmitKeyed(context.Background(), k, "e", held); !errors.Is(err, bulkhead.ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
		close(release)
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if st := k.KeyStats(); st.ActiveKeys != 0 {
			t.Fatalf("lanes left after Close: %+v", st)
		}
	})
}

// A lane that empties counts as gone at once; the last 64 stay cached as
// idle (least recently used out, counted in Evicted), and a key's next
// task reuses its idle lane, limits and order intact.
func TestKeyedIdleLanes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKeyedPool(t, pool.KeyedConfig{Config: pool.Config{MaxWorkers: 2, QueueCapacity: 10}, MaxRunningPerKey: 1})
		ctx := context.Background()
		for key := range 70 {
			f, err := pool.SubmitKeyed(ctx, k, key, func(context.Context) (int, error) { return key, nil })
			if err != nil {
				t.Fatal(key, err)
			}
			if v, err := f.Wait(ctx); v != key || err != nil {
				t.Fatalf("key %d: %d, %v", key, v, err)
			}
		}
		synctest.Wait()
		if st := k.KeyStats(); st.ActiveKeys != 0 || st.IdleKeys != 64 || st.Evicted != 6 {
			t.Fatalf("after 70 keys one by one: %+v, want 0 active, 64 idle, 6 evicted", st)
		}
		release := make(chan struct{})
		var rec recorder
		for i := range 3 { // key 69's lane is idle: reused, one task at a time, in order
			if _, err := pool.SubmitKeyed(ctx, k, 69, func(context.Context) (int, error) {
				rec.add(i)
				<-release
				return i, nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if r, q := k.Key(69); r != 1 || q != 2 {
			t.Fatalf("Key(69) = %d running, %d queued; want 1, 2", r, q)
		}
		if r, q := k.Key(68); r != 0 || q != 0 {
			t.Fatalf("idle Key(68) = %d running, %d queued; want 0, 0", r, q)
		}
		if st := k.KeyStats(); st.ActiveKeys != 1 || st.IdleKeys != 63 || st.Evicted != 6 {
			t.Fatalf("with key 69 in use: %+v, want 1 active, 63 idle, 6 evicted", st)
		}
		if _, err := pool.SubmitKeyed(ctx, k, 1000, func(context.Context) (int, error) { return 0, nil }); err != nil {
			t.Fatal(err)
		}
		close(release)
		synctest.Wait()
		if len(rec.order) != 3 || rec.order[0] != 0 || rec.order[1] != 1 || rec.order[2] != 2 {
			t.Fatalf("key 69's start order %v, want [0 1 2]", rec.order)
		}
		if st := k.KeyStats(); st.ActiveKeys != 0 || st.IdleKeys != 64 || st.Evicted != 7 {
			t.Fatalf("after a new key and key 69 done: %+v, want 0 active, 64 idle, 7 evicted", st)
		}
	})
}

// TestKeyedLateWaiterLaneGoesIdle: a GoKeyed submitter refused when its
// deadline less MinDeadlineSlack comes leaves no waiter counted on its
// key's lane, and the lane goes idle (found by a review: the lane stayed
// active for ever).
func TestKeyedLateWaiterLaneGoesIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, err := pool.NewKeyed[string]("test", pool.KeyedConfig{Config: pool.Config{MaxWorkers: 1, QueueCapacity: 1, MinDeadlineSlack: 10 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close(context.Background())
		hold := make(chan struct{})
		fa, err := pool.SubmitKeyed(context.Background(), k, "a", func(context.Context) (int, error) { <-hold; return 0, nil })
		if err != nil {
			t.Fatal(err)
		}
		fq, err := pool.SubmitKeyed(context.Background(), k, "a", answer) // the queue is full now
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := pool.GoKeyed(ctx, k, "b", answer); !errors.Is(err, bulkhead.ErrBulkheadFull) { // refused at 40 ms
			t.Fatalf("GoKeyed: %v", err)
		}
		if r, q := k.Key("b"); r != 0 || q != 0 {
			t.Errorf("Key(b) after its only submitter was refused = %d running, %d queued or waiting; want 0, 0", r, q)
		}
		close(hold)
		fa.Wait(context.Background())
		fq.Wait(context.Background())
		synctest.Wait()
		if ks := k.KeyStats(); ks.ActiveKeys != 0 {
			t.Errorf("at rest: KeyStats %+v; want no active key", ks)
		}
	})
}
