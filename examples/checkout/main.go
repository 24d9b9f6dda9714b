// Command checkout tells the bulkhead story in one run. A checkout service
// calls two dependencies on loopback: a payment gateway that has turned slow
// (/pay answers "paid" after -pay-delay, 2s by default) and an inventory
// service that answers at once (/stock answers "ok"). It runs three
// scenarios side by side:
//
//  1. Isolated: payment and inventory each behind their own semaphore
//     bulkhead (2 and 8 permits) and http.Client; 6 payment and 8 inventory
//     calls released together. Prints the article's RESULT line.
//  2. Shared: the same burst through one bulkhead of 8 permits, and what
//     inventory loses to the slow payment calls.
//  3. Outage: a checkout HTTP server with 4 handler slots, flooded with
//     payment requests while stock checks are measured, without and with
//     bulkheads.
//
// Usage:
//
//	go run ./examples/checkout [-pay-delay 2s]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "checkout:", err)
		os.Exit(1)
	}
}

// options are the demo's settings.
type options struct {
	// PayDelay is how long the payment stub takes to answer a call.
	PayDelay time.Duration
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("checkout", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.DurationVar(&o.PayDelay, "pay-delay", 2*time.Second, "how long the payment stub takes to answer")
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
