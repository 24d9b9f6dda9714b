package bulkheadgrpc_test

import (
	"context"
	"errors"
	"io"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/bulkheadgrpc"
	"github.com/bulkhead-go/bulkhead/registry"
	"github.com/bulkhead-go/bulkhead/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func serverConn(t testing.TB, svc *service, sel bulkheadgrpc.Selector, opts []bulkheadgrpc.Option, dialOpts ...grpc.DialOption) *grpc.ClientConn {
	return start(t, svc, []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(recoverUnary, bulkheadgrpc.UnaryServerInterceptor(sel, opts...)),
		grpc.StreamInterceptor(bulkheadgrpc.StreamServerInterceptor(sel, opts...)),
	}, dialOpts...)
}

// recoverUnary turns a handler's panic into Internal, as a recovery
// interceptor in front of the bulkhead would.
func recoverUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = status.Errorf(codes.Internal, "panic: %v", r)
		}
	}()
	return h(ctx, req)
}

// blockOne starts a unary call that holds the server's only permit, and
// returns its result channel once the handler runs.
func blockOne(t *testing.T, svc *service, cc *grpc.ClientConn) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := unary(context.Background(), cc, unaryMethod, "block")
		done <- err
	}()
	wait(t, svc.entered)
	return done
}

func TestUnaryServerRefusal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []bulkheadgrpc.Option
		code     codes.Code
		min, max int // the pushback trailer's range; min -1 and max -1: "-1"; 0, 0: none
	}{
		{"default", nil, codes.Unavailable, 160, 240},
		{"ResourceExhausted", []bulkheadgrpc.Option{bulkheadgrpc.WithRefusalCode(codes.ResourceExhausted)}, codes.ResourceExhausted, 160, 240},
		{"pushback 1s", []bulkheadgrpc.Option{bulkheadgrpc.WithPushback(time.Second)}, codes.Unavailable, 800, 1200},
		{"pushback max", []bulkheadgrpc.Option{bulkheadgrpc.WithPushback(math.MaxInt64)}, codes.Unavailable,
			math.MaxInt64 / int(time.Millisecond) * 8 / 10, math.MaxInt64 / int(time.Millisecond)}, // at most what a client can hold as a time.Duration
		{"no retry", []bulkheadgrpc.Option{bulkheadgrpc.WithPushback(-1)}, codes.Unavailable, -1, -1},
		{"no pushback", []bulkheadgrpc.Option{bulkheadgrpc.WithPushback(0)}, codes.Unavailable, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService()
			b := newBulkhead(t, "api", 1, 0)
			cc := serverConn(t, svc, bulkheadgrpc.All(b), tc.opts)
			done := blockOne(t, svc, cc)

			var trailer metadata.MD
			_, err := unary(context.Background(), cc, unaryMethod, "hello", grpc.Trailer(&trailer))
			if status.Code(err) != tc.code {
				t.Fatalf("got %v, want code %v", err, tc.code)
			}
			if n := svc.calls.Load(); n != 1 {
				t.Fatalf("handler ran %d times, want 1: a refused call must not reach it", n)
			}
			got := trailer.Get("grpc-retry-pushback-ms")
			if tc.max == 0 {
				if len(got) != 0 {
					t.Fatalf("pushback trailer %q, want none", got)
				}
			} else {
				if len(got) != 1 {
					t.Fatalf("pushback trailer %q, want one value", got)
				}
				ms, err := strconv.Atoi(got[0])
				if err != nil || ms < tc.min || ms > tc.max {
					t.Fatalf("pushback %q, want a number in [%d, %d]", got[0], tc.min, tc.max)
				}
			}
			close(svc.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			checkStats(t, b, 1, 1, 1, 0)
		})
	}
}

