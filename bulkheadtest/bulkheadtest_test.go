package bulkheadtest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/bulkheadtest"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// guard keeps a broken test from hanging; it is never a pass criterion.
const guard = 30 * time.Second

func guardCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	t.Cleanup(cancel)
	return ctx
}

func newSemaphore(t *testing.T, name string, limit int, wait time.Duration) *semaphore.Bulkhead {
	t.Helper()
	b, err := semaphore.New(name, semaphore.Config{MaxConcurrentCalls: limit, MaxWaitDuration: wait})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bursts returns the article's two bursts, each calling through its own
// bulkhead (which may be the same one) into its gate.
func bursts(payment, inventory *semaphore.Bulkhead) (pay, stock bulkheadtest.Burst) {
	var payGate, stockGate bulkheadtest.Gate
	pay = bulkheadtest.Burst{Name: "payment", Workers: 6, Limit: 2, Gate: &payGate,
		Call: func(ctx context.Context) error { return payment.Do(ctx, payGate.Wait) }}
	stock = bulkheadtest.Burst{Name: "inventory", Workers: 8, Limit: 8, Gate: &stockGate,
		Call: func(ctx context.Context) error { return inventory.Do(ctx, stockGate.Wait) }}
	return pay, stock
}

func wantResult(t *testing.T, got bulkheadtest.Result, accepted, rejected, other, peak int) {
	t.Helper()
	if got.Accepted != accepted || got.Rejected != rejected || got.Other != other || got.MaxConcurrent != peak {
		t.Errorf("%s: got %d accepted, %d rejected, %d other, peak %d; want %d, %d, %d, peak %d (first other: %v)",
			got.Name, got.Accepted, got.Rejected, got.Other, got.MaxConcurrent, accepted, rejected, other, peak, got.OtherErr)
	}
}

func wantAvailable(t *testing.T, b *semaphore.Bulkhead, want int) {
	t.Helper()
	s := b.Stats()
	if s.AvailableConcurrentCalls != want || s.InFlight != 0 || s.Permitted != s.Finished {
		t.Errorf("%s after the burst: available %d, in flight %d, permitted %d, finished %d; want available %d, nothing in flight",
			s.Name, s.AvailableConcurrentCalls, s.InFlight, s.Permitted, s.Finished, want)
	}
}

// recorder is a testing.TB that records failures instead of failing, so a
// test can check that AssertIsolated fails when it should.
type recorder struct {
	testing.TB
	errs, fatals []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }
func (r *recorder) Fatalf(f string, a ...any) { r.fatals = append(r.fatals, fmt.Sprintf(f, a...)) }

func TestIsolatedBulkheadsPass(t *testing.T) {
	payment := newSemaphore(t, "payment", 2, 0)
	inventory := newSemaphore(t, "inventory", 8, 0)
	pay, stock := bursts(payment, inventory)

	results := bulkheadtest.AssertIsolated(t, pay, stock)

	wantResult(t, results[0], 2, 4, 0, 2)
	wantResult(t, results[1], 8, 0, 0, 8)
	wantAvailable(t, payment, 2)
	wantAvailable(t, inventory, 8)
}

func TestIsolatedBulkheadsPassInOrder(t *testing.T) {
	payment := newSemaphore(t, "payment", 2, 0)
	inventory := newSemaphore(t, "inventory", 8, 0)
	pay, stock := bursts(payment, inventory)

	results, err := bulkheadtest.RunInOrder(guardCtx(t), pay, stock)
	if err != nil {
		t.Fatal(err)
	}
	if err := bulkheadtest.Check(results); err != nil {
		t.Fatal(err)
	}
	wantResult(t, results[0], 2, 4, 0, 2)
	wantResult(t, results[1], 8, 0, 0, 8)
}

// One bulkhead shared by both dependencies: 14 calls compete for 8 permits,
// so however the scheduler orders them, the two bursts together get 8
// through where isolation needs 10, and Check must say so.
func TestSharedBulkheadFailsIsolation(t *testing.T) {
	shared := newSemaphore(t, "shared", 8, 0)
	pay, stock := bursts(shared, shared)

	results, err := bulkheadtest.Run(guardCtx(t), pay, stock)
	if err != nil {
		t.Fatal(err)
	}
	p, i := results[0], results[1]
	if got := p.Accepted + i.Accepted; got != 8 {
		t.Errorf("accepted %d calls in all, want the shared limit 8: %v; %v", got, p, i)
	}
	if p.MaxConcurrent+i.MaxConcurrent != 8 || p.Other+i.Other != 0 {
		t.Errorf("want peaks adding up to 8 and no other outcome: %v; %v", p, i)
	}
	if err := bulkheadtest.Check(results); err == nil {
		t.Fatalf("Check passed a shared bulkhead: %v; %v", p, i)
	} else {
		t.Logf("Check, as expected:\n%v", err)
	}
	wantAvailable(t, shared, 8)
}

// The same pitfall with the slow payment calls first: the numbers are
// exact, and AssertIsolated must fail the test.
func TestAssertIsolatedDetectsSharedBulkhead(t *testing.T) {
	shared := newSemaphore(t, "shared", 8, 0)
	pay, stock := bursts(shared, shared)

	results, err := bulkheadtest.RunInOrder(guardCtx(t), pay, stock)
	if err != nil {
		t.Fatal(err)
	}
	wantResult(t, results[0], 6, 0, 0, 6)
	wantResult(t, results[1], 2, 6, 0, 2)
	err = bulkheadtest.Check(results)
	if err == nil {
		t.Fatal("Check passed a shared bulkhead")
	}
	for _, want := range []string{
		"payment: 6 accepted", "6 accepted, want 2", "peak of 6 concurrent calls is above the limit 2",
		"inventory: 2 accepted", "2 accepted, want 8", "6 rejected, want 0",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Check's error does not say %q:\n%v", want, err)
		}
	}

	rec := &recorder{TB: t}
	pay, stock = bursts(shared, shared)
	bulkheadtest.AssertIsolated(rec, pay, stock)
	if len(rec.errs) != 1 || len(rec.fatals) != 0 {
		t.Fatalf("AssertIsolated on a shared bulkhead: errors %q, fatals %q; want one error", rec.errs, rec.fatals)
	}
	if !strings.Contains(rec.errs[0], "isolation broken") {
		t.Errorf("AssertIsolated's failure does not say isolation is broken: %s", rec.errs[0])
	}
}

