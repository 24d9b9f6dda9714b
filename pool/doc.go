// Package pool provides a bulkhead that runs tasks on its own bounded set of
// worker goroutines, behind a bounded first-in, first-out queue, and returns
// a typed [future.Future] for each task.
//
// Use it when the caller has other work to do while the task runs (fan-out,
// work collected later); a caller that would only wait straight away is
// better served by the semaphore bulkhead (see docs/pool.md, "the join
// trap").
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
// [Submit] and [Bulkhead.TryGo] never block: a task starts on a free worker,
// waits in the queue, or is rejected at once with a [*bulkhead.FullError].
// [Go] and [Bulkhead.Go] wait for room instead, first in, first out, as
// errgroup's Go does. A [Group] runs a fail-fast fan-out as one call:
//
//	g := pool.NewGroup[int](ctx, lookups)
//	for _, sku := range skus {
//		g.Go(func(ctx context.Context) (int, error) { return stock(ctx, sku) })
//	}
//	counts, err := g.Wait() // in Go order; err names the first failure
//
// A queued task whose context ends or whose future is cancelled leaves the
// queue at once; one still queued after QueueTimeout fails with a
// FullError. A panic or runtime.Goexit in a task fails its future (a panic
// as a [*bulkhead.PanicError]). A task's context is a child of its
// submitter's: submit work that must outlive a request with
// context.WithoutCancel(r.Context()). Once the task is done (it returned,
// and its future completed and ran its callbacks), its context keeps its
// deadline, Done, Err and cause, but no longer carries the submitter's
// values (Value returns nil for them), so that a future held after its
// task does not keep the request's values alive: a goroutine of the task
// that outlives it must read the values it needs before the task returns.
//
// # The bound
//
// No task function of a Bulkhead starts while MaxWorkers or more of them
// execute, helped tasks (below) counted: while MaxWorkers is not lowered,
// at no moment do more than MaxWorkers execute. After Reconfigure lowers
// MaxWorkers, the tasks already running finish (nothing preempts them),
// and no task starts until fewer than the new MaxWorkers execute.
// Stats.InFlight may count more than MaxWorkers: tasks that run in the slot
// of a task blocked waiting for them, and the running tasks after such a
// lowering.
//
// # Waiting inside a task
//
// A task may submit to its own pool and wait, given its own context (or one
// derived from it, with a timeout too), without deadlocking the pool, even
// with one worker and a full queue:
//
//   - [future.Future.Wait] (on a [future.Then] future too), [future.All],
//     [future.Settle], [future.First], and the Go and Wait of a Group made
//     inside the task (to add to the Group the task belongs to, use TryGo:
//     see [Group.Go]): an awaited task still queued starts at once in the
//     waiting task's slot, on a worker of its own; the waiter is blocked
//     until it has finished, even if its context ends meanwhile, so the
//     bound holds. A gather starts its queued tasks one at a time, in
//     order, and none once it is decided.
//   - [Go] and [Bulkhead.Go] with the queue full run the task in the
//     caller's slot, as Java's CallerRunsPolicy does, and return its
//     completed future.
//
// Not safe, and able to deadlock a pool whose every worker does it: a wait
// on anything but the pool's futures (a channel, [future.Future.Done], a
// sync.WaitGroup, errgroup); a Group's Go from one of that Group's own
// tasks (at the group's limit it waits for one of them to end, maybe the
// caller); a wait or a Go with a context not derived from
// the task's own (context.Background(), another task's context captured
// from an enclosing function); a wait from a goroutine of the task while
// another of its goroutines lends the slot (it waits for the loan to end;
// lending from such a goroutine while the task runs on lets one task more
// than MaxWorkers execute).
//
// The workers are goroutines of an [github.com/panjf2000/ants/v2] pool the
// Bulkhead owns. Event subscribers and future callbacks follow the root
// package's "Callbacks": on a worker they run after the task's slot is
// freed and its future completed. Importing this package starts the two
// goroutines of ants' default pool (bulkheadtest.IgnoreAntsDefaultPool
// ignores them); a closed Bulkhead leaves no goroutine of its own.
package pool
