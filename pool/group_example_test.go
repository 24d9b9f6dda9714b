package pool_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// A fan-out as one call: look up every sku through the lookups pool, the
// values in Go order. The first failure cancels the lookups still to do and
// names the one that failed.
func ExampleGroup() {
	ctx := context.Background()
	lookups, err := pool.New("lookups", pool.Config{MaxWorkers: 8, QueueCapacity: 50})
	if err != nil {
		panic(err)
	}
	defer lookups.Close(ctx)
	stock := func(ctx context.Context, sku int) (int, error) { // the real call
		if sku == 37 {
			return 0, errors.New("not found")
		}
		return sku * 10, nil
	}

	g := pool.NewGroup[int](ctx, lookups)
	for sku := range 5 {
		g.Go(func(ctx context.Context) (int, error) { return stock(ctx, sku) })
	}
	counts, err := g.Wait()
	fmt.Println(counts, err)

	g = pool.NewGroup[int](ctx, lookups)
	for _, sku := range []int{36, 37, 38} {
		g.Go(func(ctx context.Context) (int, error) { return stock(ctx, sku) })
	}
	_, err = g.Wait()
	if te, ok := errors.AsType[*future.TaskError](err); ok {
		fmt.Println("lookup", te.Index, "failed:", te.Err)
	}
	// Output:
	// [0 10 20 30 40] <nil>
	// lookup 1 failed: not found
}

// SetLimit caps how many of the group's tasks are in the pool at once,
// queued or running: here 2 of the pool's 4 workers, so that the rest of
// the pool stays free for other callers while the group runs. Go waits
// while the group is at its limit.
func ExampleGroup_SetLimit() {
	ctx := context.Background()
	reports, err := pool.New("reports", pool.Config{MaxWorkers: 4, QueueCapacity: 16})
	if err != nil {
		panic(err)
	}
	defer reports.Close(ctx)

	g := pool.NewGroup[string](ctx, reports)
	g.SetLimit(2)
	peak := 0
	for _, month := range []string{"jan", "feb", "mar", "apr", "may"} {
		g.Go(func(context.Context) (string, error) { return "report " + month, nil })
		s := reports.Stats()
		peak = max(peak, s.InFlight+s.QueueDepth)
	}
	done, err := g.Wait()
	fmt.Println(done, err)
	fmt.Println("never more than 2 in the pool:", peak <= 2)
	// Output:
	// [report jan report feb report mar report apr report may] <nil>
	// never more than 2 in the pool: true
}
