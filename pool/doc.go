// Package pool provides a bulkhead that runs tasks on its own bounded set of
// worker goroutines, behind a bounded first-in, first-out queue, and returns
// a typed [future.Future] for each task.
//
// Use it when the caller has other work to do while the task runs: fanning
// out lookups and collecting them with [future.All], firing work off and
// collecting it later. When the caller would only wait for the result
// straight away, use the semaphore bulkhead
// ([github.com/bulkhead-go/bulkhead/semaphore]) instead: Submit followed by
// an immediate Wait still holds the caller for the whole task, and adds a
// hand-off to another goroutine (see docs/pool.md, "the join trap").
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
// while fewer than MaxWorkers tasks run. That is load shedding. For fan-out
// where every task must run, [SubmitWait] (and [Bulkhead.GoWait]) waits for
// room instead, first in, first out, for as long as its context allows:
//
//	var fs []*future.Future[int]
//	for i := range 50 {
//		f, err := pool.SubmitWait(ctx, lookups, func(ctx context.Context) (int, error) { return lookup(ctx, i) })
//		if err != nil {
//			return nil, err
//		}
//		fs = append(fs, f)
//	}
//	return future.All(ctx, fs...) // in order; on a failure, its index, and the rest cancelled
//
// A queued task whose context ends or whose future is cancelled leaves the
// queue at once and never runs; one still queued after QueueTimeout is
// dropped with a FullError. A task that panics fails its future with a
// [*bulkhead.PanicError], one that calls runtime.Goexit fails it too, and
// its worker carries on. A task's context ends with its submitter's: work
// that must outlive a request (an email sent after the response) is
// submitted with context.WithoutCancel(r.Context()).
//
// # Waiting inside a task
//
// A task that submits to its own pool and waits for the results, with its
// own context (or one derived from it), cannot deadlock the pool:
// [future.Future.Wait] (also on a [future.Then] future of such a task),
// [future.All], [future.Settle] and [future.First], given the task's
// context, start an awaited task that is still queued in the same pool at
// once, ahead of the queue, in the waiting task's slot (the way Java's
// ForkJoinPool helps instead of blocking). The helped task runs on a worker
// of its own, exactly as any task does (its panic, runtime.Goexit and
// callbacks stay on that worker); it is permitted and finishes like any
// other, and counts in InFlight beside the task that waits for it. A task
// lends its slot to one task at a time: a gather of several queued tasks
// starts them one after the other.
//
// Helping assumes that the task's own goroutine waits, blocked, so that no
// more tasks execute at once than MaxWorkers. A Wait from another goroutine
// that the task started, given the task's context, helps too (Go cannot
// tell the goroutines apart), while the task itself may keep running: then
// one task more than MaxWorkers runs, for each task doing so, and the other
// waits from that task's goroutines wait for its slot and start their tasks
// in turn. A wait given a context not derived from the task's
// (context.Background(), a request's context) does not help, and can still
// deadlock a pool whose every worker waits that way. So can a helped task
// that waits with the context of the task that started it (a context
// captured from the enclosing function instead of its own): its waits
// count against the slot it was lent, which is busy with itself. Wait with
// the ctx your function was given.
//
// The workers are goroutines of an [github.com/panjf2000/ants/v2] pool that
// the Bulkhead owns; the queue and the accounting are the Bulkhead's own.
// When ants has no idle goroutine (its goroutines may still be busy with the
// callbacks of finished tasks), a task starts on a goroutine of the
// Bulkhead's own instead of waiting. [Bulkhead.Reconfigure] changes the
// limits without blocking, and [Bulkhead.Close] stops the Bulkhead and waits
// for its workers.
//
// Event subscribers and [future.Then] callbacks follow the module's callback
// contract (see the root package's "Callbacks"): on a worker they run after
// the task's slot has been freed and its future completed, and after the
// worker has handed any queued task it owed to another worker, so the pool
// is consistent whatever they do. Keep them quick. A panic in one is not
// recovered: on a worker it ends the program (ants' own recovery, which
// would log it and carry on, is turned off).
//
// Importing this package starts the two goroutines of ants' package-level
// default pool, which never exit. Tests that check for leaked goroutines
// with go.uber.org/goleak can ignore exactly those two with
// bulkheadtest.IgnoreAntsDefaultPool. A Bulkhead that was closed leaves no
// goroutine of its own.
package pool
