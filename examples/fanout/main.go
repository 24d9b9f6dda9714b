// Command fanout fans 50 lookups out to a slow dependency through a pool
// bulkhead of 4 workers (pool.Go waits for room, so every lookup runs),
// collects them with future.All, and then shows what overload looks like
// with Submit: the requests beyond the pool's workers and queue are refused
// at once with bulkhead.ErrBulkheadFull instead of piling up.
//
//	go run ./examples/fanout
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// latency is how long the stub dependency takes to answer.
const latency = 100 * time.Millisecond

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	ctx := context.Background()

	// The slow dependency: an inventory service that answers in 100 ms.
	stub := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
		fmt.Fprintf(rw, "stock of %s: 7", strings.TrimPrefix(r.URL.Path, "/sku/"))
	}))
	defer stub.Close()
	client := stub.Client()

	// Its budget: 4 lookups at a time, 8 more waiting.
	inventory, err := pool.New("inventory", pool.Config{MaxWorkers: 4, QueueCapacity: 8})
	if err != nil {
		return err
	}
	defer inventory.Close(ctx)

	lookup := func(sku int) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/sku/%d", stub.URL, sku), nil)
			if err != nil {
				return "", err
			}
			resp, err := client.Do(req)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			return string(body), err
		}
	}

	// 1. Fan out 50 lookups, 4 at a time: pool.Go waits for room in
	// the queue instead of refusing. Then collect them in order; if one
	// failed, All would say which and cancel the rest.
	start := time.Now()
	var fs []*future.Future[string]
	for sku := 1; sku <= 50; sku++ {
		f, err := pool.Go(ctx, inventory, lookup(sku))
		if err != nil {
			return err
		}
		fs = append(fs, f)
	}
	answers, err := future.All(ctx, fs...)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "fan-out: %d lookups, 4 at a time, in %v: first %q, last %q\n",
		len(answers), roughly(time.Since(start)), answers[0], answers[len(answers)-1])

	// 2. Overload, for a caller that must not wait: 40 lookups at once with
	// Submit. The first 12 fill the workers and the queue; the other 28 are
	// refused at once instead of waiting in line.
	start = time.Now()
	var accepted []*future.Future[string]
	rejected := 0
	var lastRejection time.Duration
	for sku := 100; sku < 140; sku++ {
		f, err := pool.Submit(ctx, inventory, lookup(sku))
		switch {
		case errors.Is(err, bulkhead.ErrBulkheadFull):
			rejected++
			lastRejection = time.Since(start)
		case err != nil:
			return err
		default:
			accepted = append(accepted, f)
		}
	}
	fmt.Fprintf(w, "overload: 40 lookups at once: %d accepted, %d rejected with ErrBulkheadFull, all within %v\n",
		len(accepted), rejected, under(lastRejection))
	if _, err := future.All(ctx, accepted...); err != nil {
		return err
	}
	fmt.Fprintf(w, "overload: the %d accepted lookups finished in %v\n", len(accepted), roughly(time.Since(start)))

	s := inventory.Stats()
	fmt.Fprintf(w, "stats: permitted %d, rejected %d, finished %d, in flight %d, queued %d\n",
		s.Permitted, s.Rejected, s.Finished, s.InFlight, s.QueueDepth)
	return nil
}

// roughly rounds d to the stub's latency, so the output reads "300ms".
func roughly(d time.Duration) time.Duration { return d.Round(latency) }

// under reports a short duration as a bound.
func under(d time.Duration) string {
	if d < time.Millisecond {
		return "1ms"
	}
	return d.Round(time.Millisecond).String()
}
