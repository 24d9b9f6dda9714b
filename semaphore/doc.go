// Package semaphore provides a bulkhead that limits how many calls to one
// dependency run at once, on the callers' own goroutines.
//
// Use it for a blocking call whose result the caller needs now: an HTTP
// request, a database query, an RPC. Give every dependency its own
// [Bulkhead], so that a slow payment gateway fills only the payment
// bulkhead and the inventory calls keep their permits.
//
//	payment, err := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 2})
//	...
//	err = payment.Do(ctx, func(ctx context.Context) error {
//		return charge(ctx, order)
//	})
//	if errors.Is(err, bulkhead.ErrBulkheadFull) {
//		// the payment dependency is saturated: fail fast, degrade, retry later
//	}
//
// A call that finds every permit in use is rejected at once with a
// [*bulkhead.FullError], or, when MaxWaitDuration is positive, waits that
// long in a first-in, first-out line. A waiting caller whose context ends
// gets ctx.Err(), never a rejection, so timeouts and saturation stay apart.
//
// Under a real overload, the Config can make the line shed load well
// (docs/shedding.md compares them): MaxWaitingCalls caps the waiters,
// MinDeadlineSlack refuses a caller whose deadline the wait would use up,
// QueueOrder serves the newest waiter first (LIFO, or AdaptiveLIFO once the
// line grows), and CoDel refuses waiters of a line that stays above its
// target wait. Each refusal's [bulkhead.FullError] says why in its Reason,
// and [bulkhead.Stats] counts the refusals by reason. These rules cost
// nothing until a caller has found every permit taken.
//
// Package [github.com/bulkhead-go/bulkhead/bulkheadhttp] puts a bulkhead in
// front of an http.Client (holding the permit until the response body is
// closed) or an http.Handler.
//
// [Keyed] limits the calls of each key (a tenant, a customer) under an
// optional shared total, so that one noisy key cannot take the capacity the
// others need; see docs/keyed.md.
//
// The bulkhead starts no goroutines. Its fast path (a permit granted or
// refused) takes no lock, reads no clock and allocates nothing while nobody
// is subscribed to its events. A caller that joins a line of waiters has
// no timer of its own: one timer per line, armed for the earliest deadline,
// serves the whole line (the caller that starts a line makes it). It makes
// two small allocations, or none in a steady line, where it takes over the
// place of a caller that has left. Choose the pool bulkhead in package
// [github.com/bulkhead-go/bulkhead/pool] instead when the caller has other
// work to do while the call runs.
//
// In tests with [testing/synctest], a Bulkhead may serve several bubbles one
// after another, but not goroutines of two bubbles (or of a bubble and
// outside it) at the same time: a line's timer and its waiters' channels
// belong to the bubble that made them, and touching them from outside is a
// fatal error.
package semaphore
