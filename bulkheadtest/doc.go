// Package bulkheadtest proves, in a test, that a service's bulkheads isolate
// its dependencies: that one dependency saturated by slow calls leaves the
// others their full capacity.
//
// The proof is a burst of concurrent calls. Each [Burst] is N workers calling
// one dependency through its bulkhead; all workers wait on one latch and are
// released together. Every outcome is classified as accepted (nil error),
// rejected (an error matching [bulkhead.ErrBulkheadFull] anywhere in its
// chain) or other. A [Gate] inside each stub dependency holds the accepted
// calls until every worker of every burst has settled (is held at its gate
// or has returned), so the accepted calls are all in progress at the same
// moment; the gate counts them, which gives the real peak of concurrent
// permitted calls, measured at the dependency rather than read from the
// bulkhead's own Stats. Nothing in the judgement depends on time.Sleep or on
// how fast the machine is: the numbers are the same on every run.
//
// Isolation holds when every burst got exactly min(Workers, Limit) calls
// through, at the same time, and no other errors: [Check] says so, and
// [AssertIsolated] runs the bursts and fails a test otherwise.
//
// A typical test, with payment and inventory behind their own bulkheads:
//
//	pay, stock := new(bulkheadtest.Gate), new(bulkheadtest.Gate)
//	mux := http.NewServeMux()
//	mux.Handle("/pay", pay.Handler(reply("paid")))
//	mux.Handle("/stock", stock.Handler(reply("ok")))
//	srv := httptest.NewServer(mux)
//	defer srv.Close()
//
//	bulkheadtest.AssertIsolated(t,
//		bulkheadtest.Burst{Name: "payment", Workers: 6, Limit: 2, Gate: pay,
//			Call: func(ctx context.Context) error { return get(ctx, paymentClient, srv.URL+"/pay") }},
//		bulkheadtest.Burst{Name: "inventory", Workers: 8, Limit: 8, Gate: stock,
//			Call: func(ctx context.Context) error { return get(ctx, inventoryClient, srv.URL+"/stock") }},
//	)
//
// The package judges by the root package's error vocabulary, so it proves
// semaphore and pool bulkheads alike, and anything else that rejects with
// [bulkhead.ErrBulkheadFull]. A pool must have no queue (QueueCapacity 0)
// for the proof: a queued task never reaches the gate while the others hold
// the workers, so the burst could never settle. Set [Burst].Bulkhead and
// Run refuses such a pool at once; otherwise the run stops at its time
// limit (a minute for AssertIsolated, yours with [AssertIsolatedWithin]) and
// says where calls may be stuck.
//
// Per-key isolation (a [github.com/bulkhead-go/bulkhead/semaphore.Keyed]
// bulkhead) is proved the same way, with one burst per key through the one
// keyed bulkhead and Limit set to the key's limit: a noisy key saturated,
// and another key, arriving after it with [RunInOrder], still gets its full
// limit (see ExampleRunInOrder_keyed). Size the total above the sum of the
// bursts' limits, or the total refuses the later key and the proof fails,
// as it should.
//
// Tests that import the pool package and check for leaked goroutines with
// go.uber.org/goleak can ignore exactly the two goroutines ants starts when
// it is initialised with [IgnoreAntsDefaultPool].
package bulkheadtest
