package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/bulkhead-go/bulkhead/bulkheadhttp"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// Scenario 3's numbers.
const (
	handlerSlots = 4 // requests the checkout server serves at once, like a servlet container's threads
	payRequests  = 8 // GET /checkout/pay sent at once
	stockChecks  = 4 // GET /checkout/stock sent one by one while payment is stalled
)

// outageRun is what one variant of scenario 3 measured.
type outageRun struct {
	// stockAnswered and stockStuck count the stock checks that were answered
	// while payment was stalled, and those stuck waiting for a handler slot
	// that no one could free.
	stockAnswered, stockStuck int
	// paid, refused and failed count the payment requests: answered, refused
	// with 503 by the payment bulkhead, anything else.
	paid, refused, failed int
	// retryAfter is the Retry-After header of a refusal.
	retryAfter string
	// slowestPaid is how long the slowest paid request took.
	slowestPaid time.Duration
}

// outage is what scenario 3 measured, without bulkheads, with bulkheads on
// the checkout's clients, and with a bulkhead on its /checkout/pay route.
type outage struct{ without, with, admission outageRun }

// How scenario 3's checkout server guards itself.
const (
	unguarded    = iota
	guardClients // a bulkhead on each dependency's http.Client
	guardRoute   // a bulkhead on the /checkout/pay route (bulkheadhttp.Handler)
)

// runOutage is scenario 3, the Go form of the original outage: a checkout
// server whose handler capacity is bounded is flooded with payment requests
// while the payment gateway is slow, and stock checks are measured.
func runOutage(ctx context.Context, w io.Writer, o options) (outage, error) {
	var r outage
	variants := []struct {
		name  string
		guard int
		run   *outageRun
		err   error
	}{
		{"without bulkheads", unguarded, &r.without, nil},
		{"with bulkheads", guardClients, &r.with, nil},
		{"Handler on /pay", guardRoute, &r.admission, nil},
	}
	var wg sync.WaitGroup
	for i := range variants {
		v := &variants[i]
		wg.Go(func() { *v.run, v.err = outageVariant(ctx, o, v.guard) })
	}
	wg.Wait()
	for _, v := range variants {
		if v.err != nil {
			return r, fmt.Errorf("%s: %w", v.name, v.err)
		}
	}

	fmt.Fprintf(w, "3. Outage: a checkout server with %d handler slots gets %d GET /checkout/pay at once,\n", handlerSlots, payRequests)
	fmt.Fprintf(w, "   then %d GET /checkout/stock one by one while the payment gateway is stalled.\n", stockChecks)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "   \tstock answered\tpayment paid\trefused (503)\tslowest paid\n")
	for _, v := range variants {
		fmt.Fprintf(tw, "   %s\t%d of %d\t%d\t%d\t%.1fs\n", v.name, v.run.stockAnswered, stockChecks,
			v.run.paid, v.run.refused, v.run.slowestPaid.Seconds())
	}
	tw.Flush()
	fmt.Fprintf(w, "   Without bulkheads the payment calls hold every handler slot and the stock checks queue\n"+
		"   behind them; with them, payment keeps %d slots busy and refuses the rest at once.\n", r.with.paid)
	fmt.Fprintf(w, "   With bulkheadhttp.Handler on /checkout/pay (the payment limit, %d), the server refuses\n"+
		"   the extra payment requests at the door, before they take a handler slot: %d answered\n"+
		"   503 Service Unavailable with Retry-After: %s.\n", r.admission.paid, r.admission.refused, r.admission.retryAfter)
	return r, nil
}

