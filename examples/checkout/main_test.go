package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// IgnoreCurrent ignores exactly the goroutines that exist before any test
// runs: the two that importing ants starts for its default pool. Goroutines
// of a pool the demo forgot to close are still reported.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

// The scenarios' numbers come from gates and latches, not from timing, so a
// tiny payment delay gives the same numbers as the default 2s.
var fast = options{PayDelay: time.Millisecond}

const wantResult = "RESULT paymentAccepted=2 paymentRejected=4 paymentOther=0 paymentMaxPermitted=2 " +
	"inventoryAccepted=8 inventoryRejected=0 inventoryOther=0 paymentAvailable=2 inventoryAvailable=8"

// guarded returns a context that only keeps a broken test from hanging.
func guarded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestIsolatedPrintsTheArticlesResult(t *testing.T) {
	var out bytes.Buffer
	r, err := isolated(guarded(t), &out, fast)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.resultLine(); got != wantResult {
		t.Errorf("got  %s\nwant %s", got, wantResult)
	}
	if lines := resultLines(out.String()); len(lines) != 1 || lines[0] != wantResult {
		t.Errorf("printed RESULT lines %q, want exactly [%q]\n%s", lines, wantResult, out.String())
	}
}

func TestSharedBulkheadStarvesInventory(t *testing.T) {
	r, err := shared(guarded(t), io.Discard, fast)
	if err != nil {
		t.Fatal(err)
	}
	p, i := r.payment, r.inventory
	if p.Accepted != 6 || p.Rejected != 0 || p.Other != 0 || p.MaxConcurrent != 6 {
		t.Errorf("payment: %v; want 6 accepted, 0 rejected, peak 6", p)
	}
	if i.Accepted != 2 || i.Rejected != 6 || i.Other != 0 || i.MaxConcurrent != 2 {
		t.Errorf("inventory: %v; want 2 accepted, 6 rejected, peak 2", i)
	}
}

func TestOutageWithoutAndWithBulkheads(t *testing.T) {
	r, err := runOutage(guarded(t), io.Discard, fast)
	if err != nil {
		t.Fatal(err)
	}
	want := outageRun{stockAnswered: 0, stockStuck: stockChecks, paid: payRequests}
	if got := r.without; got.stockAnswered != want.stockAnswered || got.stockStuck != want.stockStuck ||
		got.paid != want.paid || got.refused != want.refused || got.failed != 0 {
		t.Errorf("without bulkheads: got %+v, want %+v", got, want)
	}
	want = outageRun{stockAnswered: stockChecks, paid: 2, refused: payRequests - 2}
	if got := r.with; got.stockAnswered != want.stockAnswered || got.stockStuck != want.stockStuck ||
		got.paid != want.paid || got.refused != want.refused || got.failed != 0 {
		t.Errorf("with bulkheads: got %+v, want %+v", got, want)
	}
	// The route's Handler refuses at the door, with Retry-After.
	want.retryAfter = "1"
	if got := r.admission; got.stockAnswered != want.stockAnswered || got.stockStuck != want.stockStuck ||
		got.paid != want.paid || got.refused != want.refused || got.failed != 0 || got.retryAfter != want.retryAfter {
		t.Errorf("with a Handler on /checkout/pay: got %+v, want %+v", got, want)
	}
}

func TestRunPrintsOneResultLine(t *testing.T) {
	var out bytes.Buffer
	if err := run(guarded(t), &out, options{PayDelay: 0}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if lines := resultLines(s); len(lines) != 1 || lines[0] != wantResult {
		t.Errorf("printed RESULT lines %q, want exactly [%q]", lines, wantResult)
	}
	for _, want := range []string{"1. Isolated", "2. Shared", "3. Outage", "inventory loses 6 of its 8 calls",
		"without bulkheads  0 of 4", "with bulkheads     4 of 4", "Handler on /pay    4 of 4",
		"6 answered\n   503 Service Unavailable with Retry-After: 1.", "done in"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := run(ctx, io.Discard, fast); err == nil {
		t.Error("run under a cancelled context succeeded")
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		want    time.Duration
		wantErr string
	}{
		{nil, 2 * time.Second, ""},
		{[]string{"-pay-delay", "50ms"}, 50 * time.Millisecond, ""},
		{[]string{"-pay-delay=0"}, 0, ""},
		{[]string{"-pay-delay=-1s"}, 0, "-pay-delay must be >= 0, got -1s"},
		{[]string{"-pay-delay=soon"}, 0, `invalid value "soon"`},
		{[]string{"extra"}, 0, `unexpected arguments ["extra"]`},
	}
	for _, tt := range tests {
		o, err := parseFlags(tt.args, io.Discard)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("parseFlags(%q) = %v", tt.args, err)
		case tt.wantErr == "" && o.PayDelay != tt.want:
			t.Errorf("parseFlags(%q): PayDelay %v, want %v", tt.args, o.PayDelay, tt.want)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("parseFlags(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
		}
	}
}

func resultLines(s string) []string {
	var lines []string
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, "RESULT") {
			lines = append(lines, strings.TrimSuffix(line, "\n"))
		}
	}
	return lines
}
