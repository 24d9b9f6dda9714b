// Package adaptive moves a bulkhead's limit to what the dependency behind it
// can take, from what the bulkhead observes of finished calls.
//
// A static limit is a guess made on a good day: too low and it rejects calls
// the dependency could serve, too high and a slow dependency queues them
// until callers time out. [Attach] starts a [Controller] on a semaphore or
// pool bulkhead: it subscribes to the bulkhead's events, aggregates the run
// times and outcomes of finished calls over short windows, and at the end of
// each window lets an [Algorithm] choose the next limit between MinLimit and
// MaxLimit, which it applies with the bulkhead's Reconfigure when the
// whole-number limit changes (the bulkhead then publishes
// bulkhead.EventLimitChanged).
//
// Three algorithms are built in, chosen by [Config].Algorithm:
//
//   - "vegas" (the default) estimates the dependency's latency without load
//     and, from it, how many calls wait in its queue; it keeps that queue
//     short. Use it when latency is the dependency's first sign of overload.
//   - "gradient2" compares each window's latency with a long-term average
//     and shrinks the limit as latency rises against it. It needs no
//     no-load estimate but drifts with the average under long overloads.
//   - "aimd" grows the limit by one per window and cuts it by a factor when
//     the dependency pushes back. Use it when the dependency says so (HTTP
//     429 or 503, gRPC ResourceExhausted or Unavailable) before it slows
//     down.
//
// A call counts as a drop, the strongest signal to shrink, when its error
// matches bulkhead.ErrOverloaded (which bulkheadhttp's transport and the gRPC
// interceptors return for the dependency's pushback); every algorithm shrinks
// the limit after a window with a drop, or with more than 1% of its calls
// ended by context.DeadlineExceeded. Other errors are ignored: a fast failure
// says nothing about capacity.
//
// A controller with [Config].Shadow is a dry run: it decides as it would in
// charge and publishes its limit in [State], but never sets it.
//
// With no controller attached a bulkhead does nothing more. With one, the
// bulkhead publishes events (reading the clock for each call), and the
// controller adds a few atomic operations per call, with no lock and no
// allocation; the algorithm runs once per window.
//
// docs/adaptive.md compares the algorithms on a simulated dependency
// (go run ./examples/adaptive).
package adaptive
