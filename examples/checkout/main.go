// Command checkout tells the bulkhead story in one run. A checkout service
// calls two dependencies on loopback: a payment gateway that has turned slow
// (/pay answers "paid" after -pay-delay, 2s by default) and an inventory
// service that answers at once (/stock answers "ok"). It runs three
// scenarios side by side:
//
//  1. Isolated: payment and inventory each behind their own semaphore
//     bulkhead (2 and 8 permits) and http.Client; 6 payment and 8 inventory
//     calls released together. Prints a one-line summary for scripts
//     (RESULT key=value ...: accepted, rejected and other outcomes and the
//     peak of concurrent calls and the permits free afterwards, per
//     dependency).
//  2. Shared: the same burst through one bulkhead of 8 permits, and what
//     inventory loses to the slow payment calls.
//  3. Outage: a checkout HTTP server with 4 handler slots, flooded with
//     payment requests while stock checks are measured: without bulkheads,
//     with a bulkhead on each dependency's client, and with one on the
//     server's /checkout/pay route (bulkheadhttp.Handler), which answers
//     the extra requests 503 with Retry-After.
//
// With -serve ADDR it also serves the bulkheads of scenario 1 while it
// runs, and keeps serving until interrupted: /metrics in Prometheus' text
// format (GET and HEAD only) and /bulkheads as JSON (configuration, Stats
// and recent events).
//
// Usage:
//
//	go run ./examples/checkout [-pay-delay 2s] [-serve localhost:8080]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bulkhead-go/bulkhead/registry"
)

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "checkout:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.Serve == "" {
		err = run(ctx, os.Stdout, o)
	} else {
		var ln net.Listener
		if ln, err = net.Listen("tcp", o.Serve); err == nil {
			err = serve(ctx, os.Stdout, o, ln)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "checkout:", err)
		os.Exit(1)
	}
}

// serve serves /metrics and /bulkheads on ln from the start, runs the
// scenarios with scenario 1 on the served registry, and then keeps serving
// until ctx ends.
func serve(ctx context.Context, w io.Writer, o options, ln net.Listener) error {
	reg, err := newRegistry(true)
	if err != nil {
		ln.Close()
		return err
	}
	defer reg.Close(context.Background())
	metrics := prometheus.NewRegistry()
	unregister, err := reg.RegisterMetrics(metrics, registry.MetricsOptions{Histograms: true})
	if err != nil {
		ln.Close()
		return err
	}
	defer unregister()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
	mux.Handle("/bulkheads", reg.Handler()) // with recent events: newRegistry(true)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(w, "serving http://%s/metrics and http://%[1]s/bulkheads\n\n", ln.Addr())

	o.registry = reg
	err = run(ctx, w, o)
	if err == nil {
		fmt.Fprintln(w, "still serving /metrics and /bulkheads; interrupt to stop")
		<-ctx.Done()
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(shutdown)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// options are the demo's settings.
type options struct {
	// PayDelay is how long the payment stub takes to answer a call.
	PayDelay time.Duration
	// Serve is the address to serve /metrics and /bulkheads on; empty for
	// none.
	Serve string

	// registry, when set, supplies scenario 1's bulkheads.
	registry *registry.Registry
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("checkout", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.DurationVar(&o.PayDelay, "pay-delay", 2*time.Second, "how long the payment stub takes to answer")
	fs.StringVar(&o.Serve, "serve", "", "serve /metrics and /bulkheads on this address (e.g. localhost:8080) until interrupted")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.PayDelay < 0 {
		return o, fmt.Errorf("-pay-delay must be >= 0, got %v", o.PayDelay)
	}
	return o, nil
}
