package bulkheadgrpc

import (
	"context"
	"io"
	"runtime"
	"sync/atomic"

	"github.com/bulkhead-go/bulkhead/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// UnaryClientInterceptor returns a client interceptor that holds a permit of
// b for each unary call, waiting for it with the call's context. A call
// refused by b fails without reaching the server, with an error that matches
// bulkhead.ErrBulkheadFull under errors.Is and has code ResourceExhausted; a
// context that ends while the call waits gives Canceled or DeadlineExceeded,
// matching the context's error. The call's outcome is classified as
// [WithClassifier] says. Options for servers are ignored.
func UnaryClientInterceptor(b *semaphore.Bulkhead, opts ...Option) grpc.UnaryClientInterceptor {
	if b == nil {
		panic("bulkheadgrpc: UnaryClientInterceptor called with a nil *semaphore.Bulkhead")
	}
	o := newOptions(opts)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		ctx = o.propagate(ctx)
		p, err := b.AcquirePermit(ctx)
		if err != nil {
			return clientError(err)
		}
		released := false
		defer func() {
			if !released { // invoker or classifier panicked or called Goexit
				p.Release(errAborted)
			}
		}()
		err = invoker(ctx, method, req, reply, cc, callOpts...)
		outcome := o.classify(err)
		released = true
		p.Release(outcome)
		return err
	}
}

// StreamClientInterceptor returns a client interceptor that holds a permit
// of b for each stream, from its start until it ends, because the dependency
// is busy until then. The stream ends, and the permit returns, when:
//
//   - RecvMsg returns io.EOF (a success) or another error (the stream's
//     status, classified), or returns a message of a stream whose server
//     sends only one (the client-streaming kind, whose CloseAndRecv is done);
//   - Header or SendMsg returns an error other than io.EOF;
//   - the call's context ends;
//   - the stream is dropped without any of these: when the garbage collector
//     finds it, the interceptor cancels the stream (freeing what gRPC holds
//     for it) and returns the permit, counting the call finished but not
//     failed (nobody saw its outcome). Read streams to the end or cancel
//     their context: the collector may take long to come.
//
// Rejections and waiting are as for [UnaryClientInterceptor].
func StreamClientInterceptor(b *semaphore.Bulkhead, opts ...Option) grpc.StreamClientInterceptor {
	if b == nil {
		panic("bulkheadgrpc: StreamClientInterceptor called with a nil *semaphore.Bulkhead")
	}
	o := newOptions(opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
		streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		ctx = o.propagate(ctx)
		p, err := b.AcquirePermit(ctx)
		if err != nil {
			return nil, clientError(err)
		}
		sctx, cancel := context.WithCancel(ctx)
		s := &streamPermit{p: p, classify: o.classify, cancel: cancel}
		started := false
		defer func() {
			if !started { // streamer panicked or called Goexit
				s.end(errAborted, false)
			}
		}()
		cs, err := streamer(sctx, desc, cc, method, callOpts...)
		started = true
		if err != nil {
			s.end(err, true)
			return nil, err
		}
		stop := context.AfterFunc(ctx, func() {
			s.end(status.FromContextError(ctx.Err()).Err(), true)
		})
		s.stop.Store(&stop)
		w := &guardedStream{ClientStream: cs, s: s, oneReply: !desc.ServerStreams}
		// The cleanup's argument must not reach w, or w would never be
		// collected.
		w.cleanup = runtime.AddCleanup(w, (*streamPermit).abandon, s)
		return w, nil
	}
}

// streamPermit is the permit of one stream. It must not point to the
// guardedStream, so that a dropped stream can be collected.
type streamPermit struct {
	p        semaphore.Permit
	classify func(error) error
	cancel   context.CancelFunc
	stop     atomic.Pointer[func() bool] // stops the AfterFunc on the caller's context
	done     atomic.Bool
}

// end returns the permit once, with err classified when classify is set.
func (s *streamPermit) end(err error, classify bool) {
	if !s.done.CompareAndSwap(false, true) {
		return
	}
	if stop := s.stop.Load(); stop != nil {
		(*stop)()
	}
	s.cancel() // the stream is over: free its context
	released := false
	defer func() {
		if !released { // the classifier panicked or called Goexit
			s.p.Release(errAborted)
		}
	}()
	if classify {
		err = s.classify(err)
	}
	released = true
	s.p.Release(err)
}

// abandon runs when the stream was collected without having ended.
func (s *streamPermit) abandon() { s.end(nil, false) }

// guardedStream watches a client stream for its end.
type guardedStream struct {
	grpc.ClientStream
	s        *streamPermit
	cleanup  runtime.Cleanup
	oneReply bool // the server sends one message: a nil RecvMsg ends the stream
}

func (g *guardedStream) finish(err error) {
	g.cleanup.Stop()
	g.s.end(err, true)
}

func (g *guardedStream) RecvMsg(m any) error {
	err := g.ClientStream.RecvMsg(m)
	switch {
	case err == io.EOF:
		g.finish(nil)
	case err != nil:
		g.finish(err)
	case g.oneReply:
		g.finish(nil)
	}
	return err
}

func (g *guardedStream) SendMsg(m any) error {
	err := g.ClientStream.SendMsg(m)
	if err != nil && err != io.EOF {
		g.finish(err)
	}
	return err
}

func (g *guardedStream) Header() (metadata.MD, error) {
	md, err := g.ClientStream.Header()
	if err != nil {
		g.finish(err)
	}
	return md, err
}
