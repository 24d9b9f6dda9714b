package bulkheadgrpc

import (
	"context"

	"github.com/bulkhead-go/bulkhead/semaphore"
	"google.golang.org/grpc"
)

// KeyedUnaryServerInterceptor is [UnaryServerInterceptor] with a limit per
// key: each call holds the permit of its key in k (and of k's total) until
// the handler returns. key names a call's key from its context and method,
// such as the tenant an authentication interceptor earlier in the chain
// verified; a call for which it returns false has no key and passes
// without a permit. Refusals, pushback and classification are
// UnaryServerInterceptor's.
//
// Take the key from a verified identity (peer certificate, a checked
// token), never from raw metadata the client sets: a client that picks its
// own key can spread its calls over as many keys as it likes, each with a
// fresh limit, up to k's MaxActiveKeys, which then refuses the other
// clients' new keys.
func KeyedUnaryServerInterceptor(k *semaphore.Keyed[string], key func(ctx context.Context, fullMethod string) (string, bool), opts ...Option) grpc.UnaryServerInterceptor {
	checkKeyed("KeyedUnaryServerInterceptor", k, key)
	o := newOptions(opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx = o.prioritize(ctx)
		kk, ok := key(ctx, info.FullMethod)
		if !ok {
			return handler(ctx, req)
		}
		p, err := k.AcquirePermit(ctx, kk)
		return unary(ctx, o, p, err, req, handler)
	}
}

// KeyedStreamServerInterceptor is [KeyedUnaryServerInterceptor] for streams:
// key gets the stream's context, and the permit is held until the stream's
// handler returns.
func KeyedStreamServerInterceptor(k *semaphore.Keyed[string], key func(ctx context.Context, fullMethod string) (string, bool), opts ...Option) grpc.StreamServerInterceptor {
	checkKeyed("KeyedStreamServerInterceptor", k, key)
	o := newOptions(opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ss = o.prioritizeStream(ss)
		kk, ok := key(ss.Context(), info.FullMethod)
		if !ok {
			return handler(srv, ss)
		}
		p, err := k.AcquirePermit(ss.Context(), kk)
		return stream(o, p, err, srv, ss, handler)
	}
}

func checkKeyed(name string, k *semaphore.Keyed[string], key func(context.Context, string) (string, bool)) {
	if k == nil {
		panic("bulkheadgrpc: " + name + " called with a nil *semaphore.Keyed")
	}
	if key == nil {
		panic("bulkheadgrpc: " + name + " called with a nil key function")
	}
}
