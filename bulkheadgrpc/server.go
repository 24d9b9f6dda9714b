package bulkheadgrpc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// UnaryServerInterceptor returns a server interceptor that runs each unary
// call while holding a permit of the bulkhead sel picks for its method, and
// lets calls for which sel returns nil pass. A call waits for a permit as
// the bulkhead's MaxWaitDuration allows, bounded by the call's deadline. A
// call refused for lack of capacity gets codes.Unavailable (or the code of
// [WithRefusalCode]) and a grpc-retry-pushback-ms trailer ([WithPushback]),
// without reaching the handler; a call whose context ends while it waits
// gets Canceled or DeadlineExceeded. The permit is held until the handler
// returns, and the handler's error is classified as [WithClassifier] says.
// A handler that panics returns its permit, counts failed, and the panic
// goes on up.
func UnaryServerInterceptor(sel Selector, opts ...Option) grpc.UnaryServerInterceptor {
	if sel == nil {
		panic("bulkheadgrpc: UnaryServerInterceptor called with a nil Selector")
	}
	o := newOptions(opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx = o.prioritize(ctx)
		b := sel(info.FullMethod)
		if b == nil {
			return handler(ctx, req)
		}
		p, err := b.AcquirePermit(ctx)
		return unary(ctx, o, p, err, req, handler)
	}
}

// StreamServerInterceptor is [UnaryServerInterceptor] for streams: the
// permit is held until the stream's handler returns.
func StreamServerInterceptor(sel Selector, opts ...Option) grpc.StreamServerInterceptor {
	if sel == nil {
		panic("bulkheadgrpc: StreamServerInterceptor called with a nil Selector")
	}
	o := newOptions(opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ss = o.prioritizeStream(ss)
		b := sel(info.FullMethod)
		if b == nil {
			return handler(srv, ss)
		}
		p, err := b.AcquirePermit(ss.Context())
		return stream(o, p, err, srv, ss, handler)
	}
}

// permit is what the interceptors hold: a semaphore's Permit or a keyed
// one's.
type permit interface{ Release(error) }

// unary runs handler holding p, acquired with err: a refusal becomes o's
// status (with its trailer), and p is released with the handler's
// classified outcome, or errAborted if the handler panics or exits.
func unary[P permit](ctx context.Context, o *options, p P, err error, req any, handler grpc.UnaryHandler) (any, error) {
	if err != nil {
		return nil, o.refusal(err, func(md metadata.MD) error { return grpc.SetTrailer(ctx, md) })
	}
	released := false
	defer func() {
		if !released {
			p.Release(errAborted)
		}
	}()
	resp, err := handler(ctx, req)
	outcome := o.classify(err)
	released = true
	p.Release(outcome)
	return resp, err
}

// stream is unary for a stream's handler.
func stream[P permit](o *options, p P, err error, srv any, ss grpc.ServerStream, handler grpc.StreamHandler) error {
	if err != nil {
		return o.refusal(err, func(md metadata.MD) error { ss.SetTrailer(md); return nil })
	}
	released := false
	defer func() {
		if !released {
			p.Release(errAborted)
		}
	}()
	err = handler(srv, ss)
	outcome := o.classify(err)
	released = true
	p.Release(outcome)
	return err
}
