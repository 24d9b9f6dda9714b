package bulkheadgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/adaptive"
	"github.com/bulkhead-go/bulkhead/bulkheadgrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestDefaultClassifierContextCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want error // the context error the outcome must match
		code codes.Code
	}{
		{status.Error(codes.DeadlineExceeded, "deadline passed"), context.DeadlineExceeded, codes.DeadlineExceeded},
		{status.Error(codes.Canceled, "caller went away"), context.Canceled, codes.Canceled},
		{status.FromContextError(context.DeadlineExceeded).Err(), context.DeadlineExceeded, codes.DeadlineExceeded},
		{context.DeadlineExceeded, context.DeadlineExceeded, codes.DeadlineExceeded},
		{fmt.Errorf("handler: %w", context.Canceled), context.Canceled, codes.Canceled},
	} {
		got := bulkheadgrpc.DefaultClassifier(c.err)
		if !errors.Is(got, c.want) || !errors.Is(got, c.err) {
			t.Errorf("DefaultClassifier(%v) = %v: want an error matching %v and the call's error", c.err, got, c.want)
		}
		if code := status.Code(got); code != c.code && status.Code(c.err) != codes.Unknown {
			t.Errorf("DefaultClassifier(%v) has code %v, want %v", c.err, code, c.code)
		}
		if errors.Is(got, bulkhead.ErrOverloaded) {
			t.Errorf("DefaultClassifier(%v) = %v matches ErrOverloaded", c.err, got)
		}
	}
	if err := status.Error(codes.Internal, "x"); bulkheadgrpc.DefaultClassifier(err) != err {
		t.Errorf("DefaultClassifier changed an Internal error")
	}
}

// windowRecorder is an adaptive.Algorithm that keeps the limit and hands
// every window it is shown to the test.
type windowRecorder chan adaptive.Window

func (w windowRecorder) Update(limit float64, win adaptive.Window) adaptive.Decision {
	select {
	case w <- win:
	default:
	}
	return adaptive.Decision{Limit: limit, Reason: "recorded"}
}

// A call whose deadline passes on the way to the server fails with grpc-go's
// DeadlineExceeded status, which does not wrap context.DeadlineExceeded: the
// adaptive controller must still count it as a timeout.
func TestClientDeadlineIsATimeoutForTheController(t *testing.T) {
	svc := newService()
	defer close(svc.release)
	b := newBulkhead(t, "dep", 4, 0)
	windows := make(windowRecorder, 1)
	ctl, err := adaptive.Attach(b, adaptive.Config{Custom: windows, Window: time.Millisecond, MinSamples: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Detach()
	cc := clientConn(t, svc, b)

	// A call cannot end before its deadline, which is after the window's
	// end: its outcome closes the window (the first outcome may only start
	// the controller's clock, so make two).
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err = unary(ctx, cc, unaryMethod, "block")
		cancel()
		if status.Code(err) != codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the call: got %v, want grpc-go's DeadlineExceeded status, not matching context.DeadlineExceeded", err)
		}
	}
	select {
	case w := <-windows:
		if w.Timeouts != 1 || w.Successes != 0 || w.Drops != 0 || !w.Overloaded() {
			t.Fatalf("window: %+v, want 1 timeout and Overloaded", w)
		}
	default:
		t.Fatalf("no window closed: the timed-out call was not counted (stats %+v)", b.Stats())
	}
}
