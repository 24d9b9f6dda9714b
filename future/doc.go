// Package future provides Future, the typed result of work that runs on
// another goroutine, and Promise, the side that completes it.
//
// The pool bulkhead ([github.com/bulkhead-go/bulkhead/pool]) returns a
// *Future[T] for every task it accepts: start several tasks, then collect
// them with [All] (every result, in order), [Settle] (every value and
// error) or [First], or chain a step with [Then]. A caller that would only
// wait straight away is better served by a semaphore bulkhead.
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
// A Future completes exactly once; any number of goroutines may wait on it.
// [Future.Wait]'s context bounds the wait only: [Future.Cancel] stops the
// work. Waiting allocates nothing but the Done channel a pending future
// makes once, when it is waited on with a context that can end. [All] fails
// fast: on the first failure it returns a [*TaskError] with the failing
// index and cancels the futures still pending. Any code can make futures
// with [NewPromise].
//
// [Future.OnComplete] and [Then] functions are callbacks, under the
// module's callback contract (see the root package's "Callbacks"): they run
// on the goroutine that completes the future, after its waiters have been
// released, in the order they were registered; a panic in one is not
// recovered. For a pool task that goroutine is the worker: keep them quick.
// A completed future keeps its value and error, and drops the work that
// made it (a pool task's function, context and bulkhead; a Then stage's
// function).
package future
