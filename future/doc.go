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
// goroutines may wait on it. Waiting allocates nothing, except that a
// pending future makes its Done channel once, the first time it is waited on
// with a context that can end (or [Future.Done] is called). [Future.Wait]
// takes a context that bounds the wait only: to stop the work itself, call
// [Future.Cancel]. [Future.Result] looks at a completed result without
// blocking, and [Completed] makes a future that is complete from the start.
//
// Any code can make futures: [NewPromise] returns a [Promise], whose
// Complete settles its Future, and an optional [Canceler] that
// [Future.Cancel] asks to stop the work.
//
// Callbacks run on the goroutine that completes the future, after its
// waiters have been released: those of [Then] in the order Then was called,
// each one even if an earlier one panicked or called runtime.Goexit. For a
// pool task that goroutine is the worker, after the task's slot has been
// freed, so a callback must be quick and must not block. [All] and [First]
// start no goroutine: they hook the pending futures while they wait and take
// the hooks off before they return.
package future
