package pool

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func revhRecv[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// A GoKeyed from a task (queue full) whose key's only waiting submitter
// has a context that ended (its awaitRoom not yet past b.mu) makes
// keyWaiterLocked cancel that waiter: leaveLineLocked's tidyLocked sees
// the lane empty (the new task is not counted in it yet) and makes it
// idle. The new task then runs in the caller's slot in a lane that is in
// the idle ring: KeyStats undercounts, and once 64 other lanes go idle the
// lane in use is evicted from the map; the key's next task gets a new lane
// and runs beside it, past MaxRunningPerKey 1.
//
// The test takes b.mu, cancels the waiter's context and calls
// admitKeyedLocked as submitKeyed does under one hold of b.mu, so that the
// waiter's awaitRoom (woken by its ctx) cannot take the lock first: the
// interleaving is the one where a task's GoKeyed wins the lock race
// against a waiter whose context has just ended.
func TestKeyedKeyWaiterCancelKeepsTheCallersLane(t *testing.T) {
	k, err := NewKeyed[int]("revh", KeyedConfig{Config: Config{MaxWorkers: 2, QueueCapacity: 0}, MaxRunningPerKey: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())
	b := k.b
	releaseB := make(chan struct{})
	fB, err := SubmitKeyed(context.Background(), k, 100, func(context.Context) (int, error) { <-releaseB; return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	goA := make(chan struct{})
	ctxW, cancelW := context.WithCancel(context.Background())
	defer cancelW()
	var key2Running, violated atomic.Bool
	var activeKeysWhileRunning atomic.Int64
	evicted := make(chan struct{})
	fA, err := SubmitKeyed(context.Background(), k, 1, func(tctx context.Context) (int, error) {
		<-goA
		b.mu.Lock() // what submitKeyed does, with the waiter's ctx ending just before
		cancelW()
		n := newTask(b, tctx, func(context.Context) (int, error) {
			key2Running.Store(true)
			defer key2Running.Store(false)
			activeKeysWhileRunning.Store(int64(k.KeyStats().ActiveKeys))
			close(releaseB) // slot 2 frees
			<-evicted
			return 0, nil
		})
		n.lane = k.laneLocked(2)
		err := b.admitKeyedLocked(tctx, &n.node, true) // returns once n has run in A's slot
		return 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
	wErr := make(chan error, 1)
	go func() { // key 2's waiting submitter
		_, err := GoKeyed(ctxW, k, 2, func(context.Context) (int, error) { return 0, nil })
		wErr <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); k.Stats().Waiting != 1; {
		if time.Now().After(deadline) {
			t.Fatal("GoKeyed did not wait")
		}
		time.Sleep(time.Millisecond)
	}
	close(goA)
	if err := revhRecv(t, wErr, "the waiter"); err != context.Canceled {
		t.Fatalf("the waiter's GoKeyed: %v, want context.Canceled", err)
	}
	if _, err := fB.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !key2Running.Load(); {
		if time.Now().After(deadline) {
			t.Fatal("key 2's task did not start")
		}
		time.Sleep(time.Millisecond)
	}
	// 64 other keys run one after another in slot 2 and go idle.
	for key := 1000; key < 1064; key++ {
		f, err := SubmitKeyed(context.Background(), k, key, func(context.Context) (int, error) { return 0, nil })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// key 2 has a task running: with MaxRunningPerKey 1 and no queue, this
	// one must be refused (ReasonKey), not run beside it.
	ran := make(chan struct{})
	fX, errX := SubmitKeyed(context.Background(), k, 2, func(context.Context) (int, error) {
		if key2Running.Load() {
			violated.Store(true)
		}
		close(ran)
		return 0, nil
	})
	if errX == nil {
		revhRecv(t, ran, "the second key-2 task")
		fX.Wait(context.Background())
	}
	close(evicted)
	if _, err := fA.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := activeKeysWhileRunning.Load(); got != 3 {
		t.Errorf("KeyStats().ActiveKeys = %d while keys 1, 2 and 100 each ran a task, want 3 (key 2's lane was made idle while in use)", got)
	}
	if violated.Load() {
		t.Errorf("a second task of key 2 ran beside the first with MaxRunningPerKey 1 (SubmitKeyed err %v): key 2's lane in use was evicted from the idle cache", errX)
	}
}
