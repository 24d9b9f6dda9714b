package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// A caller whose deadline the wait would use up is refused at once, with a
// reason, instead of waiting for a permit it could not use.
func ExampleConfig_shedding() {
	reports, err := semaphore.New("reports", semaphore.Config{
		MaxConcurrentCalls: 1,
		MaxWaitDuration:    5 * time.Second,
		MinDeadlineSlack:   2 * time.Second, // a report takes 2s
		MaxWaitingCalls:    10,
	})
	if err != nil {
		panic(err)
	}
	reports.TryAcquire() // the only permit is taken
	defer reports.Release()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second) // 1s left: too little
	defer cancel()
	err = reports.Do(ctx, func(context.Context) error { return nil })
	if fe, ok := errors.AsType[*bulkhead.FullError](err); ok {
		fmt.Println("refused:", fe.Reason, "waited:", fe.Waited)
	}
	fmt.Println("by reason:", reports.Stats().RejectedBy[bulkhead.ReasonDeadline])
	// Output:
	// refused: deadline waited: false
	// by reason: 1
}
