// Package bulkheadhttp puts a semaphore bulkhead on both sides of net/http:
// [Transport] guards the requests an http.Client sends to one dependency,
// and [Handler] guards the requests a server accepts on one route.
//
//	payment, err := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 2})
//	...
//	client := &http.Client{Transport: bulkheadhttp.Transport(payment, nil)}
//
//	checkout, err := semaphore.New("checkout", semaphore.Config{MaxConcurrentCalls: 64})
//	...
//	mux.Handle("/checkout/pay", bulkheadhttp.Handler(checkout, payHandler))
//
// Both count the outcome of every call in the bulkhead's Stats, metrics and
// events. By default [Classify] decides it: a transport error or a response
// with a 5xx status counts as failed, and the call's EventFinished carries
// the error (a [*StatusError] naming the status). [WithClassifier] replaces
// that rule.
//
// The Transport holds a permit until the response body is closed or read to
// the end, because the dependency is busy until then. The Handler holds one
// until the wrapped handler returns, and refuses a request that cannot have
// one with 503 Service Unavailable and a Retry-After header (see
// [WithStatus], [WithRetryAfter], [WithRejectHandler], [WithBypass]).
//
// The package uses only the standard library.
package bulkheadhttp
