// Package reliability holds no library code: its tests are the project's
// evidence that a bulkhead never loses a permit, a queue slot, a task or a
// goroutine.
//
// The suites, all run under the race detector with goleak checking every
// test:
//
//   - soak: many goroutines drive a deterministic (seeded) mix of quick and
//     slow calls that return, fail, panic, call runtime.Goexit, are
//     cancelled or time out while waiting or queued, and cancel their
//     futures, while another goroutine resizes the limits; the invariants
//     are checked during and after every run. A short run is part of the
//     default `go test`; BULKHEAD_SOAK=5m makes it a long one.
//   - fuzz: state-machine fuzzers that decode bytes into operations and
//     compare the bulkhead with a simple model after every step.
//   - faults: HTTP dependencies that hang, reset the connection, fail or
//     stream slowly, through bulkheadhttp.Transport.
//   - memory: bursts of callers that must leave heap and goroutine count at
//     their baseline.
//   - misuse: the documented answer to Release without Acquire, nil
//     functions and contexts, Submit after Close, Close twice.
//   - exposure: the registry's status handler and metrics show names and
//     numbers only, and absurd configuration values are refused.
//
// docs/reliability.md describes what was tried, how much, what held, and
// the commands that reproduce it.
package reliability
