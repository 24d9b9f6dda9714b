package bulkheadgrpc

import (
	"context"
	"strings"

	"github.com/bulkhead-go/bulkhead"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// WithPriorityFromMetadata makes a server interceptor take each call's
// priority from the incoming metadata key, whose value is a priority's name
// ("criticalPlus", "critical", "sheddablePlus", "sheddable"; see
// [bulkhead.Priority.UnmarshalText]): the call waits for its permit with that
// priority, and the handler sees it in its context ([bulkhead.PriorityFrom]),
// from which [WithPriorityPropagation] passes it on. A call without the key,
// or with a value that names no priority, keeps its context's priority
// (Critical if none). Without this option nothing is read from the wire.
// Client interceptors ignore it.
//
// A client that may set the key may claim CriticalPlus for everything: strip
// or overwrite it at the edge of your network (the gateway or proxy that
// faces clients), and set it only from what you trust. An empty key panics.
func WithPriorityFromMetadata(key string) Option {
	key = checkPriorityKey("WithPriorityFromMetadata", key)
	return func(o *options) { o.priorityIn = key }
}

// WithPriorityPropagation makes a client interceptor send the priority of
// each call's context ([bulkhead.PriorityFrom]) in the outgoing metadata key,
// as the SRE book's rule that criticality travels with a request asks, so
// that a server with [WithPriorityFromMetadata] reads it. Critical, the
// default, is not sent, and a key the outgoing metadata already holds is
// left alone. Server interceptors ignore it. An empty key panics.
func WithPriorityPropagation(key string) Option {
	key = checkPriorityKey("WithPriorityPropagation", key)
	return func(o *options) { o.priorityOut = key }
}

func checkPriorityKey(name, key string) string {
	if key == "" {
		panic("bulkheadgrpc: " + name + " called with an empty metadata key")
	}
	return strings.ToLower(key) // metadata keys are lower case on the wire
}

// prioritize returns ctx with the priority its incoming metadata names, or
// ctx itself.
func (o *options) prioritize(ctx context.Context) context.Context {
	if o.priorityIn == "" {
		return ctx
	}
	v := metadata.ValueFromIncomingContext(ctx, o.priorityIn)
	var p bulkhead.Priority
	if len(v) == 0 || p.UnmarshalText([]byte(v[0])) != nil {
		return ctx
	}
	return bulkhead.WithPriority(ctx, p)
}

// prioritizeStream is prioritize for a server stream.
func (o *options) prioritizeStream(ss grpc.ServerStream) grpc.ServerStream {
	if o.priorityIn == "" {
		return ss
	}
	ctx := ss.Context()
	if pctx := o.prioritize(ctx); pctx != ctx {
		return &prioritizedStream{ss, pctx}
	}
	return ss
}

type prioritizedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *prioritizedStream) Context() context.Context { return s.ctx }

// propagate returns ctx with its priority in the outgoing metadata, or ctx
// itself.
func (o *options) propagate(ctx context.Context) context.Context {
	if o.priorityOut == "" {
		return ctx
	}
	p := bulkhead.PriorityFrom(ctx)
	if p == bulkhead.Critical {
		return ctx
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md.Get(o.priorityOut)) > 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, o.priorityOut, p.String())
}
