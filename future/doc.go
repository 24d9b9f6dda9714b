// Package future provides Future, the typed result of work that runs on
// another goroutine, and Promise, the side that completes it.
//
// The pool bulkhead ([github.com/bulkhead-go/bulkhead/pool]) returns a
// *Future[T] for every task it accepts. Use futures when the caller has
// something else to do while the work runs: start several tasks, then
// collect them with [All] (every result, in order) or [First] (whichever
// completes first), or chain a step with [Then]. A caller that would only
// wait straight away is better served by running the call itself under a
// semaphore bulkhead.
//
//	f, err := pool.Submit(ctx, lookups, func(ctx context.Context) (Price, error) {
//		return fetchPrice(ctx, sku)
//	})
//	if err != nil {
//		return err // bulkhead.ErrBulkheadFull: the dependency's budget is spent
//	}
//	// ... other work ...
//	price, err := f.Wait(ctx)
//
// A Future completes exactly once, with a value or an error; any number of
// goroutines may wait on it, and waiting allocates nothing. [Future.Wait]
// takes a context that bounds the wait only: to stop the work itself, call
// [Future.Cancel]. [Future.Result] looks at a completed result without
// blocking, and [Completed] makes a future that is complete from the start.
//
// Any code can make futures: [NewPromise] returns a [Promise], whose
// Complete settles its Future, and an optional [Canceler] that
// [Future.Cancel] asks to stop the work.
package future
