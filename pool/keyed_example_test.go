package pool_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// A keyed pool shares 4 workers and a queue of 8 between tenants: each
// tenant's exports run one at a time, in submission order
// (MaxRunningPerKey: 1), and no tenant may queue more than 3, so one
// tenant's burst leaves room for the others.
func ExampleNewKeyed() {
	ctx := context.Background()
	exports, err := pool.NewKeyed[string]("exports", pool.KeyedConfig{
		Config:              pool.Config{MaxWorkers: 4, QueueCapacity: 8},
		MaxRunningPerKey:    1,
		QueueCapacityPerKey: 3,
	})
	if err != nil {
		panic(err)
	}
	defer exports.Close(ctx)

	var mu sync.Mutex
	done := map[string][]int{} // each tenant's exports, in the order they ran
	var fs []*future.Future[int]
	for i := range 4 {
		for _, tenant := range []string{"acme", "globex"} {
			f, err := pool.SubmitKeyed(ctx, exports, tenant, func(ctx context.Context) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				done[tenant] = append(done[tenant], i)
				return i, nil
			})
			var fe *bulkhead.FullError
			if errors.As(err, &fe) {
				fmt.Println(tenant, i, "refused:", fe.Reason) // only if its lane is full
				continue
			}
			fs = append(fs, f)
		}
	}
	if _, err := future.All(ctx, fs...); err != nil {
		panic(err)
	}
	fmt.Println(done["acme"], done["globex"])
	// Output: [0 1 2 3] [0 1 2 3]
}
