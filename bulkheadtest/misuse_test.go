package bulkheadtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bulkhead-go/bulkhead/bulkheadtest"
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
// itself, instead of passing (Check) or dying on a nil pointer inside.
func TestNilArgumentsPanic(t *testing.T) {
	mustPanic(t, "bulkheadtest: Check called with no results", func() { _ = bulkheadtest.Check(nil) })
	mustPanic(t, "bulkheadtest: Check called with no results", func() { _ = bulkheadtest.Check([]bulkheadtest.Result{}) })

	var gate bulkheadtest.Gate
	burst := bulkheadtest.Burst{Name: "payment", Workers: 1, Limit: 1, Gate: &gate,
		Call: func(ctx context.Context) error { return gate.Wait(ctx) }}
	mustPanic(t, "bulkheadtest: Run called with a nil Context", func() { _, _ = bulkheadtest.Run(nil, burst) })
	mustPanic(t, "bulkheadtest: RunInOrder called with a nil Context", func() { _, _ = bulkheadtest.RunInOrder(nil, burst) })
	mustPanic(t, "bulkheadtest: AssertIsolated called with a nil testing.TB", func() { bulkheadtest.AssertIsolated(nil, burst) })
	mustPanic(t, "bulkheadtest: AssertIsolatedWithin called with a nil testing.TB", func() {
		bulkheadtest.AssertIsolatedWithin(nil, guard, burst)
	})
	mustPanic(t, "bulkheadtest: Gate.Wait called with a nil Context", func() { _ = gate.Wait(nil) })
	mustPanic(t, "bulkheadtest: Gate.Handler called with a nil http.Handler", func() { gate.Handler(nil) })

	// The gate was left free by all of the above: a run still proves isolation.
	bulkheadtest.AssertIsolated(t, burst)
}

// A time limit that is not positive is bad input: the test stops with an
// error naming it, rather than running against a context already over.
func TestAssertIsolatedWithinNeedsPositiveLimit(t *testing.T) {
	var gate bulkheadtest.Gate
	burst := bulkheadtest.Burst{Name: "payment", Workers: 1, Limit: 1, Gate: &gate,
		Call: func(ctx context.Context) error { return gate.Wait(ctx) }}
	rec := &recorder{TB: t}
	if res := bulkheadtest.AssertIsolatedWithin(rec, 0, burst); res != nil {
		t.Errorf("results %v, want none", res)
	}
	if len(rec.fatals) != 1 || !strings.Contains(rec.fatals[0], "limit must be > 0, got 0s") || len(rec.errs) != 0 {
		t.Errorf("fatals %q, errors %q; want one fatal naming the limit", rec.fatals, rec.errs)
	}
}
