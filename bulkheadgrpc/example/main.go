// Command example runs a gRPC service guarded by bulkheads on both sides,
// end to end over 127.0.0.1, and prints what each bulkhead saw.
//
// The server guards its two methods with their own bulkheads through one
// pair of interceptors (a Selector), and refuses what does not fit with
// Unavailable and a retry pushback. The client guards its calls to the
// service with a bulkhead of its own, and its retry policy (a service
// config) comes back after the pushback. The service is described by hand
// (no generated code): a unary Lookup and a server-streaming Watch, whose
// messages are wrapperspb.StringValue.
//
//	go run ./example
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/bulkheadgrpc"
	"github.com/bulkhead-go/bulkhead/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The service: Lookup takes 20 ms of work; Watch sends five updates, 10 ms
// apart.
var inventoryDesc = grpc.ServiceDesc{
	ServiceName: "demo.Inventory",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Lookup", Handler: func(srv any, ctx context.Context,
		dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		lookup := func(ctx context.Context, req any) (any, error) {
			select {
			case <-time.After(20 * time.Millisecond): // the work
			case <-ctx.Done():
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			return wrapperspb.String(req.(*wrapperspb.StringValue).Value + ": 7 in stock"), nil
		}
		info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/demo.Inventory/Lookup"}
		if icpt == nil {
			return lookup(ctx, in)
		}
		return icpt(ctx, in, info, lookup)
	}}},
	Streams: []grpc.StreamDesc{{StreamName: "Watch", ServerStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
		in := new(wrapperspb.StringValue)
		if err := ss.RecvMsg(in); err != nil {
			return err
		}
		for i := range 5 {
			if i > 0 {
				time.Sleep(10 * time.Millisecond) // updates come over time
			}
			if err := ss.SendMsg(wrapperspb.String(fmt.Sprintf("%s: update %d", in.Value, i+1))); err != nil {
				return err
			}
		}
		return nil
	}}},
}

var watchDesc = grpc.StreamDesc{StreamName: "Watch", ServerStreams: true}

// retry is the client's retry policy: a refusal with Unavailable is tried
// again, after the server's pushback.
const retry = `{"methodConfig":[{"name":[{"service":"demo.Inventory"}],"retryPolicy":{
	"maxAttempts":4,"initialBackoff":"0.05s","maxBackoff":"1s","backoffMultiplier":2,
	"retryableStatusCodes":["UNAVAILABLE"]}}]}`

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	// Server side: one bulkhead per method, picked by a Selector (a
	// registry's reg.Semaphore(name) works the same way).
	lookups, err := semaphore.New("lookups", semaphore.Config{MaxConcurrentCalls: 2})
	if err != nil {
		return err
	}
	watches, err := semaphore.New("watches", semaphore.Config{MaxConcurrentCalls: 1})
	if err != nil {
		return err
	}
	byMethod := map[string]*semaphore.Bulkhead{
		"/demo.Inventory/Lookup": lookups,
		"/demo.Inventory/Watch":  watches,
	}
	sel := func(method string) *semaphore.Bulkhead { return byMethod[method] }
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(bulkheadgrpc.UnaryServerInterceptor(sel, bulkheadgrpc.WithPushback(50*time.Millisecond))),
		grpc.StreamInterceptor(bulkheadgrpc.StreamServerInterceptor(sel)))
	srv.RegisterService(&inventoryDesc, struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() {
		srv.GracefulStop()
		<-served
	}()

	// Client side: a bulkhead for calls to the inventory service.
	client, err := semaphore.New("inventory-client", semaphore.Config{MaxConcurrentCalls: 4})
	if err != nil {
		return err
	}
	cc, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(retry),
		grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(client)),
		grpc.WithStreamInterceptor(bulkheadgrpc.StreamClientInterceptor(client)))
	if err != nil {
		return err
	}
	defer cc.Close()

	// A burst of 10 lookups: the client lets 4 through at a time and
	// refuses the rest at once; the server runs 2 at a time and pushes the
	// others back, and the client's retry policy brings them back.
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for i := range 10 {
		wg.Go(func() {
			out := new(wrapperspb.StringValue)
			err := cc.Invoke(ctx, "/demo.Inventory/Lookup", wrapperspb.String(fmt.Sprintf("sku-%d", i)), out)
			var what string
			switch {
			case err == nil:
				what = "ok"
			case errors.Is(err, bulkhead.ErrBulkheadFull):
				what = "refused by the client's bulkhead (" + status.Code(err).String() + ")"
			default:
				what = "failed: " + status.Code(err).String()
			}
			mu.Lock()
			outcomes[what]++
			mu.Unlock()
		})
	}
	wg.Wait()
	fmt.Println("burst of 10 lookups:")
	for _, what := range slices.Sorted(maps.Keys(outcomes)) {
		fmt.Printf("  %2d %s\n", outcomes[what], what)
	}

	// A stream holds its permits, on both sides, until it ends.
	first, err := watch(ctx, cc, "sku-1")
	if err != nil {
		return err
	}
	out := new(wrapperspb.StringValue)
	if err := first.RecvMsg(out); err != nil {
		return err
	}
	fmt.Printf("first watch: %q; streams in flight: client %d, server %d\n",
		out.Value, client.Stats().InFlight, watches.Stats().InFlight)

	// The server has one permit for watches: a second watch is refused
	// while the first runs, and the client's retry policy brings it back
	// after the pushback, once the first is over.
	second, err := watch(ctx, cc, "sku-2")
	if err != nil {
		return err
	}
	if err := second.RecvMsg(out); err != nil {
		return err
	}
	fmt.Printf("second watch, refused %d time(s) first: %q\n", watches.Stats().Rejected, out.Value)
	for _, cs := range []grpc.ClientStream{first, second} {
		for {
			if err := cs.RecvMsg(out); err == io.EOF {
				break
			} else if err != nil {
				return err
			}
		}
	}
	fmt.Printf("both watches read to the end; streams in flight: client %d, server %d\n",
		client.Stats().InFlight, watches.Stats().InFlight)

	for _, b := range []*semaphore.Bulkhead{client, lookups, watches} {
		s := b.Stats()
		fmt.Printf("%-16s permitted %2d  rejected %2d  finished %2d  failed %d\n",
			s.Name, s.Permitted, s.Rejected, s.Finished, s.Failed)
	}
	return nil
}

// watch starts a Watch stream for sku.
func watch(ctx context.Context, cc *grpc.ClientConn, sku string) (grpc.ClientStream, error) {
	cs, err := cc.NewStream(ctx, &watchDesc, "/demo.Inventory/Watch")
	if err != nil {
		return nil, err
	}
	if err := cs.SendMsg(wrapperspb.String(sku)); err != nil {
		return nil, err
	}
	return cs, cs.CloseSend()
}