// grpc-go's retry policy honours the pushback: a refused call comes back
// after it and succeeds; with a negative pushback it is not retried.
func TestUnaryServerPushbackDrivesClientRetry(t *testing.T) {
	for _, retry := range []bool{true, false} {
		t.Run("retry="+strconv.FormatBool(retry), func(t *testing.T) {
			svc := newService()
			b := newBulkhead(t, "api", 1, 0)
			pushback := 500 * time.Millisecond // long enough for the blocked call to return first
			if !retry {
				pushback = -1
			}
			cc := serverConn(t, svc, bulkheadgrpc.All(b), []bulkheadgrpc.Option{bulkheadgrpc.WithPushback(pushback)},
				grpc.WithDefaultServiceConfig(serviceRetry))
			evs := events(t, b)
			done := blockOne(t, svc, cc)
			go func() {
				next(t, evs, bulkhead.EventRejected)
				close(svc.release) // the refusal is out: free the permit
			}()
			start := time.Now()
			out, err := unary(context.Background(), cc, unaryMethod, "hello")
			if retry && (err != nil || out != "hello") {
				t.Fatalf("with pushback: got %q, %v, want the retry to succeed", out, err)
			}
			// The retry policy's own backoff is 10ms: only the pushback
			// (500ms within ±20%) makes the client wait 400ms or more.
			if d := time.Since(start); retry && d < pushback*8/10 {
				t.Fatalf("with pushback %v: the retry came after %v, so the pushback was not honoured", pushback, d)
			}
			if !retry && status.Code(err) != codes.Unavailable {
				t.Fatalf("with pushback -1: got %q, %v, want Unavailable, not retried", out, err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			want := uint64(1)
			if retry {
				want = 2
			}
			checkStats(t, b, want, 1, want, 0)
		})
	}
}

// One interceptor guards several methods with their own bulkheads; methods
// the selector does not name pass.
func TestServerSelectorPerMethod(t *testing.T) {
	svc := newService()
	unaryB := newBulkhead(t, "unary", 1, 0)
	watchB := newBulkhead(t, "watch", 1, 0)
	bulkheads := map[string]*semaphore.Bulkhead{unaryMethod: unaryB, watchMethod: watchB}
	sel := func(method string) *semaphore.Bulkhead { return bulkheads[method] }
	cc := serverConn(t, svc, sel, nil)
	done := blockOne(t, svc, cc)

	if _, err := unary(context.Background(), cc, unaryMethod, "x"); status.Code(err) != codes.Unavailable {
		t.Fatalf("guarded method: got %v, want Unavailable", err)
	}
	if out, err := unary(context.Background(), cc, otherMethod, "x"); err != nil || out != "x" {
		t.Fatalf("unguarded method: got %q, %v", out, err)
	}
	cs := openStream(t, context.Background(), cc, &watchDesc, watchMethod, "ab")
	for range 2 {
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			t.Fatalf("method with its own bulkhead: %v", err)
		}
	}
	close(svc.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); err == nil {
		t.Fatal("want the end of the stream")
	}
	checkStats(t, unaryB, 1, 1, 1, 0)
	checkStats(t, watchB, 1, 0, 1, 0)
}

// A stream holds its server permit until its handler returns, whatever
// way: a clean end, an error, or the client going away.
func TestStreamServerPermitHeldUntilHandlerReturns(t *testing.T) {
	svc := newService()
	b := newBulkhead(t, "chat", 1, 0)
	cc := serverConn(t, svc, bulkheadgrpc.All(b), nil)
	evs := events(t, b)

	cs, err := cc.NewStream(context.Background(), &chatDesc, chatMethod)
	if err != nil {
		t.Fatal(err)
	}
	cs.SendMsg(wrapperspb.String("hi"))
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
		t.Fatal(err)
	}
	inFlight(t, b, 1)

	// A second stream is refused, with the pushback in its trailer.
	cs2, err := cc.NewStream(context.Background(), &chatDesc, chatMethod)
	if err != nil {
		t.Fatal(err)
	}
	err = cs2.RecvMsg(new(wrapperspb.StringValue))
	if status.Code(err) != codes.Unavailable || len(cs2.Trailer().Get("grpc-retry-pushback-ms")) != 1 {
		t.Fatalf("second stream: got %v, trailer %v; want Unavailable with a pushback", err, cs2.Trailer())
	}

	// A clean end.
	cs.SendMsg(wrapperspb.String("end"))
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); err == nil {
		t.Fatal("want the end of the stream")
	}
	if e := next(t, evs, bulkhead.EventFinished); e.Err != nil {
		t.Fatalf("clean end: event error %v", e.Err)
	}

	// An error.
	cs = openStream(t, context.Background(), cc, &chatDesc, chatMethod, "fail:NotFound")
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.NotFound {
		t.Fatalf("got %v, want NotFound", err)
	}
	if e := next(t, evs, bulkhead.EventFinished); status.Code(e.Err) != codes.NotFound {
		t.Fatalf("error: event error %v, want NotFound", e.Err)
	}

	// The client goes away while the handler blocks.
	ctx, cancel := context.WithCancel(context.Background())
	cs, err = cc.NewStream(ctx, &chatDesc, chatMethod)
	if err != nil {
		t.Fatal(err)
	}
	cs.SendMsg(wrapperspb.String("block"))
	wait(t, svc.entered)
	inFlight(t, b, 1)
	cancel()
	if e := next(t, evs, bulkhead.EventFinished); status.Code(e.Err) != codes.Canceled {
		t.Fatalf("client gone: event error %v, want Canceled", e.Err)
	}
	checkStats(t, b, 3, 1, 3, 2)
}

