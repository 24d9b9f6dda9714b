package bulkheadtest_test

import (
	"context"
	"fmt"

	"github.com/bulkhead-go/bulkhead/bulkheadtest"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// Per-key isolation: one burst per key, through one keyed bulkhead. The
// noisy tenant arrives first with ten calls and is held to its limit of 2;
// the quiet tenant, arriving while the noisy one is saturated, still gets
// its own 2, because the total (6) is larger than one key's limit.
func ExampleRunInOrder_keyed() {
	tenants, _ := semaphore.NewKeyed[string]("tenants", semaphore.KeyedConfig{
		PerKey:             semaphore.Config{MaxConcurrentCalls: 2},
		MaxConcurrentCalls: 6,
	})
	var noisy, quiet bulkheadtest.Gate

	results, err := bulkheadtest.RunInOrder(context.Background(),
		bulkheadtest.Burst{Name: "noisy", Workers: 10, Limit: 2, Gate: &noisy, Bulkhead: tenants,
			Call: func(ctx context.Context) error { return tenants.Do(ctx, "noisy", noisy.Wait) }},
		bulkheadtest.Burst{Name: "quiet", Workers: 2, Limit: 2, Gate: &quiet, Bulkhead: tenants,
			Call: func(ctx context.Context) error { return tenants.Do(ctx, "quiet", quiet.Wait) }},
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
	// noisy: 2 accepted, 8 rejected, 0 other, peak 2 (limit 2, 10 workers)
	// quiet: 2 accepted, 0 rejected, 0 other, peak 2 (limit 2, 2 workers)
	// isolated: true
}
