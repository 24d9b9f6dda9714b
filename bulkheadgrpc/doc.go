// Package bulkheadgrpc puts semaphore bulkheads in front of gRPC calls, on
// both sides of the connection.
//
// On the client, [UnaryClientInterceptor] and [StreamClientInterceptor] hold
// a permit of one bulkhead for each call to a dependency:
//
//	conn, err := grpc.NewClient(target,
//		grpc.WithUnaryInterceptor(bulkheadgrpc.UnaryClientInterceptor(inventory)),
//		grpc.WithStreamInterceptor(bulkheadgrpc.StreamClientInterceptor(inventory)))
//
// A call refused by the bulkhead fails with an error that matches
// [bulkhead.ErrBulkheadFull] under errors.Is and has the gRPC code
// ResourceExhausted under status.Code. A stream holds its permit until it
// ends: RecvMsg returns io.EOF or an error, its context ends, or the stream
// is dropped and collected. The outcome of each call is classified like the
// HTTP transport's: by default a ResourceExhausted or Unavailable status from
// the server counts as failed and matches [bulkhead.ErrOverloaded] (adaptive
// limits read it as a drop), and any other non-OK status counts as failed.
//
// On the server, [UnaryServerInterceptor] and [StreamServerInterceptor] admit
// each call through the bulkhead that a [Selector] picks for its method, and
// refuse the others with Unavailable and a grpc-retry-pushback-ms trailer,
// so that clients with a retry policy come back later rather than at once.
// See docs/grpc.md for the choice of codes.
package bulkheadgrpc
