package bulkheadgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/bulkheadgrpc"
	"github.com/bulkhead-go/bulkhead/registry"
	"github.com/bulkhead-go/bulkhead/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A client bulkhead of one permit: while one call runs, the next is refused
// without reaching the server, with an error that both bulkhead-aware and
// gRPC-aware code recognise.
func ExampleUnaryClientInterceptor() {
	inventory, _ := semaphore.New("inventory", semaphore.Config{MaxConcurrentCalls: 1})
	svc := newService() // a test service whose "block" calls wait for svc.release
	cc, stop := serve(svc, nil,
		grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(inventory)),
		grpc.WithStreamInterceptor(bulkheadgrpc.StreamClientInterceptor(inventory)))

	go unary(context.Background(), cc, unaryMethod, "block")
	<-svc.entered // the first call holds the permit

	_, err := unary(context.Background(), cc, unaryMethod, "lookup")
	fmt.Println(errors.Is(err, bulkhead.ErrBulkheadFull), status.Code(err))
	close(svc.release)
	stop()
	// Output: true ResourceExhausted
}

// One server interceptor guards two methods with their own bulkheads and
// lets the others pass. A refused call gets Unavailable and a retry
// pushback.
func ExampleUnaryServerInterceptor() {
	lookups, _ := semaphore.New("lookups", semaphore.Config{MaxConcurrentCalls: 1})
	watches, _ := semaphore.New("watches", semaphore.Config{MaxConcurrentCalls: 8})
	byMethod := map[string]*semaphore.Bulkhead{
		"/test.Echo/Unary": lookups,
		"/test.Echo/Watch": watches,
	}
	sel := func(method string) *semaphore.Bulkhead { return byMethod[method] } // nil: unguarded
	svc := newService()
	cc, stop := serve(svc, []grpc.ServerOption{
		grpc.UnaryInterceptor(bulkheadgrpc.UnaryServerInterceptor(sel)),
		grpc.StreamInterceptor(bulkheadgrpc.StreamServerInterceptor(sel)),
	})

	go unary(context.Background(), cc, unaryMethod, "block")
	<-svc.entered

	var trailer metadata.MD
	_, err := unary(context.Background(), cc, unaryMethod, "lookup", grpc.Trailer(&trailer))
	fmt.Println(status.Code(err), len(trailer.Get("grpc-retry-pushback-ms")))
	out, err := unary(context.Background(), cc, otherMethod, "unguarded")
	fmt.Println(out, err)
	close(svc.release)
	stop()
	// Output:
	// Unavailable 1
	// unguarded <nil>
}

// A Selector over a registry configured from YAML: the methods whose
// bulkhead the configuration lists are guarded, the others pass. Find, not
// Semaphore, looks the bulkhead up: without Config.Strict, Semaphore would
// create one from the default config for every name asked for.
func ExampleSelector_registry() {
	cfg, err := registry.Load(strings.NewReader(`
resilience4j:
  bulkhead:
    instances:
      inventory-lookup:
        maxConcurrentCalls: 32
`))
	if err != nil {
		panic(err)
	}
	reg, err := registry.New(cfg)
	if err != nil {
		panic(err)
	}
	defer reg.Close(context.Background())

	names := map[string]string{
		"/shop.Inventory/Lookup": "inventory-lookup",
		"/shop.Inventory/Watch":  "inventory-watch", // mapped, not configured
	}
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
	for _, m := range []string{"/shop.Inventory/Lookup", "/shop.Inventory/Watch", "/grpc.health.v1.Health/Check"} {
		fmt.Println(m, sel(m) != nil)
	}
	fmt.Println("bulkheads in the registry:", len(reg.Instances()))
	// Output:
	// /shop.Inventory/Lookup true
	// /shop.Inventory/Watch false
	// /grpc.health.v1.Health/Check false
	// bulkheads in the registry: 1
}
