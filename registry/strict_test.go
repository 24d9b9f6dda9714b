package registry

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// With Config.Strict, a name the configuration does not list is
// ErrNotConfigured with its "did you mean" hint, even when configs.default
// is keyed: the form (keyed or plain) is checked only for a listed name.
func TestStrictUnlistedNameIsNotConfiguredWithKeyedDefault(t *testing.T) {
	r, err := New(Config{Strict: true,
		SemaphoreConfigs: map[string]SemaphoreSpec{"default": {MaxConcurrentCallsPerKey: new(2)}},
		Semaphores:       map[string]SemaphoreSpec{"payment": {}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	for _, get := range []func(string) error{
		func(n string) error { _, err := r.Semaphore(n); return err },
		func(n string) error { _, err := r.KeyedSemaphore(n); return err },
	} {
		if err := get("paymnet"); !errors.Is(err, ErrNotConfigured) || !strings.Contains(err.Error(), `did you mean "payment"?`) {
			t.Errorf("getting %q = %v, want ErrNotConfigured with a hint", "paymnet", err)
		}
	}
	if _, err := r.KeyedSemaphore("payment"); err != nil {
		t.Errorf("KeyedSemaphore(payment) = %v", err)
	}
}
