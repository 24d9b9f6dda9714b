package bulkheadgrpc_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/bulkhead-go/bulkhead/bulkheadgrpc"
	"github.com/bulkhead-go/bulkhead/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// tenant reads the key from metadata: in a test only. A real server takes it
// from an identity an authentication interceptor verified.
func tenant(ctx context.Context, _ string) (string, bool) {
	v := metadata.ValueFromIncomingContext(ctx, "tenant")
	if len(v) == 0 {
		return "", false
	}
	return v[0], true
}

func withTenant(t string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "tenant", t)
}

func TestKeyedServerInterceptorsIsolateTenants(t *testing.T) {
	k, err := semaphore.NewKeyed[string]("tenants", semaphore.KeyedConfig{
		PerKey: semaphore.Config{MaxConcurrentCalls: 1}, MaxConcurrentCalls: 2})
	if err != nil {
		t.Fatal(err)
	}
	svc := newService()
	cc := start(t, svc, []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(recoverUnary, bulkheadgrpc.KeyedUnaryServerInterceptor(k, tenant)),
		grpc.StreamInterceptor(bulkheadgrpc.KeyedStreamServerInterceptor(k, tenant)),
	})
	done := make(chan error, 1)
	go func() {
		_, err := unary(withTenant("noisy"), cc, unaryMethod, "block")
		done <- err
	}()
	wait(t, svc.entered)

	_, err = unary(withTenant("noisy"), cc, unaryMethod, "hello")
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("noisy's second call: %v", err)
	}
	if got, err := unary(withTenant("quiet"), cc, unaryMethod, "hello"); err != nil || got != "hello" {
		t.Fatalf("quiet: %q, %v", got, err)
	}
	if _, err := unary(context.Background(), cc, unaryMethod, "hello"); err != nil { // no key
		t.Fatal(err)
	}
	// A stream of the noisy tenant is refused, the quiet one's runs.
	st, err := cc.NewStream(withTenant("noisy"), &sumDesc, sumMethod)
	if err != nil {
		t.Fatal(err)
	}
	st.CloseSend()
	if err := st.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.Unavailable {
		t.Fatalf("noisy stream: %v", err)
	}
	st, err = cc.NewStream(withTenant("quiet"), &sumDesc, sumMethod)
	if err != nil {
		t.Fatal(err)
	}
	st.SendMsg(wrapperspb.String("a"))
	st.CloseSend()
	if err := st.RecvMsg(new(wrapperspb.StringValue)); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("quiet stream: %v", err)
	}
	close(svc.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s, ks := k.Stats(), k.KeyStats()
	if s.Permitted != 3 || s.Finished != 3 || s.Rejected != 2 || ks.RejectedKey != 2 || ks.ActiveKeys != 0 {
		t.Fatalf("stats %+v, key stats %+v", s, ks)
	}
}

func TestKeyedServerInterceptorsPanicOnNil(t *testing.T) {
	k, _ := semaphore.NewKeyed[string]("t", semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: 1}})
	for want, f := range map[string]func(){
		"bulkheadgrpc: KeyedUnaryServerInterceptor called with a nil *semaphore.Keyed": func() { bulkheadgrpc.KeyedUnaryServerInterceptor(nil, tenant) },
		"bulkheadgrpc: KeyedStreamServerInterceptor called with a nil key function":    func() { bulkheadgrpc.KeyedStreamServerInterceptor(k, nil) },
	} {
		func() {
			defer func() {
				if r := recover(); r != want {
					t.Errorf("panic %v, want %q", r, want)
				}
			}()
			f()
		}()
	}
}
