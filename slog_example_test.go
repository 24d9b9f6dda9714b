package bulkhead_test

import (
	"context"
	"log/slog"
	"os"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// A subscriber that logs every rejection, and a Stats snapshot, with
// log/slog: Event and Stats are slog.LogValuers, so each prints as a
// compact group.
func ExampleEvent_LogValue() {
	// Drop the time from the records, so that the output is the same on
	// every run.
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime}))

	payment, _ := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 1})
	cancel := payment.Subscribe(func(e bulkhead.Event) {
		if e.Type == bulkhead.EventRejected {
			logger.Warn("bulkhead", "event", e)
		}
	})
	defer cancel()

	ctx := context.Background()
	payment.Do(ctx, func(ctx context.Context) error {
		return payment.Do(ctx, func(context.Context) error { return nil }) // rejected: the only permit is taken
	})
	logger.Info("bulkhead", "stats", payment.Stats())
	// Output:
	// level=WARN msg=bulkhead event.name=payment event.kind=semaphore event.type=rejected event.err="bulkhead \"payment\" (semaphore) is full (maxConcurrentCalls 1)"
	// level=INFO msg=bulkhead stats.name=payment stats.kind=semaphore stats.limit=1 stats.in_flight=0 stats.waiting=0 stats.permitted=1 stats.rejected=1 stats.cancelled=0 stats.finished=1 stats.failed=1
}
