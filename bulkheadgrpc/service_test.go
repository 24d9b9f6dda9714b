package bulkheadgrpc_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A hand-written service, so that no generated code is needed. Every
// message is a wrapperspb.StringValue. What a handler does is said by the
// request's text:
//
//	"block"      wait until the test closes release (after closing entered)
//	"fail:CODE"  return that status code (e.g. "fail:Unavailable")
//	"panic"      panic
//	anything     echo it
//
// Stream methods: Chat (bidirectional; each message is handled as above and
// echoed, "end" ends it), Watch (server streaming: sends the request n times
// where n is the text's length, then ends), Sum (client streaming: replies
// once with the concatenation of what it got).
type service struct {
	calls   atomic.Int64  // handler invocations
	entered chan struct{} // receives one value each time a "block" starts
	release chan struct{} // closed by the test to let "block" calls return
}

func newService() *service {
	return &service{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (s *service) handle(ctx context.Context, text string) (string, error) {
	s.calls.Add(1)
	switch {
	case text == "block":
		s.entered <- struct{}{}
		select {
		case <-s.release:
		case <-ctx.Done():
			return "", status.FromContextError(ctx.Err()).Err()
		}
	case text == "panic":
		panic("handler panicked on purpose")
	case strings.HasPrefix(text, "fail:"):
		name := strings.TrimPrefix(text, "fail:")
		for c := codes.OK; c <= codes.Unauthenticated; c++ {
			if c.String() == name {
				return "", status.Error(c, "failed on purpose")
			}
		}
		return "", status.Error(codes.Internal, "unknown code "+name)
	}
	return text, nil
}

const serviceName = "test.Echo"

var (
	chatDesc  = grpc.StreamDesc{StreamName: "Chat", ServerStreams: true, ClientStreams: true}
	watchDesc = grpc.StreamDesc{StreamName: "Watch", ServerStreams: true}
	sumDesc   = grpc.StreamDesc{StreamName: "Sum", ClientStreams: true}
)

const (
	unaryMethod  = "/" + serviceName + "/Unary"
	otherMethod  = "/" + serviceName + "/Other"
	chatMethod   = "/" + serviceName + "/Chat"
	watchMethod  = "/" + serviceName + "/Watch"
	sumMethod    = "/" + serviceName + "/Sum"
	serviceRetry = `{"methodConfig":[{"name":[{"service":"test.Echo"}],"retryPolicy":{
		"maxAttempts":2,"initialBackoff":"0.01s","maxBackoff":"0.01s","backoffMultiplier":1,
		"retryableStatusCodes":["UNAVAILABLE"]}}]}`
)

func unaryHandler(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.StringValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	s := srv.(*service)
	h := func(ctx context.Context, req any) (any, error) {
		out, err := s.handle(ctx, req.(*wrapperspb.StringValue).Value)
		if err != nil {
			return nil, err
		}
		return wrapperspb.String(out), nil
	}
	if icpt == nil {
		return h(ctx, in)
	}
	return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: unaryMethod}, h)
}

func otherHandler(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.StringValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	h := func(ctx context.Context, req any) (any, error) { return req, nil }
	if icpt == nil {
		return h(ctx, in)
	}
	return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: otherMethod}, h)
}

func chatHandler(srv any, ss grpc.ServerStream) error {
	s := srv.(*service)
	for {
		in := new(wrapperspb.StringValue)
		if err := ss.RecvMsg(in); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if in.Value == "end" {
			return nil
		}
		out, err := s.handle(ss.Context(), in.Value)
		if err != nil {
			return err
		}
		if err := ss.SendMsg(wrapperspb.String(out)); err != nil {
			return err
		}
	}
}

func watchHandler(srv any, ss grpc.ServerStream) error {
	in := new(wrapperspb.StringValue)
	if err := ss.RecvMsg(in); err != nil {
		return err
	}
	out, err := srv.(*service).handle(ss.Context(), in.Value)
	if err != nil {
		return err
	}
	for range len(out) {
		if err := ss.SendMsg(wrapperspb.String(out)); err != nil {
			return err
		}
	}
	return nil
}

func sumHandler(srv any, ss grpc.ServerStream) error {
	var sb strings.Builder
	for {
		in := new(wrapperspb.StringValue)
		if err := ss.RecvMsg(in); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		sb.WriteString(in.Value)
	}
	srv.(*service).calls.Add(1)
	return ss.SendMsg(wrapperspb.String(sb.String()))
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Unary", Handler: unaryHandler},
		{MethodName: "Other", Handler: otherHandler},
	},
	Streams: []grpc.StreamDesc{
		{StreamName: "Chat", Handler: chatHandler, ServerStreams: true, ClientStreams: true},
		{StreamName: "Watch", Handler: watchHandler, ServerStreams: true},
		{StreamName: "Sum", Handler: sumHandler, ClientStreams: true},
	},
}

// serve serves svc over an in-memory connection and returns a client
// connection to it, and a function that closes both.
func serve(svc *service, serverOpts []grpc.ServerOption, dialOpts ...grpc.DialOption) (*grpc.ClientConn, func()) {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(serverOpts...)
	srv.RegisterService(&serviceDesc, svc)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	dialOpts = append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, dialOpts...)
	cc, err := grpc.NewClient("passthrough:///bufnet", dialOpts...)
	if err != nil {
		panic(err)
	}
	return cc, func() {
		cc.Close()
		srv.Stop()
		<-served
	}
}

// start is serve for a test: it stops when the test ends.
func start(t testing.TB, svc *service, serverOpts []grpc.ServerOption, dialOpts ...grpc.DialOption) *grpc.ClientConn {
	cc, stop := serve(svc, serverOpts, dialOpts...)
	t.Cleanup(stop)
	return cc
}

func unary(ctx context.Context, cc *grpc.ClientConn, method, text string, opts ...grpc.CallOption) (string, error) {
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(ctx, method, wrapperspb.String(text), out, opts...)
	return out.GetValue(), err
}

// events collects a bulkhead's events on a channel.
func events(t testing.TB, b interface {
	Subscribe(func(bulkhead.Event)) func()
}) <-chan bulkhead.Event {
	ch := make(chan bulkhead.Event, 64)
	t.Cleanup(b.Subscribe(func(e bulkhead.Event) { ch <- e }))
	return ch
}

// next returns the next event of type typ, skipping others.
func next(t testing.TB, ch <-chan bulkhead.Event, typ bulkhead.EventType) bulkhead.Event {
	t.Helper()
	timeout := time.After(10 * time.Second) // guards against a hang only
	for {
		select {
		case e := <-ch:
			if e.Type == typ {
				return e
			}
		case <-timeout:
			t.Fatalf("no %v event within 10s", typ)
		}
	}
}

func wait(t testing.TB, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second): // guards against a hang only
		t.Fatal("timed out")
	}
}
