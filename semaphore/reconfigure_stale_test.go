package semaphore_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// gateCtx blocks its first Value call (the bulkhead's PriorityFrom)
// until gate is closed, so that a caller can be held between the moment it
// read the settings and the moment it takes a permit by them.
type gateCtx struct {
	context.Context
	once    sync.Once
	entered chan struct{}
	gate    chan struct{}
}

func (c *gateCtx) Value(k any) any {
	c.once.Do(func() { close(c.entered); <-c.gate })
	return c.Context.Value(k)
}

// Reconfigure lowers the limit to 1 while one call holds a permit; a call
// that read the settings before Reconfigure, and takes its permit after
// Reconfigure returned, is judged by the new limit and refused, not
// admitted by the old ceilings beside the holder. (Reconfigure: "a smaller
// one ... admits new calls only once fewer than the new limit run".)
func TestReconfigureLowerLimitHoldsCallThatReadOldSettings(t *testing.T) {
	for _, name := range []string{"priorities", "priorities+shadow"} {
		t.Run(name, func(t *testing.T) {
			cfg := semaphore.Config{MaxConcurrentCalls: 2, MaxWaitDuration: 0,
				Priorities: &bulkhead.Priorities{Sheddable: 0.5}}
			lower := semaphore.Config{MaxConcurrentCalls: 1, Priorities: &bulkhead.Priorities{Sheddable: 0.5}}
			if name == "priorities+shadow" {
				cfg.Shadow = &semaphore.Shadow{MaxConcurrentCalls: 1} // Do goes through doShadowed
			}
			b, err := semaphore.New("stale", cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !b.TryAcquire() { // one call holds a permit
				t.Fatal("TryAcquire failed")
			}
			ctx := &gateCtx{Context: context.Background(), entered: make(chan struct{}), gate: make(chan struct{})}
			res := make(chan error, 1)
			var inFlightInFn int
			go func() {
				res <- b.Do(ctx, func(context.Context) error {
					inFlightInFn = b.Stats().InFlight
					return nil
				})
			}()
			<-ctx.entered // the caller has read the settings (limit 2)
			if err := b.Reconfigure(lower); err != nil {
				t.Fatal(err)
			}
			if s := b.Stats(); s.MaxConcurrentCalls != 1 || s.InFlight != 1 {
				t.Fatalf("after Reconfigure: %+v", s)
			}
			close(ctx.gate)
			err = <-res
			b.Release()
			if err == nil {
				t.Fatalf("a call was admitted after Reconfigure(limit 1) returned, with 1 call running: %d in flight under limit 1", inFlightInFn)
			}
			if !errors.Is(err, bulkhead.ErrBulkheadFull) {
				t.Fatalf("err %v", err)
			}
		})
	}
}
