package bulkheadgrpc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Option configures an interceptor. Options that apply to one side only say
// so and are ignored by the other.
type Option func(*options)

type options struct {
	classify func(error) error
	code     codes.Code
	pushback time.Duration
	// The metadata keys of WithPriorityFromMetadata and
	// WithPriorityPropagation; empty for none.
	priorityIn, priorityOut string
}

// DefaultPushback is the retry pushback a server interceptor sends with a
// refusal unless [WithPushback] says otherwise.
const DefaultPushback = 200 * time.Millisecond

func newOptions(opts []Option) *options {
	o := &options{classify: DefaultClassifier, code: codes.Unavailable, pushback: DefaultPushback}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// WithClassifier replaces [DefaultClassifier]. fn receives the error the call
// ended with (nil on success) and returns the outcome to record: nil counts
// the call as a success, anything else counts it failed and is carried by
// the call's bulkhead.EventFinished. fn must be quick and safe for
// concurrent use. A nil fn panics.
func WithClassifier(fn func(err error) error) Option {
	if fn == nil {
		panic("bulkheadgrpc: WithClassifier called with a nil function")
	}
	return func(o *options) { o.classify = fn }
}

// WithRefusalCode sets the code a server interceptor refuses calls with when
// the bulkhead is full: codes.Unavailable (the default) or
// codes.ResourceExhausted; docs/grpc.md explains the difference. Other codes
// panic.
func WithRefusalCode(c codes.Code) Option {
	if c != codes.Unavailable && c != codes.ResourceExhausted {
		panic("bulkheadgrpc: WithRefusalCode(" + c.String() + "): the code must be Unavailable or ResourceExhausted")
	}
	return func(o *options) { o.code = c }
}

// WithPushback sets the grpc-retry-pushback-ms trailer that a server
// interceptor sends with a refusal. A positive d asks a client whose retry
// policy covers the refusal code to retry after about d: the value sent is
// d within ±20%, so that refused clients do not come back in step, in whole
// milliseconds, at least 1 and at most the largest time.Duration (more
// would overflow grpc-go's conversion and make the client retry at once).
// A negative d asks it not to retry; zero sends no trailer, leaving the
// client to its own backoff. The default is [DefaultPushback].
func WithPushback(d time.Duration) Option {
	return func(o *options) { o.pushback = d }
}

// DefaultClassifier is the outcome classifier used unless [WithClassifier]
// replaces it. It returns nil for a nil error or status OK; for
// ResourceExhausted and Unavailable (the dependency refused the call for
// lack of capacity, or could not be reached) an error matching both
// [bulkhead.ErrOverloaded] and err; for DeadlineExceeded and Canceled an
// error matching both err and context.DeadlineExceeded or context.Canceled,
// so that an adaptive controller counts a call whose deadline passed as a
// timeout; and err itself for every other code.
func DefaultClassifier(err error) error {
	var ctxErr error
	switch status.Code(err) {
	case codes.OK:
		return nil
	case codes.ResourceExhausted, codes.Unavailable:
		return fmt.Errorf("%w: %w", bulkhead.ErrOverloaded, err)
	case codes.DeadlineExceeded:
		ctxErr = context.DeadlineExceeded
	case codes.Canceled:
		ctxErr = context.Canceled
	default:
		return err
	}
	// grpc-go's status errors for an ended context do not wrap the
	// context's error; ctx.Err() and the interceptors' own errors do.
	if errors.Is(err, ctxErr) {
		return err
	}
	return fmt.Errorf("%w: %w", ctxErr, err)
}

// statusError is an error from the bulkhead (a rejection, a context that
// ended while waiting) that gRPC code also recognises: status.Code reads
// code from it, and errors.Is sees err through it.
type statusError struct {
	code codes.Code
	err  error
}

func (e *statusError) Error() string {
	return "rpc error: code = " + e.code.String() + " desc = " + e.err.Error()
}

func (e *statusError) Unwrap() error { return e.err }

// GRPCStatus lets status.Code and status.FromError read the code.
func (e *statusError) GRPCStatus() *status.Status { return status.New(e.code, e.err.Error()) }

// clientError turns an error of AcquirePermit into the error a client call
// returns: a rejection gets ResourceExhausted, a context's error Canceled or
// DeadlineExceeded.
func clientError(err error) error {
	code := codes.ResourceExhausted
	if !errors.Is(err, bulkhead.ErrBulkheadFull) {
		code = status.FromContextError(err).Code()
	}
	return &statusError{code, err}
}

// refusal turns an error of AcquirePermit into the status a server returns,
// with the pushback trailer for a rejection.
func (o *options) refusal(err error, setTrailer func(metadata.MD) error) error {
	if !errors.Is(err, bulkhead.ErrBulkheadFull) {
		return status.FromContextError(err).Err()
	}
	if o.pushback != 0 {
		ms := int64(-1)
		if o.pushback > 0 {
			ms = pushbackMillis(o.pushback, rand.Float64())
		}
		// The refusal is returned before any header is sent, so it goes
		// out as a trailers-only response: the only kind whose pushback
		// grpc-go's retry reads.
		_ = setTrailer(metadata.Pairs(pushbackKey, strconv.FormatInt(ms, 10)))
	}
	return status.Error(o.code, err.Error())
}

const pushbackKey = "grpc-retry-pushback-ms"

// maxPushbackMs is the largest pushback a client can hold: grpc-go
// multiplies the value by time.Millisecond into a time.Duration.
const maxPushbackMs = math.MaxInt64 / int64(time.Millisecond)

// pushbackMillis is d within ±20% (r in [0, 1) picks where), in whole
// milliseconds, at least 1 and at most maxPushbackMs.
func pushbackMillis(d time.Duration, r float64) int64 {
	ms := float64(d) / float64(time.Millisecond) * (0.8 + 0.4*r)
	return int64(min(max(ms, 1), float64(maxPushbackMs)))
}

// errAborted is the outcome of a call whose handler or invoker panicked or
// called runtime.Goexit: the permit is returned and the call counted failed,
// and the panic goes on up.
var errAborted = errors.New("bulkheadgrpc: call ended by a panic or runtime.Goexit")

// Selector picks the bulkhead that guards a method, from its full name
// ("/package.Service/Method"), or returns nil to let the call pass
// unguarded. It is called once per call, so it must be quick and safe for
// concurrent use. A selector over a registry, which guards the methods
// whose bulkhead (named after the method) the configuration lists:
//
//	func(method string) *semaphore.Bulkhead {
//		b, ok := reg.Find(bulkhead.Semaphore, method)
//		if !ok {
//			return nil // not configured: unguarded
//		}
//		return b.(*semaphore.Bulkhead)
//	}
//
// Find never creates a bulkhead; reg.Semaphore, without Config.Strict,
// would create one for every method, health checks included.
type Selector func(fullMethod string) *semaphore.Bulkhead

// All returns a [Selector] that guards every method with b.
func All(b *semaphore.Bulkhead) Selector {
	if b == nil {
		panic("bulkheadgrpc: All called with a nil *semaphore.Bulkhead")
	}
	return func(string) *semaphore.Bulkhead { return b }
}