// A handler that panics returns its permit and counts failed; the panic
// goes on up to whoever recovers it.
func TestUnaryServerPanicReturnsPermit(t *testing.T) {
	svc := newService()
	b := newBulkhead(t, "api", 1, 0)
	cc := serverConn(t, svc, bulkheadgrpc.All(b), nil)
	_, err := unary(context.Background(), cc, unaryMethod, "panic")
	if status.Code(err) != codes.Internal {
		t.Fatalf("got %v, want Internal from the recovery interceptor", err)
	}
	checkStats(t, b, 1, 0, 1, 1)
	if out, err := unary(context.Background(), cc, unaryMethod, "ok"); err != nil || out != "ok" {
		t.Fatalf("after the panic: got %q, %v", out, err)
	}
}

// A call that waits for a permit and whose deadline passes gets
// DeadlineExceeded, not a refusal.
func TestUnaryServerDeadlineWhileWaiting(t *testing.T) {
	svc := newService()
	b := newBulkhead(t, "api", 1, time.Hour)
	cc := serverConn(t, svc, bulkheadgrpc.All(b), nil)
	evs := events(t, b)
	done := blockOne(t, svc, cc)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := unary(ctx, cc, unaryMethod, "x")
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	if e := next(t, evs, bulkhead.EventCancelled); !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
		t.Fatalf("event error %v, want the context's", e.Err)
	}
	close(svc.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestOptionMisusePanics(t *testing.T) {
	for name, f := range map[string]func(){
		"WithRefusalCode(OK)":     func() { bulkheadgrpc.WithRefusalCode(codes.OK) },
		"WithClassifier(nil)":     func() { bulkheadgrpc.WithClassifier(nil) },
		"All(nil)":                func() { bulkheadgrpc.All(nil) },
		"UnaryClientInterceptor":  func() { bulkheadgrpc.UnaryClientInterceptor(nil) },
		"StreamClientInterceptor": func() { bulkheadgrpc.StreamClientInterceptor(nil) },
		"UnaryServerInterceptor":  func() { bulkheadgrpc.UnaryServerInterceptor(nil) },
		"StreamServerInterceptor": func() { bulkheadgrpc.StreamServerInterceptor(nil) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// docs/grpc.md's selector over a registry: a method whose bulkhead the
// configuration does not list passes unguarded, and the registry creates no
// bulkhead for it (without Strict, reg.Semaphore would, one per name).
func TestServerRegistrySelectorLeavesUnconfiguredMethodsUnguarded(t *testing.T) {
	one := 1
	reg, err := registry.New(registry.Config{Semaphores: map[string]registry.SemaphoreSpec{
		"echo-unary": {MaxConcurrentCalls: &one},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())
	names := map[string]string{unaryMethod: "echo-unary", otherMethod: "echo-other", chatMethod: "echo-chat"}
	sel := func(method string) *semaphore.Bulkhead {
		name, ok := names[method]
		if !ok {
			return nil // not mapped: unguarded
		}
		b, ok := reg.Find(bulkhead.Semaphore, name)
		if !ok {
			return nil // not configured: unguarded
		}
		return b.(*semaphore.Bulkhead)
	}
	svc := newService()
	cc := serverConn(t, svc, sel, nil)
	ctx := context.Background()
	for _, m := range []string{unaryMethod, otherMethod} {
		if out, err := unary(ctx, cc, m, "hi"); out != "hi" || err != nil {
			t.Fatalf("%s: got %q, %v", m, out, err)
		}
	}
	watch, err := cc.NewStream(ctx, &watchDesc, watchMethod) // not mapped
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.SendMsg(wrapperspb.String("ab")); err != nil {
		t.Fatal(err)
	}
	watch.CloseSend()
	for err == nil {
		err = watch.RecvMsg(new(wrapperspb.StringValue))
	}
	if err != io.EOF {
		t.Fatalf("watch: %v", err)
	}
	if is := reg.Instances(); len(is) != 1 || is[0].Name() != "echo-unary" {
		t.Fatalf("registry holds %d bulkheads (%v), want only the configured echo-unary", len(is), is)
	}
	b, _ := reg.Find(bulkhead.Semaphore, "echo-unary")
	if s := b.Stats(); s.Permitted != 1 || s.Finished != 1 {
		t.Fatalf("echo-unary: %+v, want the one Unary call", s)
	}
}
