package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/bulkheadhttp"
	"github.com/bulkhead-go/bulkhead/bulkheadtest"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// The burst of scenarios 1 and 2, as in the article.
const (
	paymentWorkers   = 6
	inventoryWorkers = 8
)

// run runs the three scenarios side by side, so that the whole demo takes
// about as long as its slowest scenario, and prints their reports in order.
func run(ctx context.Context, w io.Writer, o options) error {
	fmt.Fprintf(w, "checkout: the payment gateway answers after %v, the inventory service at once.\n\n", o.PayDelay)
	start := time.Now()
	scenarios := []func(context.Context, io.Writer, options) error{
		func(ctx context.Context, w io.Writer, o options) error { _, err := isolated(ctx, w, o); return err },
		func(ctx context.Context, w io.Writer, o options) error { _, err := shared(ctx, w, o); return err },
		func(ctx context.Context, w io.Writer, o options) error { _, err := runOutage(ctx, w, o); return err },
	}
	out := make([]bytes.Buffer, len(scenarios))
	errs := make([]error, len(scenarios))
	var wg sync.WaitGroup
	for i, s := range scenarios {
		wg.Go(func() {
			if err := s(ctx, &out[i], o); err != nil {
				errs[i] = fmt.Errorf("scenario %d: %w", i+1, err)
			}
		})
	}
	wg.Wait()
	for i := range out {
		w.Write(out[i].Bytes())
		fmt.Fprintln(w)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(w, "done in %.1fs\n", time.Since(start).Seconds())
	return nil
}

// isolation is what scenario 1 measured.
type isolation struct {
	payment, inventory                   bulkheadtest.Result
	paymentAvailable, inventoryAvailable int // read after the burst
}

// resultLine is the article's RESULT line.
func (r isolation) resultLine() string {
	return fmt.Sprintf("RESULT paymentAccepted=%d paymentRejected=%d paymentOther=%d paymentMaxPermitted=%d "+
		"inventoryAccepted=%d inventoryRejected=%d inventoryOther=%d paymentAvailable=%d inventoryAvailable=%d",
		r.payment.Accepted, r.payment.Rejected, r.payment.Other, r.payment.MaxConcurrent,
		r.inventory.Accepted, r.inventory.Rejected, r.inventory.Other, r.paymentAvailable, r.inventoryAvailable)
}

// isolated is scenario 1: the article's proof, each dependency on its own
// bulkhead and http.Client.
func isolated(ctx context.Context, w io.Writer, o options) (isolation, error) {
	payment, inventory, done, err := newBulkheads(o.registry)
	if err != nil {
		return isolation{}, err
	}
	defer done()
	d := startDeps(o.PayDelay, nil)
	defer d.close()
	payClient, closePay := newClient(payment)
	defer closePay()
	invClient, closeInv := newClient(inventory)
	defer closeInv()

	bursts := d.bursts(payClient, invClient, payment.Config().MaxConcurrentCalls, inventory.Config().MaxConcurrentCalls)
	var slowest [2]atomic.Int64 // the slowest successful call of each burst, for the report only
	for i := range bursts {
		call := bursts[i].Call
		bursts[i].Call = func(ctx context.Context) error {
			start := time.Now()
			err := call(ctx)
			if err == nil {
				storeMax(&slowest[i], int64(time.Since(start)))
			}
			return err
		}
	}
	res, err := bulkheadtest.Run(ctx, bursts...)
	if err != nil {
		return isolation{}, err
	}
	r := isolation{
		payment:            res[0],
		inventory:          res[1],
		paymentAvailable:   payment.Stats().AvailableConcurrentCalls,
		inventoryAvailable: inventory.Stats().AvailableConcurrentCalls,
	}
	fmt.Fprintf(w, "1. Isolated: payment and inventory each on their own bulkhead and http.Client,\n")
	fmt.Fprintf(w, "   %d payment and %d inventory calls released together:\n", paymentWorkers, inventoryWorkers)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "   \tcalls\tlimit\taccepted\trejected\tother\tpeak\tslowest accepted\n")
	for i, x := range res {
		fmt.Fprintf(tw, "   %s\t%d\t%d\t%d\t%d\t%d\t%d\t%v\n", x.Name, x.Workers, x.Limit, x.Accepted, x.Rejected,
			x.Other, x.MaxConcurrent, time.Duration(slowest[i].Load()).Round(time.Millisecond))
	}
	tw.Flush()
	fmt.Fprintf(w, "   Inventory got every call through while payment was saturated; afterwards the\n"+
		"   bulkheads have all their permits back (available: payment %d, inventory %d).\n",
		r.paymentAvailable, r.inventoryAvailable)
	fmt.Fprintln(w, r.resultLine())
	return r, nil
}

// storeMax raises a to v if v is larger.
func storeMax(a *atomic.Int64, v int64) {
	for old := a.Load(); v > old; old = a.Load() {
		if a.CompareAndSwap(old, v) {
			return
		}
	}
}

// sharing is what scenario 2 measured.
type sharing struct {
	payment, inventory bulkheadtest.Result
}

