package pool_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

func ExampleSubmit() {
	ctx := context.Background()
	prices, err := pool.New("prices", pool.Config{MaxWorkers: 4, QueueCapacity: 16})
	if err != nil {
		panic(err)
	}
	defer prices.Close(ctx)

	// Fan out, do something else meanwhile, then collect in order.
	var fs []*future.Future[int]
	for _, sku := range []int{1, 2, 3} {
		f, err := pool.Submit(ctx, prices, func(ctx context.Context) (int, error) {
			return sku * 100, nil // call the price service here
		})
		if err != nil {
			panic(err)
		}
		fs = append(fs, f)
	}
	all, err := future.All(ctx, fs...)
	fmt.Println(all, err)
	// Output: [100 200 300] <nil>
}

// Fan-out that must run every task: 50 lookups on 4 workers with a queue of
// 10. Go waits for room instead of rejecting; future.All gathers the
// values in order, and if one lookup fails it returns that lookup's index
// and error and cancels the rest.
func ExampleGo() {
	ctx := context.Background()
	lookups, err := pool.New("lookups", pool.Config{MaxWorkers: 4, QueueCapacity: 10})
	if err != nil {
		panic(err)
	}
	defer lookups.Close(ctx)
	lookup := func(ctx context.Context, i int) (int, error) { return i * i, nil } // the real call

	var fs []*future.Future[int]
	for i := range 50 {
		f, err := pool.Go(ctx, lookups, func(ctx context.Context) (int, error) { return lookup(ctx, i) })
		if err != nil {
			panic(err) // ctx ended, or the pool was closed
		}
		fs = append(fs, f)
	}
	vals, err := future.All(ctx, fs...)

	fmt.Println(len(vals), vals[7], err, lookups.Stats().Rejected)
	// Output: 50 49 <nil> 0
}

func ExampleBulkhead_TryGo() {
	ctx := context.Background()
	audit, _ := pool.New("audit", pool.Config{MaxWorkers: 1, QueueCapacity: 1})
	defer audit.Close(ctx)

	release := make(chan struct{})
	first, _ := audit.TryGo(ctx, func(context.Context) error { <-release; return nil })
	second, _ := audit.TryGo(ctx, func(context.Context) error { return nil }) // queued
	_, err := audit.TryGo(ctx, func(context.Context) error { return nil })
	fmt.Println(errors.Is(err, bulkhead.ErrBulkheadFull))
	fmt.Println(err)

	close(release)
	_, err1 := first.Wait(ctx)
	_, err2 := second.Wait(ctx)
	s := audit.Stats()
	fmt.Println(err1, err2, "permitted", s.Permitted, "rejected", s.Rejected)
	// Output:
	// true
	// bulkhead "audit" (pool) is full (maxWorkers 1, queueCapacity 1)
	// <nil> <nil> permitted 2 rejected 1
}

func ExampleBulkhead_Close() {
	b, _ := pool.New("reports", pool.DefaultConfig())
	f, _ := pool.Submit(context.Background(), b, func(context.Context) (string, error) { return "done", nil })

	// Close refuses new work at once, and returns once the accepted work
	// has finished.
	fmt.Println(b.Close(context.Background()))
	fmt.Println(f.Result())
	_, err := pool.Submit(context.Background(), b, func(context.Context) (string, error) { return "", nil })
	fmt.Println(err)
	// Output:
	// <nil>
	// done <nil>
	// bulkhead: closed
}
