package bulkheadgrpc_test

import (
	"context"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/bulkheadgrpc"
	"github.com/bulkhead-go/bulkhead/semaphore"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// IgnoreCurrent: ants (under the registry, which an example uses) starts
// goroutines of its own when it loads.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

func newBulkhead(t testing.TB, name string, max int, wait time.Duration) *semaphore.Bulkhead {
	t.Helper()
	b, err := semaphore.New(name, semaphore.Config{MaxConcurrentCalls: max, MaxWaitDuration: wait})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func clientConn(t testing.TB, svc *service, b *semaphore.Bulkhead, opts ...bulkheadgrpc.Option) *grpc.ClientConn {
	return start(t, svc, nil,
		grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(b, opts...)),
		grpc.WithStreamInterceptor(bulkheadgrpc.StreamClientInterceptor(b, opts...)))
}

func checkStats(t testing.TB, b *semaphore.Bulkhead, permitted, rejected, finished, failed uint64) {
	t.Helper()
	s := b.Stats()
	if s.Permitted != permitted || s.Rejected != rejected || s.Finished != finished || s.Failed != failed || s.InFlight != 0 {
		t.Fatalf("stats: got permitted %d rejected %d finished %d failed %d in flight %d, want %d %d %d %d 0",
			s.Permitted, s.Rejected, s.Finished, s.Failed, s.InFlight, permitted, rejected, finished, failed)
	}
}

func TestUnaryClientAdmitsAndRejects(t *testing.T) {
	svc := newService()
	b := newBulkhead(t, "dep", 1, 0)
	cc := clientConn(t, svc, b)
	ctx := context.Background()

	done := make(chan error, 1)
	go func() {
		_, err := unary(ctx, cc, unaryMethod, "block")
		done <- err
	}()
	wait(t, svc.entered)

	_, err := unary(ctx, cc, unaryMethod, "hello")
	if !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("rejection: got %v, want a match for ErrBulkheadFull", err)
	}
	if got := status.Code(err); got != codes.ResourceExhausted {
		t.Fatalf("rejection code: got %v, want ResourceExhausted", got)
	}
	var fe *bulkhead.FullError
	if !errors.As(err, &fe) || fe.Name != "dep" {
		t.Fatalf("rejection: got %v, want the bulkhead's *FullError", err)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Fatalf("server saw %d calls, want 1: a rejected call must not reach it", n)
	}

	close(svc.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if out, err := unary(ctx, cc, unaryMethod, "hello"); err != nil || out != "hello" {
		t.Fatalf("after release: got %q, %v", out, err)
	}
	checkStats(t, b, 2, 1, 2, 0)
}

func TestUnaryClientContextEndsWhileWaiting(t *testing.T) {
	svc := newService()
	b := newBulkhead(t, "dep", 1, time.Hour)
	cc := clientConn(t, svc, b)
	evs := events(t, b)

	done := make(chan error, 1)
	go func() {
		_, err := unary(context.Background(), cc, unaryMethod, "block")
		done <- err
	}()
	wait(t, svc.entered)

	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() {
		_, err := unary(ctx, cc, unaryMethod, "hello")
		waited <- err
	}()
	for b.Stats().Waiting == 0 {
		runtime.Gosched()
	}
	cancel()
	err := <-waited
	if !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled {
		t.Fatalf("got %v (code %v), want context.Canceled with code Canceled", err, status.Code(err))
	}
	next(t, evs, bulkhead.EventCancelled)
	close(svc.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The outcome of a call is classified: overload codes match ErrOverloaded,
// every non-OK code counts failed.
func TestUnaryClientClassifiesOutcome(t *testing.T) {
	svc := newService()
	close(svc.release)
	b := newBulkhead(t, "dep", 4, 0)
	cc := clientConn(t, svc, b)
	evs := events(t, b)
	for _, tc := range []struct {
		text       string
		failed     bool
		overloaded bool
	}{
		{"hello", false, false},
		{"fail:Unavailable", true, true},
		{"fail:ResourceExhausted", true, true},
		{"fail:InvalidArgument", true, false},
		{"fail:DeadlineExceeded", true, false},
	} {
		_, callErr := unary(context.Background(), cc, unaryMethod, tc.text)
		e := next(t, evs, bulkhead.EventFinished)
		if (e.Err != nil) != tc.failed || errors.Is(e.Err, bulkhead.ErrOverloaded) != tc.overloaded {
			t.Errorf("%s: event error %v, want failed %v, overloaded %v", tc.text, e.Err, tc.failed, tc.overloaded)
		}
		if tc.failed && status.Code(e.Err) != status.Code(callErr) {
			t.Errorf("%s: event error's code %v, want the call's %v", tc.text, status.Code(e.Err), status.Code(callErr))
		}
		if errors.Is(callErr, bulkhead.ErrOverloaded) {
			t.Errorf("%s: the caller's error %v must be the server's status, unchanged", tc.text, callErr)
		}
	}
	checkStats(t, b, 5, 0, 5, 4)
}

func TestWithClassifier(t *testing.T) {
	svc := newService()
	b := newBulkhead(t, "dep", 1, 0)
	onlyInternal := func(err error) error {
		if status.Code(err) == codes.Internal {
			return err
		}
		return nil
	}
	cc := clientConn(t, svc, b, bulkheadgrpc.WithClassifier(onlyInternal))
	unary(context.Background(), cc, unaryMethod, "fail:NotFound")
	unary(context.Background(), cc, unaryMethod, "fail:Internal")
	checkStats(t, b, 2, 0, 2, 1)
}

// openStream opens method's stream and sends text, closing the send side.
func openStream(t *testing.T, ctx context.Context, cc *grpc.ClientConn, desc *grpc.StreamDesc, method, text string) grpc.ClientStream {
	t.Helper()
	cs, err := cc.NewStream(ctx, desc, method)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(wrapperspb.String(text)); err != nil {
		t.Fatal(err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	return cs
}

func inFlight(t *testing.T, b *semaphore.Bulkhead, want int) {
	t.Helper()
	if got := b.Stats().InFlight; got != want {
		t.Fatalf("in flight: got %d, want %d", got, want)
	}
}

// A stream holds its permit until RecvMsg returns io.EOF.
func TestStreamClientPermitUntilEOF(t *testing.T) {
	svc := newService()
	b := newBulkhead(t, "dep", 1, 0)
	cc := clientConn(t, svc, b)
	cs := openStream(t, context.Background(), cc, &watchDesc, watchMethod, "abc")
	for range 3 {
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			t.Fatal(err)
		}
		inFlight(t, b, 1) // every message is in, but the stream has not ended
	}
	_, err := cc.NewStream(context.Background(), &watchDesc, watchMethod)
	if !errors.Is(err, bulkhead.ErrBulkheadFull) || status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second stream: got %v, want a rejection with code ResourceExhausted", err)
	}
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
	checkStats(t, b, 1, 1, 1, 0)
}

// A stream that ends with an error returns its permit, counted failed.
func TestStreamClientPermitOnError(t *testing.T) {
	svc := newService()
	b := newBulkhead(t, "dep", 1, 0)
	cc := clientConn(t, svc, b)
	evs := events(t, b)
	cs := openStream(t, context.Background(), cc, &watchDesc, watchMethod, "fail:Unavailable")
	inFlight(t, b, 1)
	err := cs.RecvMsg(new(wrapperspb.StringValue))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want Unavailable", err)
	}
	if e := next(t, evs, bulkhead.EventFinished); !errors.Is(e.Err, bulkhead.ErrOverloaded) {
		t.Fatalf("event error %v, want a match for ErrOverloaded", e.Err)
	}
	checkStats(t, b, 1, 0, 1, 1)
}

// A client-streaming call is over once its one reply is in: CloseAndRecv
// (CloseSend, then one RecvMsg) returns the permit.
func TestStreamClientPermitAfterSingleReply(t *testing.T) {
	svc := newService()
	b := newBulkhead(t, "dep", 1, 0)
	cc := clientConn(t, svc, b)
	cs := openStream(t, context.Background(), cc, &sumDesc, sumMethod, "abc")
	out := new(wrapperspb.StringValue)
	if err := cs.RecvMsg(out); err != nil || out.Value != "abc" {
		t.Fatalf("got %q, %v", out.Value, err)
	}
	checkStats(t, b, 1, 0, 1, 0)
}

// A stream whose context ends returns its permit without being read.
func TestStreamClientPermitOnContextEnd(t *testing.T) {
	svc := newService()
	b := newBulkhead(t, "dep", 1, 0)
	cc := clientConn(t, svc, b)
	evs := events(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	cs, err := cc.NewStream(ctx, &chatDesc, chatMethod)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(wrapperspb.String("block")); err != nil {
		t.Fatal(err)
	}
	wait(t, svc.entered)
	inFlight(t, b, 1)
	cancel()
	e := next(t, evs, bulkhead.EventFinished)
	if status.Code(e.Err) != codes.Canceled {
		t.Fatalf("event error %v, want code Canceled", e.Err)
	}
	checkStats(t, b, 1, 0, 1, 1)
	close(svc.release)
}

// A stream that is dropped without being read to the end returns its permit
// when the garbage collector finds it, and is cancelled so that gRPC frees
// it too.
func TestStreamClientPermitWhenAbandoned(t *testing.T) {
	svc := newService()
	b := newBulkhead(t, "dep", 1, 0)
	cc := clientConn(t, svc, b)
	evs := events(t, b)
	func() {
		cs, err := cc.NewStream(context.Background(), &chatDesc, chatMethod)
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(wrapperspb.String("block")); err != nil {
			t.Fatal(err)
		}
	}()
	wait(t, svc.entered)
	inFlight(t, b, 1)
	finished := make(chan bulkhead.Event, 1)
	go func() { finished <- next(t, evs, bulkhead.EventFinished) }()
	deadline := time.Now().Add(10 * time.Second) // guards against a hang only
	for {
		runtime.GC()
		select {
		case e := <-finished:
			if e.Err != nil {
				t.Fatalf("abandoned stream: event error %v, want nil", e.Err)
			}
			checkStats(t, b, 1, 0, 1, 0)
			return
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned stream's permit did not come back")
		}
	}
}

// A stream that gRPC fails to start returns its permit at once.
func TestStreamClientPermitWhenStreamerFails(t *testing.T) {
	svc := newService()
	b := newBulkhead(t, "dep", 1, 0)
	cc := clientConn(t, svc, b)
	cc.Close()
	if _, err := cc.NewStream(context.Background(), &chatDesc, chatMethod); status.Code(err) != codes.Canceled {
		t.Fatalf("got %v, want Canceled (connection closing)", err)
	}
	checkStats(t, b, 1, 0, 1, 1)
}

// A classifier that panics cannot strand a permit: the call counts failed
// and the panic goes on up the caller's stack.
func TestClassifierPanicReturnsPermit(t *testing.T) {
	svc := newService()
	b := newBulkhead(t, "dep", 1, 0)
	cc := clientConn(t, svc, b, bulkheadgrpc.WithClassifier(func(error) error { panic("classifier") }))
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if r := recover(); r != "classifier" {
				t.Fatalf("%s: recovered %v, want the classifier's panic", name, r)
			}
		}()
		f()
	}
	mustPanic("unary", func() { unary(context.Background(), cc, unaryMethod, "x") })
	checkStats(t, b, 1, 0, 1, 1)
	cs := openStream(t, context.Background(), cc, &watchDesc, watchMethod, "a")
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
		t.Fatal(err)
	}
	mustPanic("stream", func() { cs.RecvMsg(new(wrapperspb.StringValue)) })
	checkStats(t, b, 2, 0, 2, 2)
}
