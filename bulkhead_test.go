package bulkhead_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkhead-go/bulkhead"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFullErrorMatchesSentinel(t *testing.T) {
	var err error = &bulkhead.FullError{Name: "payment", Kind: bulkhead.Semaphore, MaxConcurrentCalls: 2}
	wrapped := fmt.Errorf("charge: %w", err)
	if !errors.Is(wrapped, bulkhead.ErrBulkheadFull) {
		t.Fatal("a wrapped *FullError does not match ErrBulkheadFull")
	}
	if errors.Is(wrapped, bulkhead.ErrClosed) {
		t.Fatal("a *FullError matches ErrClosed")
	}
	var fe *bulkhead.FullError
	if !errors.As(wrapped, &fe) || fe.Name != "payment" {
		t.Fatalf("errors.As gave %+v", fe)
	}
}

func TestFullErrorMessages(t *testing.T) {
	cases := []struct {
		err  bulkhead.FullError
		want string
	}{
		{bulkhead.FullError{Name: "payment", Kind: bulkhead.Semaphore, MaxConcurrentCalls: 2},
			`bulkhead "payment" (semaphore) is full (maxConcurrentCalls 2)`},
		{bulkhead.FullError{Name: "payment", Kind: bulkhead.Semaphore, MaxConcurrentCalls: 2, MaxWaitDuration: time.Second, Waited: true},
			`bulkhead "payment" (semaphore) is full (maxConcurrentCalls 2): no permit within 1s`},
		{bulkhead.FullError{Name: "lookups", Kind: bulkhead.Pool, MaxConcurrentCalls: 4, QueueCapacity: 10},
			`bulkhead "lookups" (pool) is full (maxWorkers 4, queueCapacity 10)`},
		{bulkhead.FullError{Name: "lookups", Kind: bulkhead.Pool, MaxConcurrentCalls: 4},
			`bulkhead "lookups" (pool) is full (maxWorkers 4, queueCapacity 0)`},
		{bulkhead.FullError{Name: "lookups", Kind: bulkhead.Pool, MaxConcurrentCalls: 4, QueueCapacity: 1, MaxWaitDuration: time.Millisecond, Waited: true},
			`bulkhead "lookups" (pool) is full (maxWorkers 4, queueCapacity 1): task not started within 1ms`},
		{bulkhead.FullError{Name: "p", Kind: bulkhead.Semaphore, MaxConcurrentCalls: 2, Reason: bulkhead.ReasonWaiters},
			`bulkhead "p" (semaphore) is full (maxConcurrentCalls 2): too many callers waiting (maxWaitingCalls)`},
		{bulkhead.FullError{Name: "p", Kind: bulkhead.Semaphore, MaxConcurrentCalls: 2, Reason: bulkhead.ReasonWaiters, Waited: true},
			`bulkhead "p" (semaphore) is full (maxConcurrentCalls 2): a waiter, dropped from the full line for a newer caller (maxWaitingCalls)`},
		{bulkhead.FullError{Name: "p", Kind: bulkhead.Semaphore, MaxConcurrentCalls: 2, Reason: bulkhead.ReasonDisplaced, Waited: true},
			`bulkhead "p" (semaphore) is full (maxConcurrentCalls 2): pushed out of the line by a call of higher priority`},
		{bulkhead.FullError{Name: "p", Kind: bulkhead.Semaphore, MaxConcurrentCalls: 2, Reason: bulkhead.ReasonDeadline},
			`bulkhead "p" (semaphore) is full (maxConcurrentCalls 2): its deadline is nearer than minDeadlineSlack`},
		{bulkhead.FullError{Name: "p", Kind: bulkhead.Semaphore, MaxConcurrentCalls: 2, Reason: bulkhead.ReasonDeadline, Waited: true},
			`bulkhead "p" (semaphore) is full (maxConcurrentCalls 2): its deadline came within minDeadlineSlack while it waited`},
		{bulkhead.FullError{Name: "p", Kind: bulkhead.Semaphore, MaxConcurrentCalls: 2, Reason: bulkhead.ReasonCoDel, Waited: true},
			`bulkhead "p" (semaphore) is full (maxConcurrentCalls 2): shed by CoDel, the line stood above its target wait`},
	}
	for _, c := range cases {
		if got := c.err.Error(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

func TestPanicErrorUnwrapsErrorValues(t *testing.T) {
	pe := &bulkhead.PanicError{Value: io.ErrUnexpectedEOF, Stack: []byte("stack")}
	if !errors.Is(pe, io.ErrUnexpectedEOF) {
		t.Fatal("PanicError does not unwrap an error value")
	}
	if got := pe.Error(); got != "bulkhead: task panicked: unexpected EOF" {
		t.Fatalf("Error() = %q", got)
	}
	if (&bulkhead.PanicError{Value: 42}).Unwrap() != nil {
		t.Fatal("a non-error value unwraps to something")
	}
}

func TestStrings(t *testing.T) {
	for v, want := range map[fmt.Stringer]string{
		bulkhead.Semaphore: "semaphore", bulkhead.Pool: "pool", bulkhead.Kind(9): "Kind(9)",
		bulkhead.EventPermitted: "permitted", bulkhead.EventRejected: "rejected",
		bulkhead.EventCancelled: "cancelled", bulkhead.EventFinished: "finished", bulkhead.EventType(0): "EventType(0)",
		bulkhead.FIFO: "fifo", bulkhead.LIFO: "lifo", bulkhead.AdaptiveLIFO: "adaptiveLifo", bulkhead.QueueOrder(7): "QueueOrder(7)",
	} {
		if got := v.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
	e := bulkhead.Event{Name: "p", Kind: bulkhead.Pool, Type: bulkhead.EventFinished, Wait: time.Millisecond, Run: 2 * time.Millisecond, Err: io.EOF}
	if got, want := e.String(), `bulkhead "p" (pool) finished wait=1ms run=2ms: EOF`; got != want {
		t.Errorf("Event.String() = %q, want %q", got, want)
	}
	if !strings.Contains(bulkhead.ErrClosed.Error(), "closed") {
		t.Error(bulkhead.ErrClosed)
	}
}

func ExampleFullError() {
	var err error = &bulkhead.FullError{Name: "payment", Kind: bulkhead.Semaphore, MaxConcurrentCalls: 2}
	err = fmt.Errorf("checkout: %w", err)

	fmt.Println(errors.Is(err, bulkhead.ErrBulkheadFull))
	var full *bulkhead.FullError
	if errors.As(err, &full) {
		fmt.Println(full.Name, full.MaxConcurrentCalls)
	}
	// Output:
	// true
	// payment 2
}

func TestLogValues(t *testing.T) {
	var buf strings.Builder
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
			return slog.Attr{}
		}
		return a
	}}))
	logger.Info("e", "e", bulkhead.Event{Name: "p", Kind: bulkhead.Pool, Type: bulkhead.EventFinished,
		Wait: time.Millisecond, Run: 2 * time.Second, Err: io.EOF})
	logger.Info("e", "e", bulkhead.Event{Name: "s", Kind: bulkhead.Semaphore, Type: bulkhead.EventLimitChanged, Limit: 7})
	logger.Info("s", "s", bulkhead.Stats{Name: "p", Kind: bulkhead.Pool, MaxConcurrentCalls: 4, InFlight: 2,
		QueueDepth: 3, QueueCapacity: 10, Permitted: 9, Rejected: 1, Cancelled: 2, Finished: 7, Failed: 1})
	want := `msg=e e.name=p e.kind=pool e.type=finished e.wait=1ms e.run=2s e.err=EOF
msg=e e.name=s e.kind=semaphore e.type="limit changed" e.limit=7
msg=s s.name=p s.kind=pool s.limit=4 s.in_flight=2 s.queued=3 s.queue_capacity=10 s.permitted=9 s.rejected=1 s.cancelled=2 s.finished=7 s.failed=1
`
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestReasonStrings(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range bulkhead.Reasons {
		s := r.String()
		if r == bulkhead.ReasonNone || s == "none" || seen[s] || strings.HasPrefix(s, "Reason(") {
			t.Fatalf("reason %d: String() = %q, want a distinct label", r, s)
		}
		seen[s] = true
		if !errors.Is(&bulkhead.FullError{Reason: r}, bulkhead.ErrBulkheadFull) {
			t.Fatalf("a bulkhead.FullError with reason %v does not match bulkhead.ErrBulkheadFull", r)
		}
	}
	if got := bulkhead.Reason(200).String(); got != "Reason(200)" {
		t.Fatalf("Reason(200).String() = %q", got)
	}
}

func TestCoDelDefaultsAndValidate(t *testing.T) {
	if got := (bulkhead.CoDel{}).WithDefaults(); got != (bulkhead.CoDel{Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond}) {
		t.Fatalf("defaults %+v", got)
	}
	if err := (bulkhead.CoDel{Interval: 5 * time.Millisecond}).Validate(); err == nil ||
		err.Error() != "codel.target must be shorter than codel.interval (5ms), got 5ms" {
		t.Fatalf("Validate: %v", err)
	}
	if err := (bulkhead.CoDel{Target: time.Millisecond, Interval: 2 * time.Millisecond}).Validate(); err != nil {
		t.Fatal(err)
	}
}
