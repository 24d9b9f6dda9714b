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
// [All] gathers in order and fails fast: on the first failure it returns a
// [*TaskError] with the failing future's index (it unwraps to that future's
// error, and is told apart from the caller's own context ending, which All
// returns as is), keeps the values that succeeded, and cancels the futures
// still pending. [Settle] waits for every future and returns every value
// and error by index.
//
// [Future.OnComplete] and [Then] functions are callbacks, under the
// module's callback contract (see the root package's "Callbacks"): they run
// on the goroutine that completes the future, after its waiters have been
// released, in the order they were registered, and a panic in one is not
// recovered (a Then stage's own future fails first, saying so; the
// callbacks after it miss the completion). Completing a chain of Then
// stages takes constant stack however long it is. For a pool task that
// goroutine is the worker, so a callback must be quick. [All], [First] and
// [Settle] start no goroutine: they hook the pending futures
// while they wait and take the hooks off before they return.
//
// A completed future keeps its value and error, and drops the work that
// made it (a pool task's function, context and bulkhead; a Then stage's
// function), however long it is held.
package future