// A "bulkhead" that admits everything must fail on the peak as well as on
// the counts.
func TestNoBulkheadFailsOnPeak(t *testing.T) {
	var gate bulkheadtest.Gate
	results, err := bulkheadtest.Run(guardCtx(t),
		bulkheadtest.Burst{Name: "payment", Workers: 6, Limit: 2, Gate: &gate, Call: gate.Wait})
	if err != nil {
		t.Fatal(err)
	}
	wantResult(t, results[0], 6, 0, 0, 6)
	if err := bulkheadtest.Check(results); err == nil || !strings.Contains(err.Error(), "above the limit 2") {
		t.Errorf("Check = %v, want a peak above the limit", err)
	}
}

// Calls that never pass the gate leave the peak at zero; Check must not
// mistake that for isolation.
func TestGateNotWiredIsReported(t *testing.T) {
	payment := newSemaphore(t, "payment", 2, 0)
	var gate bulkheadtest.Gate
	results, err := bulkheadtest.Run(guardCtx(t),
		bulkheadtest.Burst{Name: "payment", Workers: 2, Limit: 2, Gate: &gate,
			Call: func(ctx context.Context) error {
				return payment.Do(ctx, func(context.Context) error { return nil })
			}})
	if err != nil {
		t.Fatal(err)
	}
	wantResult(t, results[0], 2, 0, 0, 0)
	if err := bulkheadtest.Check(results); err == nil || !strings.Contains(err.Error(), "does every call pass the burst's Gate?") {
		t.Errorf("Check = %v, want a complaint about the gate", err)
	}
}

