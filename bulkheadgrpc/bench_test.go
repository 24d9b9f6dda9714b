package bulkheadgrpc_test

import (
	"context"
	"testing"

	"github.com/bulkhead-go/bulkhead/bulkheadgrpc"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The interceptors' cost beside a unary call over an in-memory connection:
// compare the three with benchstat.
func BenchmarkUnary(b *testing.B) {
	sem := newBulkhead(b, "bench", 1024, 0)
	for _, bc := range []struct {
		name   string
		server []grpc.ServerOption
		dial   []grpc.DialOption
	}{
		{"bare", nil, nil},
		{"client", nil, []grpc.DialOption{grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(sem))}},
		{"server", []grpc.ServerOption{grpc.UnaryInterceptor(bulkheadgrpc.UnaryServerInterceptor(bulkheadgrpc.All(sem)))}, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cc := start(b, newService(), bc.server, bc.dial...)
			in, out := wrapperspb.String("x"), new(wrapperspb.StringValue)
			ctx := context.Background()
			for b.Loop() {
				if err := cc.Invoke(ctx, unaryMethod, in, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
