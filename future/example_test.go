package future_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/bulkhead-go/bulkhead/future"
)

func ExamplePromise() {
	p := future.NewPromise[string](nil)
	go func() {
		// The work runs elsewhere and completes the promise once.
		p.Complete("hello", nil)
	}()
	v, err := p.Future().Wait(context.Background())
	fmt.Println(v, err)
	// Output: hello <nil>
}

func ExampleAll() {
	ctx := context.Background()
	var fs []*future.Future[int]
	for i := 1; i <= 3; i++ {
		p := future.NewPromise[int](nil)
		go p.Complete(i*i, nil)
		fs = append(fs, p.Future())
	}
	squares, err := future.All(ctx, fs...)
	fmt.Println(squares, err)
	// Output: [1 4 9] <nil>
}

func ExampleFirst() {
	ctx := context.Background()
	slow := future.NewPromise[string](nil) // never completes
	fast := future.NewPromise[string](nil)
	go fast.Complete("replica-2", nil)
	v, err := future.First(ctx, slow.Future(), fast.Future())
	fmt.Println(v, err)
	slow.Future().Cancel() // no longer wanted
	// Output: replica-2 <nil>
}

func ExampleThen() {
	p := future.NewPromise[string](nil)
	n := future.Then(p.Future(), strconv.Atoi)
	p.Complete("42", nil)
	fmt.Println(n.Wait(context.Background()))
	// Output: 42 <nil>
}

func ExampleFuture_Result() {
	p := future.NewPromise[int](nil)
	_, err := p.Future().Result()
	fmt.Println(errors.Is(err, future.ErrNotDone))
	p.Complete(7, nil)
	fmt.Println(p.Future().Result())
	// Output:
	// true
	// 7 <nil>
}

func ExampleFuture_Cancel() {
	p := future.NewPromise[int](nil) // no Canceler: Cancel fails it at once
	p.Future().Cancel()
	_, err := p.Future().Wait(context.Background())
	fmt.Println(err)
	// Output: context canceled
}

// All fails fast: the error names the failing future's index and wraps its
// error, the values that had succeeded are kept, and the futures still
// pending are cancelled.
func ExampleAll_failure() {
	boom := errors.New("lookup failed")
	pending := future.NewPromise[int](nil)
	fs := []*future.Future[int]{future.Completed(1, nil), pending.Future(), future.Completed(0, boom)}
	vals, err := future.All(context.Background(), fs...)
	var te *future.TaskError
	fmt.Println(vals, err)
	fmt.Println(errors.As(err, &te), te.Index, errors.Is(err, boom))
	_, err = pending.Future().Result()
	fmt.Println("the pending one:", err)
	// Output:
	// [1 0 0] future 2 failed: lookup failed
	// true 2 true
	// the pending one: context canceled
}

// Settle waits for every future and reports every value and error by index.
func ExampleSettle() {
	boom := errors.New("replica down")
	vals, errs := future.Settle(context.Background(),
		future.Completed("a", nil), future.Completed("", boom), future.Completed("c", nil))
	for i := range vals {
		fmt.Printf("%d: %q %v\n", i, vals[i], errs[i])
	}
	// Output:
	// 0: "a" <nil>
	// 1: "" replica down
	// 2: "c" <nil>
}
