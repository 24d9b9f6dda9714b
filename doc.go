// Package bulkhead holds the vocabulary shared by this module's two kinds of
// bulkhead: the errors a rejected call sees, the statistics snapshot, and the
// events a bulkhead publishes.
//
// A bulkhead limits how many calls to one dependency may be in progress at
// once, so that a slow dependency cannot use up the capacity that the others
// need. Give every outbound dependency its own bulkhead.
//
// The bulkheads themselves live in subpackages:
//
//   - [github.com/bulkhead-go/bulkhead/semaphore] guards a call on the caller's
//     own goroutine: it gets a permit, or is rejected at once (or after a
//     bounded wait). Use it for a blocking call whose result you need now.
//   - [github.com/bulkhead-go/bulkhead/pool] runs tasks on a bounded set of
//     worker goroutines behind a bounded FIFO queue and returns a typed
//     future. Use it for fan-out and for work the caller need not wait for.
//
// Both reject for lack of capacity with an error that matches
// [ErrBulkheadFull] under [errors.Is]; the concrete error is a [*FullError]
// naming the bulkhead and its limits. Both report a [Stats] snapshot with the
// same fields and meanings, and both publish [Event] values to subscribers.
//
// # Callbacks
//
// Every function this module calls back (a bulkhead's or a registry's event
// subscriber, a function given to a future's OnComplete or Then) follows one
// contract:
//
//   - It runs synchronously on the goroutine whose action it reports (the
//     caller of Do, a pool worker, the goroutine that completed a future),
//     in the order the callbacks were registered (one added to a future
//     while its earlier ones still run, even by one of them, runs after
//     them on that goroutine), with no lock of this module held: it may
//     call back into the bulkhead (Stats, Reconfigure).
//   - It must be quick and must not wait for the bulkhead that calls it: the
//     call it reports waits for it.
//   - If it panics or calls runtime.Goexit, the module's own state (permits,
//     queue slots, workers, counters, futures) is already consistent: nothing
//     is lost. The panic is not recovered or hidden by this module; it goes
//     on up that goroutine like a panic in your own code, and the callbacks
//     after it in line miss that one event.
package bulkhead
