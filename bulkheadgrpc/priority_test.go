package bulkheadgrpc_test

import (
	"context"
	"io"
	"testing"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/bulkheadgrpc"
	"github.com/bulkhead-go/bulkhead/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A client propagates its context's priority; the server's interceptors
// read it from the metadata into the handler's context, and only when told.
func TestPriorityPropagationAndMetadata(t *testing.T) {
	const key = "X-Bulkhead-Priority"
	seen := make(chan bulkhead.Priority, 1)
	record := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		seen <- bulkhead.PriorityFrom(ctx)
		return h(ctx, req)
	}
	recordStream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		seen <- bulkhead.PriorityFrom(ss.Context())
		return h(srv, ss)
	}
	sb, _ := semaphore.New("server", semaphore.Config{MaxConcurrentCalls: 4})
	kb, _ := semaphore.NewKeyed[string]("tenants", semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: 4}})
	cb, _ := semaphore.New("client", semaphore.Config{MaxConcurrentCalls: 4})
	tenant := func(context.Context, string) (string, bool) { return "t", true }
	in := bulkheadgrpc.WithPriorityFromMetadata(key)
	servers := map[string][]grpc.ServerOption{
		"plain": {grpc.ChainUnaryInterceptor(bulkheadgrpc.UnaryServerInterceptor(bulkheadgrpc.All(sb), in), record),
			grpc.ChainStreamInterceptor(bulkheadgrpc.StreamServerInterceptor(bulkheadgrpc.All(sb), in), recordStream)},
		"keyed": {grpc.ChainUnaryInterceptor(bulkheadgrpc.KeyedUnaryServerInterceptor(kb, tenant, in), record),
			grpc.ChainStreamInterceptor(bulkheadgrpc.KeyedStreamServerInterceptor(kb, tenant, in), recordStream)},
		"not asked": {grpc.ChainUnaryInterceptor(bulkheadgrpc.UnaryServerInterceptor(bulkheadgrpc.All(sb)), record),
			grpc.ChainStreamInterceptor(bulkheadgrpc.StreamServerInterceptor(bulkheadgrpc.All(sb)), recordStream)},
	}
	out := bulkheadgrpc.WithPriorityPropagation(key)
	dial := []grpc.DialOption{grpc.WithChainUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(cb, out)),
		grpc.WithChainStreamInterceptor(bulkheadgrpc.StreamClientInterceptor(cb, out))}
	for name, opts := range servers {
		cc := start(t, newService(), opts, dial...)
		for _, c := range []struct {
			ctx  context.Context
			want bulkhead.Priority
		}{
			{bulkhead.WithPriority(context.Background(), bulkhead.Sheddable), bulkhead.Sheddable},
			{bulkhead.WithPriority(context.Background(), bulkhead.CriticalPlus), bulkhead.CriticalPlus},
			{context.Background(), bulkhead.Critical},
			// Metadata the caller set itself wins over the context's.
			{metadata.AppendToOutgoingContext(bulkhead.WithPriority(context.Background(), bulkhead.Sheddable), key, "sheddablePlus"), bulkhead.SheddablePlus},
			{metadata.AppendToOutgoingContext(context.Background(), key, "urgent"), bulkhead.Critical},
		} {
			want := c.want
			if name == "not asked" {
				want = bulkhead.Critical
			}
			if _, err := unary(c.ctx, cc, unaryMethod, "x"); err != nil {
				t.Fatalf("%s: unary: %v", name, err)
			}
			if got := <-seen; got != want {
				t.Errorf("%s: unary handler saw %v, want %v", name, got, want)
			}
			s, err := cc.NewStream(c.ctx, &watchDesc, watchMethod)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SendMsg(wrapperspb.String("ab")); err != nil {
				t.Fatal(err)
			}
			s.CloseSend()
			for err == nil {
				err = s.RecvMsg(new(wrapperspb.StringValue))
			}
			if err != io.EOF {
				t.Fatalf("%s: stream: %v", name, err)
			}
			if got := <-seen; got != want {
				t.Errorf("%s: stream handler saw %v, want %v", name, got, want)
			}
		}
	}
}

func TestPriorityOptionsPanicOnEmptyKey(t *testing.T) {
	for name, f := range map[string]func(){
		"WithPriorityFromMetadata": func() { bulkheadgrpc.WithPriorityFromMetadata("") },
		"WithPriorityPropagation":  func() { bulkheadgrpc.WithPriorityPropagation("") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s(\"\") did not panic", name)
				}
			}()
			f()
		}()
	}
}