// shared is scenario 2, the pitfall: both dependencies behind one bulkhead
// of 8 permits. The slow payment calls come first, as they do in an outage,
// and the inventory calls arrive while they hold their permits.
func shared(ctx context.Context, w io.Writer, o options) (sharing, error) {
	payment, inventory, done, err := newBulkheads(nil) // what each dependency was meant to get
	if err != nil {
		return sharing{}, err
	}
	defer done()
	one, err := semaphore.New("shared", semaphore.Config{MaxConcurrentCalls: 8})
	if err != nil {
		return sharing{}, err
	}
	d := startDeps(o.PayDelay, nil)
	defer d.close()
	payClient, closePay := newClient(one)
	defer closePay()
	invClient, closeInv := newClient(one)
	defer closeInv()

	res, err := bulkheadtest.RunInOrder(ctx, d.bursts(payClient, invClient,
		payment.Config().MaxConcurrentCalls, inventory.Config().MaxConcurrentCalls)...)
	if err != nil {
		return sharing{}, err
	}
	r := sharing{payment: res[0], inventory: res[1]}
	fmt.Fprintf(w, "2. Shared: the same calls through one bulkhead of %d permits (the pitfall).\n", one.Config().MaxConcurrentCalls)
	fmt.Fprintf(w, "   The slow payment calls arrive first and hold their permits for %v:\n", o.PayDelay)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "   \tcalls\town limit\taccepted\trejected\n")
	for _, x := range res {
		fmt.Fprintf(tw, "   %s\t%d\t%d\t%d\t%d\n", x.Name, x.Workers, x.Limit, x.Accepted, x.Rejected)
	}
	tw.Flush()
	fmt.Fprintf(w, "   Payment takes %d permits though its own limit is %d; inventory loses %d of its %d calls\n"+
		"   to a dependency it never calls. Give every dependency its own bulkhead.\n",
		r.payment.Accepted, r.payment.Limit, r.inventory.Rejected, r.inventory.Workers)
	return r, nil
}

// deps is the pair of stub dependencies on loopback. Each endpoint waits at
// its gate first, so that bulkheadtest.Run can hold the calls that got
// through until every worker has settled.
type deps struct {
	url        string
	srv        *httptest.Server
	pay, stock bulkheadtest.Gate
}

// startDeps starts the stubs: /pay answers "paid" after payDelay (after st
// lets it go, if st is not nil) and /stock answers "ok" at once.
func startDeps(payDelay time.Duration, st *stall) *deps {
	d := &deps{}
	mux := http.NewServeMux()
	mux.Handle("GET /pay", d.pay.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if st != nil && st.hold(r.Context()) != nil {
			return // the caller gave up
		}
		t := time.NewTimer(payDelay) // the slow gateway
		defer t.Stop()
		select {
		case <-t.C:
			io.WriteString(w, "paid")
		case <-r.Context().Done():
		}
	})))
	mux.Handle("GET /stock", d.stock.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	})))
	d.srv = httptest.NewServer(mux)
	d.url = d.srv.URL
	return d
}

func (d *deps) close() { d.srv.Close() }

// bursts returns the article's two bursts: payment and inventory calls
// through their clients, against the limits they are meant to have.
func (d *deps) bursts(payClient, invClient *http.Client, payLimit, invLimit int) []bulkheadtest.Burst {
	return []bulkheadtest.Burst{
		{Name: "payment", Workers: paymentWorkers, Limit: payLimit, Gate: &d.pay,
			Call: func(ctx context.Context) error { return get(ctx, payClient, d.url+"/pay", "paid") }},
		{Name: "inventory", Workers: inventoryWorkers, Limit: invLimit, Gate: &d.stock,
			Call: func(ctx context.Context) error { return get(ctx, invClient, d.url+"/stock", "ok") }},
	}
}

// newClient returns an http.Client whose requests go through b (through no
// bulkhead when b is nil), and a function that closes its idle connections.
func newClient(b *semaphore.Bulkhead) (*http.Client, func()) {
	base := &http.Transport{MaxIdleConnsPerHost: 16}
	var rt http.RoundTripper = base
	if b != nil {
		rt = bulkheadhttp.Transport(b, base)
	}
	return &http.Client{Transport: rt}, base.CloseIdleConnections
}

// get fetches url and returns nil if it answered 200 with want, the
// client's error as is (a bulkhead's rejection matches
// bulkhead.ErrBulkheadFull), and a *statusError for any other answer. It
// reads and closes the body, which returns the bulkhead's permit.
func get(ctx context.Context, c *http.Client, url, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(body) != want {
		return &statusError{url: url, code: resp.StatusCode, body: string(body), retryAfter: resp.Header.Get("Retry-After")}
	}
	return nil
}

// statusError is an unexpected answer.
type statusError struct {
	url        string
	code       int
	body       string
	retryAfter string // the Retry-After header, if any
}

func (e *statusError) Error() string {
	return fmt.Sprintf("GET %s: %d %s: %q", e.url, e.code, http.StatusText(e.code), e.body)
}

// isRefused reports whether err is the checkout server's 503: a dependency's
// bulkhead refused the call.
func isRefused(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.code == http.StatusServiceUnavailable
}

// respond answers a checkout request from a dependency's outcome.
func respond(w http.ResponseWriter, dep, body string, err error) {
	switch {
	case err == nil:
		io.WriteString(w, body)
	case errors.Is(err, bulkhead.ErrBulkheadFull):
		http.Error(w, dep+" is busy, try again later", http.StatusServiceUnavailable)
	default:
		http.Error(w, dep+": "+err.Error(), http.StatusBadGateway)
	}
}
