package registry

import (
	"context"
	"fmt"
	"testing"
)

// mustPanic runs f and checks that it panics with exactly want.
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		if v := recover(); fmt.Sprint(v) != want {
			t.Errorf("panic = %v, want %q", v, want)
		}
	}()
	f()
}

// A nil argument is a bug in the caller: the call panics at once, naming
// itself, instead of dying on a nil pointer somewhere inside.
func TestNilArgumentsPanic(t *testing.T) {
	mustPanic(t, "registry: Load called with a nil io.Reader", func() { _, _ = Load(nil) })

	r := newTestRegistry(t, "bulkhead: {instances: {payment: {maxConcurrentCalls: 1}}}")
	mustPanic(t, "registry: RegisterMetrics called with a nil prometheus.Registerer", func() {
		_, _ = r.RegisterMetrics(nil, MetricsOptions{Histograms: true})
	})
	mustPanic(t, "registry: Close called with a nil Context", func() { _ = r.Close(nil) })
	mustPanic(t, "registry: Subscribe called with a nil function", func() { r.Subscribe(nil) })
	mustPanic(t, "registry: SubscribeEntries called with a nil function", func() { r.SubscribeEntries(nil) })
	// Neither panic left anything behind: the registry still works and
	// listens to nobody.
	if _, err := r.Semaphore("payment"); err != nil {
		t.Errorf("after the panics: %v", err)
	}
	r.mu.Lock()
	listeners, collectors := r.listeners, len(r.collectors)
	r.mu.Unlock()
	if listeners != 0 || collectors != 0 {
		t.Errorf("after the panics: %d listeners, %d collectors, want none", listeners, collectors)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Error(err)
	}
}
