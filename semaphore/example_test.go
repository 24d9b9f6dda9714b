package semaphore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

func ExampleBulkhead_Do() {
	payment, err := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 1})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	err = payment.Do(ctx, func(ctx context.Context) error {
		// While this call holds the only permit, another is rejected at once.
		err := payment.Do(ctx, func(context.Context) error { return nil })
		fmt.Println("nested call rejected:", errors.Is(err, bulkhead.ErrBulkheadFull))
		fmt.Println(err)
		return nil
	})
	fmt.Println("outer call:", err)
	// Output:
	// nested call rejected: true
	// bulkhead "payment" (semaphore) is full (maxConcurrentCalls 1)
	// outer call: <nil>
}

func ExampleExecute() {
	inventory, _ := semaphore.New("inventory", semaphore.DefaultConfig())
	stock, err := semaphore.Execute(context.Background(), inventory, func(ctx context.Context) (int, error) {
		return 42, nil // call the inventory service here
	})
	fmt.Println(stock, err)
	// Output: 42 <nil>
}

func ExampleBulkhead_TryAcquire() {
	b, _ := semaphore.New("reports", semaphore.Config{MaxConcurrentCalls: 2})
	fmt.Println(b.TryAcquire(), b.TryAcquire(), b.TryAcquire())
	b.Release()
	b.Release()
	s := b.Stats()
	fmt.Println("permitted", s.Permitted, "rejected", s.Rejected, "available", s.AvailableConcurrentCalls)
	// Output:
	// true true false
	// permitted 2 rejected 1 available 2
}
