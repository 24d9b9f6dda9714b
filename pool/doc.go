// Package pool provides a bulkhead that runs tasks on its own bounded set of
// worker goroutines, behind a bounded first-in, first-out queue, and returns
// a typed [future.Future] for each task.
//
// Use it when the caller has other work to do while the task runs (fan-out
// gathered with [future.All], work collected later). A caller that would
// only wait straight away is better served by the semaphore bulkhead
// ([github.com/bulkhead-go/bulkhead/semaphore]): see docs/pool.md, "the
// join trap".
//
//	lookups, err := pool.New("inventory", pool.Config{MaxWorkers: 8, QueueCapacity: 32})
//	...
//	defer lookups.Close(ctx)
//	f, err := pool.Submit(ctx, lookups, func(ctx context.Context) (int, error) {
//		return stock(ctx, sku)
//	})
//	if errors.Is(err, bulkhead.ErrBulkheadFull) {
//		// every worker busy and the queue full: degrade now, not later
//	}
//	n, err := f.Wait(ctx)
//
// Submit never blocks. A task starts at once on a free worker, waits in the
// queue if every worker is busy, or is rejected at once with a
// [*bulkhead.FullError] when the queue is full too; the pool never rejects
// while a slot is free. That is load shedding. For fan-out where every
// task must run, [Go] (and [Bulkhead.Go]) waits for room instead, first in,
// first out, for as long as its context allows, as errgroup's Go does;
// [Bulkhead.TryGo] is Submit for a function that returns only an error:
//
//	var fs []*future.Future[int]
//	for i := range 50 {
//		f, err := pool.Go(ctx, lookups, func(ctx context.Context) (int, error) { return lookup(ctx, i) })
//		if err != nil {
//			return nil, err
//		}
//		fs = append(fs, f)
//	}
//	return future.All(ctx, fs...) // in order; on a failure, its index, and the rest cancelled
//
// A queued task whose context ends or whose future is cancelled leaves the
// queue at once; one still queued after QueueTimeout is dropped with a
// FullError. A panic in a task fails its future with a
// [*bulkhead.PanicError], a runtime.Goexit fails it too, and the worker
// carries on. A task's context is a child of its submitter's
// (context.WithCancelCause): work that must outlive a request is submitted
// with context.WithoutCancel(r.Context()).
//
// # The bound
//
// At no moment do more than MaxWorkers task functions of a Bulkhead
// execute. Stats.InFlight may count more: the tasks that run in the slot of
// a task blocked waiting for them (below), and the running tasks after
// Reconfigure lowered MaxWorkers.
//
// # Waiting inside a task
//
// A task may submit to its own pool and wait for the results, given its own
// context (or one derived from it, context.WithTimeout included): these
// never deadlock the pool, even with one worker and a full queue:
//
//   - [future.Future.Wait] (also on a [future.Then] future of such a task),
//     [future.All], [future.Settle] and [future.First]: an awaited task
//     still queued in the same pool starts at once, ahead of the queue, in
//     the waiting task's slot (the waiter lends it, as Java's ForkJoinPool
//     helps instead of blocking), on a worker of its own (its panic,
//     runtime.Goexit and callbacks stay there). The waiter is blocked
//     until that task has finished, even if the wait's context ends
//     meanwhile: it takes its slot back before it returns, so the bound
//     holds. A gather starts its queued tasks one after the other, in
//     argument order, and none once it is decided.
//   - [Go] and [Bulkhead.Go]: when the queue is full, the task runs at once
//     in the caller's slot, as Java's CallerRunsPolicy does, and the call
//     returns its completed future once it has finished. ([Submit] and
//     [Bulkhead.TryGo] never wait: they return the FullError.)
//
// What is not safe, and can deadlock a pool whose every worker does it:
//
//   - a wait on anything but the pool's futures, or on the channel of
//     [future.Future.Done]: a plain channel, a sync.WaitGroup, a Promise
//     of your own, errgroup.Wait;
//   - a wait, or a Go, given a context not derived from the task's own:
//     context.Background(), a request's context, or the context of the
//     task that submitted this one, captured from the enclosing function
//     (wait with the ctx your function was given);
//   - a wait from a goroutine the task started while another goroutine of
//     the task already lends its slot: it waits for the loan to end. And a
//     wait from such a goroutine that lends the slot while the task itself
//     runs on lets one task more than MaxWorkers execute (Go cannot tell a
//     task's goroutines apart): wait from the task's own goroutine.
//
// The workers are goroutines of an [github.com/panjf2000/ants/v2] pool that
// the Bulkhead owns; the queue and the accounting are the Bulkhead's own.
// [Bulkhead.Reconfigure] changes the limits without blocking, and
// [Bulkhead.Close] stops the Bulkhead and waits for its workers.
//
// Event subscribers and [future.Then] callbacks follow the root package's
// "Callbacks": on a worker they run after the task's slot has been freed and
// its future completed; the queued task the worker runs next waits for them
// (or goes to another worker if one ends the goroutine). A panic in one ends
// the program. Importing this package starts the two goroutines of ants'
// default pool (bulkheadtest.IgnoreAntsDefaultPool ignores them); a closed
// Bulkhead leaves no goroutine of its own.
package pool
