package pool_test

import (
	"context"
	"testing"

	"github.com/bulkhead-go/bulkhead/pool"
)

// GoKeyed called from a running task, with the queue full, runs in the
// caller's slot only after an earlier GoKeyed of its key that still waits
// for room: the key's tasks start in submission order (found by a review:
// the later one ran first).
func TestKeyedCallerRunsKeepsItsKeysOrder(t *testing.T) {
	k := newKeyedPool(t, pool.KeyedConfig{
		Config:           pool.Config{MaxWorkers: 1, QueueCapacity: 1},
		MaxRunningPerKey: 1,
	})
	ctx := guardCtx(t)
	var rec recorder
	proceed := make(chan struct{})
	lentDone := make(chan error, 1)
	// T, key 1, holds the only worker until proceed.
	fT, err := pool.SubmitKeyed(ctx, k, 1, func(tctx context.Context) (int, error) {
		<-proceed
		// key 2, second in submission order: the pool lends T's slot.
		f, err := pool.GoKeyed(tctx, k, 2, func(context.Context) (int, error) { rec.add(2); return 0, nil })
		if err == nil {
			_, err = f.Wait(tctx)
		}
		lentDone <- err
		return 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// fill the queue (key 1)
	fA, err := pool.SubmitKeyed(ctx, k, 1, func(context.Context) (int, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	// key 2, first in submission order: waits for room.
	w1 := make(chan error, 1)
	go func() {
		f, err := pool.GoKeyed(ctx, k, 2, func(context.Context) (int, error) { rec.add(1); return 0, nil })
		if err == nil {
			_, err = f.Wait(ctx)
		}
		w1 <- err
	}()
	if !until(func() bool { _, q := k.Key(2); return q == 1 && k.Stats().Waiting == 1 }) {
		t.Fatal("GoKeyed did not wait")
	}
	close(proceed)
	if err := recv(t, lentDone, "lent task"); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, w1, "waiter"); err != nil {
		t.Fatal(err)
	}
	wait(t, fT)
	wait(t, fA)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.order) != 2 || rec.order[0] != 1 {
		t.Fatalf("key 2's tasks started in order %v, want [1 2] (submission order)", rec.order)
	}
}
