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
// while fewer than MaxWorkers tasks run. A queued task whose context ends or
// whose future is cancelled leaves the queue at once and never runs; one
// still queued after QueueTimeout is dropped with a FullError. A task
// that panics fails its future with a [*bulkhead.PanicError] and its worker
// carries on.
//
// The workers are goroutines of an [github.com/panjf2000/ants/v2] pool that
// the Bulkhead owns; the queue and the accounting are the Bulkhead's own.
// When ants has no idle goroutine (its goroutines may still be busy with the
// callbacks of finished tasks), a task starts on a goroutine of the
// Bulkhead's own instead of waiting. [Bulkhead.Reconfigure] changes the
// limits without blocking, and [Bulkhead.Close] stops the Bulkhead and waits
// for its goroutines to exit.
//
// Event subscribers and [future.Then] callbacks of a task run on its worker
// after the task's slot has been freed and before the worker takes the next
// queued task: keep them quick and non-blocking.
//
// Tests that check for leaked goroutines with go.uber.org/goleak should
// ignore the two goroutines ants starts for its package-level default pool
// when it is imported: goleak.IgnoreCurrent() in TestMain, or
// goleak.IgnoreTopFunction for
// "github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers" and
// "github.com/panjf2000/ants/v2.(*poolCommon).ticktock". A Bulkhead that
// was closed leaves none of its own.
package pool
