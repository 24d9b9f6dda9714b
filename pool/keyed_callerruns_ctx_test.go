package pool_test

import (
	"context"
	"testing"

	"github.com/bulkhead-go/bulkhead/pool"
)

// GoKeyed from a task, queue full, first runs its key's earlier waiter in
// the caller's slot, then looks again. If the caller's ctx ends while that
// waiter runs (the caller is waiting, as GoKeyed's doc says its wait for
// room ends with ctx), the caller's fn must not run (found by a review:
// the second look did not check ctx).
func TestKeyedCallerRunsStopsWhenItsContextEndsWhileItWaits(t *testing.T) {
	k, err := pool.NewKeyed[int]("revh", pool.KeyedConfig{Config: pool.Config{MaxWorkers: 1, QueueCapacity: 0}, MaxRunningPerKey: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())
	goT := make(chan struct{})
	cctxC := make(chan context.CancelFunc, 1)
	type res struct {
		ran bool
		err error
	}
	out := make(chan res, 1)
	fT, err := pool.SubmitKeyed(context.Background(), k, 1, func(tctx context.Context) (int, error) {
		<-goT
		cctx, cancel := context.WithCancel(tctx)
		cctxC <- cancel
		ran := false
		f, err := pool.GoKeyed(cctx, k, 2, func(context.Context) (int, error) { ran = true; return 0, nil })
		if err == nil {
			f.Wait(context.Background())
		}
		out <- res{ran, err}
		return 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wErr := make(chan error, 1)
	go func() { // key 2's earlier submitter, waiting for room
		f, err := pool.GoKeyed(context.Background(), k, 2, func(context.Context) (int, error) {
			(<-cctxC)() // the caller's ctx ends while it waits for this one
			return 0, nil
		})
		if err == nil {
			_, err = f.Wait(context.Background())
		}
		wErr <- err
	}()
	if !until(func() bool { return k.Stats().Waiting == 1 }) {
		t.Fatal("GoKeyed did not wait")
	}
	close(goT)
	r := <-out
	if err := <-wErr; err != nil {
		t.Fatal(err)
	}
	fT.Wait(context.Background())
	if r.ran || r.err != context.Canceled {
		t.Errorf("GoKeyed whose ctx ended while it waited: ran %v, err %v; want not run, context.Canceled", r.ran, r.err)
	}
}
