package main

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"

	"github.com/bulkhead-go/bulkhead/registry"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// bulkheadsYAML configures the checkout's bulkheads, one per dependency:
// payment 2 concurrent calls, inventory 8, neither waiting for a permit.
//
//go:embed bulkheads.yml
var bulkheadsYAML []byte

// newRegistry loads bulkheads.yml into a new registry, keeping recent events
// for the status page if record is set. Each scenario builds its own, since
// they run side by side.
func newRegistry(record bool) (*registry.Registry, error) {
	cfg, err := registry.Load(bytes.NewReader(bulkheadsYAML))
	if err != nil {
		return nil, fmt.Errorf("bulkheads.yml: %w", err)
	}
	cfg.RecordEvents = record
	return registry.New(cfg)
}

// newBulkheads returns the payment and inventory bulkheads of reg, or of a
// new registry loaded from bulkheads.yml when reg is nil. Call done when the
// bulkheads are no longer needed: it closes the registry it created, if any.
func newBulkheads(reg *registry.Registry) (payment, inventory *semaphore.Bulkhead, done func(), err error) {
	done = func() {}
	if reg == nil {
		if reg, err = newRegistry(false); err != nil {
			return nil, nil, nil, err
		}
		own := reg
		done = func() { own.Close(context.Background()) }
	}
	if payment, err = reg.Semaphore("payment"); err == nil {
		inventory, err = reg.Semaphore("inventory")
	}
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	return payment, inventory, done, nil
}