// outageVariant runs scenario 3 once, guarded as guard says.
func outageVariant(ctx context.Context, o options, guard int) (outageRun, error) {
	wake := make(chan struct{}, 1)
	st := &stall{release: make(chan struct{}), wake: wake}
	d := startDeps(o.PayDelay, st)
	defer d.close()
	var r outageRun
	payClient, closePay := newClient(nil)
	invClient, closeInv := newClient(nil)
	var payRoute *semaphore.Bulkhead
	if guard != unguarded {
		payment, inventory, done, err := newBulkheads(nil)
		if err != nil {
			return outageRun{}, err
		}
		defer done()
		if guard == guardClients {
			payClient, closePay = newClient(payment)
			invClient, closeInv = newClient(inventory)
		} else {
			payRoute = payment
		}
	}
	defer closePay()
	defer closeInv()
	srv := newCheckout(d.url, payClient, invClient, wake)
	var h http.Handler = srv
	if payRoute != nil {
		// Server-side admission: /checkout/pay gets at most the payment
		// limit of requests in progress; the others are refused with 503
		// and Retry-After before they reach the checkout's handler slots.
		mux := http.NewServeMux()
		mux.Handle("/checkout/pay", bulkheadhttp.Handler(payRoute, srv))
		mux.Handle("/", srv)
		h = mux
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	user, closeUser := newClient(nil)
	defer closeUser()

	// Flood /checkout/pay.
	var (
		mu      sync.Mutex
		payDone atomic.Int32
		flood   sync.WaitGroup
	)
	for range payRequests {
		flood.Go(func() {
			start := time.Now()
			err := get(ctx, user, ts.URL+"/checkout/pay", "paid")
			mu.Lock()
			switch {
			case err == nil:
				r.paid++
				r.slowestPaid = max(r.slowestPaid, time.Since(start))
			case isRefused(err):
				r.refused++
				r.retryAfter = err.(*statusError).retryAfter
			default:
				r.failed++
			}
			mu.Unlock()
			payDone.Add(1)
			notify(wake)
		})
	}
	defer func() { st.end(); flood.Wait() }() // on every path, before ts.Close

	// Wait until the flood has settled: every payment request is answered,
	// held in the stalled gateway, or waiting for a handler slot. The counts
	// are read against the order a request moves through them, so none is
	// counted twice.
	settled := func() bool {
		n := payDone.Load()
		n += st.inside.Load()
		n += srv.waiting[routePay].Load()
		return n == payRequests
	}
	// Until flood.Wait, the flood goroutines write r's payment counts: the
	// error paths below return nothing of r.
	if err := waitUntil(ctx, wake, settled); err != nil {
		return outageRun{}, err
	}

	for range stockChecks {
		answered, err := srv.checkStock(ctx, user, ts.URL)
		if err != nil {
			return outageRun{}, err
		}
		if answered {
			r.stockAnswered++
		} else {
			r.stockStuck++
		}
	}
	st.end()
	flood.Wait()
	mu.Lock()
	defer mu.Unlock()
	if r.failed > 0 {
		return r, fmt.Errorf("%d payment requests failed unexpectedly", r.failed)
	}
	return r, nil
}

// stall holds the payment gateway's calls while the stock checks are
// measured, so that what the checks see does not depend on timing.
type stall struct {
	release chan struct{}
	once    sync.Once
	wake    chan struct{}
	inside  atomic.Int32 // calls held now
}

func (s *stall) hold(ctx context.Context) error {
	s.inside.Add(1)
	notify(s.wake)
	defer func() { s.inside.Add(-1); notify(s.wake) }()
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *stall) end() { s.once.Do(func() { close(s.release) }) }

// Routes of the checkout server.
const (
	routePay = iota
	routeStock
)

// checkout is the checkout service: GET /checkout/pay calls the payment
// gateway and GET /checkout/stock the inventory service. It serves at most
// handlerSlots requests at once; the others wait in line for a slot, as
// requests wait for a servlet container's threads.
type checkout struct {
	deps               string
	payment, inventory *http.Client
	slots              chan struct{}
	busy               atomic.Int32    // slots in use
	waiting            [2]atomic.Int32 // requests waiting for a slot, by route
	wake               chan struct{}
}

func newCheckout(deps string, payment, inventory *http.Client, wake chan struct{}) *checkout {
	return &checkout{deps: deps, payment: payment, inventory: inventory,
		slots: make(chan struct{}, handlerSlots), wake: wake}
}

func (c *checkout) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route := routePay
	switch r.URL.Path {
	case "/checkout/pay":
	case "/checkout/stock":
		route = routeStock
	default:
		http.NotFound(w, r)
		return
	}
	c.waiting[route].Add(1)
	notify(c.wake)
	select {
	case c.slots <- struct{}{}:
		c.busy.Add(1)
		c.waiting[route].Add(-1)
		notify(c.wake)
	case <-r.Context().Done():
		c.waiting[route].Add(-1)
		notify(c.wake)
		return
	}
	defer func() {
		c.busy.Add(-1)
		<-c.slots
		notify(c.wake)
	}()
	if route == routePay {
		respond(w, "payment", "paid", get(r.Context(), c.payment, c.deps+"/pay", "paid"))
	} else {
		respond(w, "inventory", "ok", get(r.Context(), c.inventory, c.deps+"/stock", "ok"))
	}
}

// checkStock sends one stock check and reports whether it was answered. A
// check waiting for a slot while every slot is busy with a stalled payment
// call is stuck: nothing can free a slot until the stall ends, so it is
// counted as such and cancelled.
func (c *checkout) checkStock(ctx context.Context, user *http.Client, url string) (answered bool, err error) {
	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- get(reqCtx, user, url+"/checkout/stock", "ok") }()
	for {
		if c.waiting[routeStock].Load() == 1 && c.busy.Load() == handlerSlots {
			cancel()
			<-done
			// Wait for the server to drop it, so the next check starts clean.
			return false, waitUntil(ctx, c.wake, func() bool { return c.waiting[routeStock].Load() == 0 })
		}
		select {
		case err := <-done:
			return err == nil, err
		case <-c.wake:
		case <-ctx.Done():
			cancel()
			<-done
			return false, ctx.Err()
		}
	}
}

// notify wakes the scenario's coordinator without blocking.
func notify(wake chan struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// waitUntil waits until cond holds, checking it again after every wake-up.
func waitUntil(ctx context.Context, wake chan struct{}, cond func() bool) error {
	for !cond() {
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