func TestOutcomesAreClassified(t *testing.T) {
	full := &bulkhead.FullError{Name: "x", Kind: bulkhead.Semaphore, MaxConcurrentCalls: 1}
	boom := errors.New("boom")
	tests := []struct {
		name     string
		call     func(ctx context.Context) error
		rejected bool
		check    func(error) bool
	}{
		{"FullError", func(context.Context) error { return full }, true, nil},
		{"wrapped twice", func(context.Context) error {
			return fmt.Errorf("checkout: %w", fmt.Errorf("get /pay: %w", full))
		}, true, nil},
		{"joined", func(context.Context) error { return errors.Join(boom, bulkhead.ErrBulkheadFull) }, true, nil},
		{"other error", func(context.Context) error { return boom },
			false, func(err error) bool { return err == boom }},
		{"deadline", func(context.Context) error { return context.DeadlineExceeded },
			false, func(err error) bool { return err == context.DeadlineExceeded }},
		{"panic", func(context.Context) error { panic(boom) },
			false, func(err error) bool {
				var pe *bulkhead.PanicError
				return errors.As(err, &pe) && errors.Is(err, boom) && len(pe.Stack) > 0
			}},
		{"Goexit", func(context.Context) error { runtime.Goexit(); return nil },
			false, func(err error) bool { return strings.Contains(fmt.Sprint(err), "Goexit") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gate bulkheadtest.Gate
			results, err := bulkheadtest.Run(guardCtx(t),
				bulkheadtest.Burst{Name: "dep", Workers: 3, Limit: 1, Gate: &gate, Call: tt.call})
			if err != nil {
				t.Fatal(err)
			}
			r := results[0]
			if tt.rejected {
				wantResult(t, r, 0, 3, 0, 0)
				return
			}
			wantResult(t, r, 0, 0, 3, 0)
			if !tt.check(r.OtherErr) {
				t.Errorf("OtherErr = %#v", r.OtherErr)
			}
		})
	}
}

// A bulkhead with MaxWaitDuration > 0 keeps the surplus callers waiting;
// the run settles once they are rejected. synctest's fake clock makes the
// second of waiting instant.
func TestWaitingCallersSettleAfterMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		payment := newSemaphore(t, "payment", 2, time.Second)
		inventory := newSemaphore(t, "inventory", 8, time.Second)
		pay, stock := bursts(payment, inventory)
		start := time.Now()

		results := bulkheadtest.AssertIsolated(t, pay, stock)

		wantResult(t, results[0], 2, 4, 0, 2)
		wantResult(t, results[1], 8, 0, 0, 8)
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("the run took %v of fake time, want the MaxWaitDuration 1s", waited)
		}
		for _, err := range []error{results[0].OtherErr, results[1].OtherErr} {
			if err != nil {
				t.Error(err)
			}
		}
	})
}

