package bulkheadtest_test

import (
	"context"
	"fmt"

	"github.com/bulkhead-go/bulkhead/bulkheadtest"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// The article's proof with two semaphore bulkheads. Each dependency is
// played by its gate: a call that got a permit waits there until every
// worker has settled, so the two accepted payment calls and the eight
// inventory calls are all in progress at once.
func Example() {
	payment, _ := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 2})
	inventory, _ := semaphore.New("inventory", semaphore.Config{MaxConcurrentCalls: 8})
	var pay, stock bulkheadtest.Gate

	results, err := bulkheadtest.Run(context.Background(),
		bulkheadtest.Burst{Name: "payment", Workers: 6, Limit: 2, Gate: &pay,
			Call: func(ctx context.Context) error { return payment.Do(ctx, pay.Wait) }},
		bulkheadtest.Burst{Name: "inventory", Workers: 8, Limit: 8, Gate: &stock,
			Call: func(ctx context.Context) error { return inventory.Do(ctx, stock.Wait) }},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range results {
		fmt.Println(r)
	}
	fmt.Println("isolated:", bulkheadtest.Check(results) == nil)
	// Output:
	// payment: 2 accepted, 4 rejected, 0 other, peak 2 (limit 2, 6 workers)
	// inventory: 8 accepted, 0 rejected, 0 other, peak 8 (limit 8, 8 workers)
	// isolated: true
}

// The pitfall: payment and inventory share one bulkhead of 8 permits. The
// slow payment calls arrive first and keep 6 permits, so only 2 inventory
// calls get through and Check reports the broken isolation.
func ExampleRunInOrder() {
	shared, _ := semaphore.New("shared", semaphore.Config{MaxConcurrentCalls: 8})
	var pay, stock bulkheadtest.Gate

	results, err := bulkheadtest.RunInOrder(context.Background(),
		bulkheadtest.Burst{Name: "payment", Workers: 6, Limit: 2, Gate: &pay,
			Call: func(ctx context.Context) error { return shared.Do(ctx, pay.Wait) }},
		bulkheadtest.Burst{Name: "inventory", Workers: 8, Limit: 8, Gate: &stock,
			Call: func(ctx context.Context) error { return shared.Do(ctx, stock.Wait) }},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range results {
		fmt.Println(r)
	}
	fmt.Println("isolated:", bulkheadtest.Check(results) == nil)
	// Output:
	// payment: 6 accepted, 0 rejected, 0 other, peak 6 (limit 2, 6 workers)
	// inventory: 2 accepted, 6 rejected, 0 other, peak 2 (limit 8, 8 workers)
	// isolated: false
}
