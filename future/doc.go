// Package future provides Future, the typed result of work that runs on
// another goroutine, and Promise, the side that completes it.
//
// The pool bulkhead ([github.com/bulkhead-go/bulkhead/pool]) returns a
// *Future[T] for every task it accepts: collect several with [All] (every
// result, in order), [Settle] (every value and error) or [First], or chain
// a step with [Then].
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
// work. [All] fails fast with a [*TaskError] naming the failing index, and
// cancels the futures still pending. [Future.OnComplete] and [Then]
// functions are callbacks (the root package's "Callbacks"): they run on
// the goroutine that completes the future, after its waiters are released,
// in the order they were registered. A completed future keeps its value and
// error and drops the work that made it.
package future