// A run whose calls never settle stops when its context ends, says how far
// each burst got, and still waits for its workers.
func TestStalledRunReportsProgress(t *testing.T) {
	ctx, cancel := context.WithCancel(guardCtx(t))
	defer cancel()
	var started sync.WaitGroup
	started.Add(3)
	go func() { started.Wait(); cancel() }()
	var gate, other bulkheadtest.Gate

	results, err := bulkheadtest.RunInOrder(ctx,
		bulkheadtest.Burst{Name: "stuck", Workers: 3, Limit: 3, Gate: &gate,
			Call: func(ctx context.Context) error {
				started.Done()
				<-ctx.Done() // neither at the gate nor returned
				return ctx.Err()
			}},
		bulkheadtest.Burst{Name: "later", Workers: 1, Limit: 1, Gate: &other,
			Call: func(context.Context) error { t.Error("a burst after a stalled one ran"); return nil }},
	)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	// The stuck workers see the same cancellation, so how many had
	// returned when the error was written varies.
	for _, want := range []string{"had not settled", "stuck: ", " of 3 returned, 0 at the gate", "later: not started"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if len(results) != 2 {
		t.Fatalf("got %d results, want 2", len(results))
	}
	wantResult(t, results[0], 0, 0, 3, 0)
	wantResult(t, results[1], 0, 0, 0, 0)

	// The gates are free again.
	if _, err := bulkheadtest.Run(guardCtx(t),
		bulkheadtest.Burst{Name: "again", Workers: 1, Limit: 1, Gate: &gate, Call: gate.Wait}); err != nil {
		t.Errorf("gate not released after a stalled run: %v", err)
	}
}

func TestGateInUseByAnotherRun(t *testing.T) {
	var gate bulkheadtest.Gate
	entered, release := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		_, err := bulkheadtest.Run(guardCtx(t), bulkheadtest.Burst{Name: "first", Workers: 1, Limit: 1, Gate: &gate,
			Call: func(context.Context) error { close(entered); <-release; return nil }})
		errc <- err
	}()
	<-entered
	_, err := bulkheadtest.Run(guardCtx(t), bulkheadtest.Burst{Name: "second", Workers: 1, Limit: 1, Gate: &gate, Call: gate.Wait})
	close(release)
	if err == nil || !strings.Contains(err.Error(), `"second": its Gate is in use`) {
		t.Errorf("second Run = %v, want its gate reported in use", err)
	}
	if err := <-errc; err != nil {
		t.Errorf("first Run = %v", err)
	}
}

func TestGatePassesOutsideARun(t *testing.T) {
	var gate bulkheadtest.Gate
	if err := gate.Wait(t.Context()); err != nil {
		t.Fatalf("Wait outside a run = %v, want nil at once", err)
	}
}

func TestInvalidBursts(t *testing.T) {
	var g1, g2 bulkheadtest.Gate
	call := func(context.Context) error { return nil }
	ok := bulkheadtest.Burst{Name: "a", Workers: 1, Limit: 1, Gate: &g1, Call: call}
	with := func(f func(*bulkheadtest.Burst)) bulkheadtest.Burst { b := ok; f(&b); return b }
	tests := []struct {
		name   string
		bursts []bulkheadtest.Burst
		want   string
	}{
		{"none", nil, "no bursts"},
		{"no name", []bulkheadtest.Burst{with(func(b *bulkheadtest.Burst) { b.Name = "" })}, "burst 0: Name is empty"},
		{"workers", []bulkheadtest.Burst{with(func(b *bulkheadtest.Burst) { b.Workers = 0 })}, `"a": Workers must be >= 1, got 0`},
		{"limit", []bulkheadtest.Burst{with(func(b *bulkheadtest.Burst) { b.Limit = -1 })}, `"a": Limit must be >= 1, got -1`},
		{"gate", []bulkheadtest.Burst{with(func(b *bulkheadtest.Burst) { b.Gate = nil })}, `"a": Gate is nil`},
		{"call", []bulkheadtest.Burst{with(func(b *bulkheadtest.Burst) { b.Call = nil })}, `"a": Call is nil`},
		{"same name", []bulkheadtest.Burst{ok, with(func(b *bulkheadtest.Burst) { b.Gate = &g2 })}, `"a": Name is used by two bursts`},
		{"same gate", []bulkheadtest.Burst{ok, with(func(b *bulkheadtest.Burst) { b.Name = "b" })}, `bursts "a" and "b" share a Gate`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results, err := bulkheadtest.Run(t.Context(), tt.bursts...)
			if err == nil || !strings.Contains(err.Error(), tt.want) || results != nil {
				t.Errorf("Run = %v, %v; want no results and an error containing %q", results, err, tt.want)
			}
		})
	}
}

func TestDoneContextRunsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var gate bulkheadtest.Gate
	_, err := bulkheadtest.Run(ctx, bulkheadtest.Burst{Name: "a", Workers: 1, Limit: 1, Gate: &gate,
		Call: func(context.Context) error { t.Error("Call ran under a done context"); return nil }})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
}
