package bulkhead

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// ErrBulkheadFull is matched by every rejection for lack of capacity, whether
// the call was refused at once or after waiting (a semaphore's
// MaxWaitDuration, a pool's QueueTimeout).
var ErrBulkheadFull = errors.New("bulkhead: full")

// ErrClosed is returned for work offered to a bulkhead that has been closed,
// and completes the futures of queued tasks that Close dropped.
var ErrClosed = errors.New("bulkhead: closed")

// ErrOverloaded is matched by the outcome of a call that the dependency
// itself refused for lack of capacity: an HTTP 503 seen by
// bulkheadhttp.Transport (and a 429, with a classifier that counts it as a
// failure), a gRPC ResourceExhausted or Unavailable seen by the gRPC client
// interceptors. Such a call counts as failed; adaptive limits
// take it as the signal to lower the limit.
var ErrOverloaded = errors.New("bulkhead: dependency overloaded")

// Kind says which kind of bulkhead an instance is.
type Kind uint8

const (
	// Semaphore is a bulkhead that runs calls on the caller's goroutine.
	Semaphore Kind = iota + 1
	// Pool is a bulkhead that runs tasks on its own worker goroutines.
	Pool
)

// String returns "semaphore", "pool" or "Kind(n)".
func (k Kind) String() string {
	switch k {
	case Semaphore:
		return "semaphore"
	case Pool:
		return "pool"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// FullError is the error of a call rejected for lack of capacity. It matches
// [ErrBulkheadFull] under [errors.Is]. Bulkheads build their FullError values
// ahead of time and return the same pointer for every rejection, so a
// rejection does not allocate; treat it as read-only.
type FullError struct {
	// Name is the bulkhead's name.
	Name string
	// Kind is the bulkhead's kind.
	Kind Kind
	// MaxConcurrentCalls is the limit in force when the error was built:
	// permits for a semaphore, workers for a pool. For a keyed bulkhead it
	// is the limit that refused: the key's (ReasonKey), the total
	// (ReasonTotal) or MaxActiveKeys (ReasonKeys).
	MaxConcurrentCalls int
	// QueueCapacity is the pool's queue capacity; 0 for a semaphore.
	QueueCapacity int
	// MaxWaitDuration is how long the call could wait before it was
	// rejected: the semaphore's MaxWaitDuration, the pool's QueueTimeout.
	MaxWaitDuration time.Duration
	// Waited is true when the call waited (a semaphore caller for a
	// permit, a pool task in the queue) before it was rejected: that long,
	// or less when a rule of the line refused it (ReasonWaiters,
	// ReasonDeadline, ReasonCoDel, ReasonDisplaced); false when it was
	// refused at once.
	Waited bool
	// Reason says why the call was refused; it is never ReasonNone.
	Reason Reason
}

// Reason says why a bulkhead refused a call. Every reason's refusal matches
// [ErrBulkheadFull]; the zero value, ReasonNone, is never a refusal's.
type Reason uint8

const (
	// ReasonNone is the zero Reason: no refusal.
	ReasonNone Reason = iota
	// ReasonFull: refused at once, every permit (every worker and queue
	// slot) taken.
	ReasonFull
	// ReasonTimeout: waited MaxWaitDuration (a pool task: QueueTimeout)
	// without a permit.
	ReasonTimeout
	// ReasonWaiters: too many callers were waiting already (MaxWaitingCalls).
	ReasonWaiters
	// ReasonDeadline: the caller's deadline was nearer than MinDeadlineSlack.
	ReasonDeadline
	// ReasonCoDel: shed by CoDel while the queue stood above its target.
	ReasonCoDel
	// ReasonKey: a keyed bulkhead's limit for that key.
	ReasonKey
	// ReasonTotal: a keyed bulkhead's shared total.
	ReasonTotal
	// ReasonKeys: a keyed bulkhead already had MaxActiveKeys keys.
	ReasonKeys
	// ReasonPriority: the capacity left is reserved for higher priorities.
	ReasonPriority
	// ReasonDisplaced: a queued task or a waiting caller pushed out by one
	// of a higher priority (pool Displace; a semaphore's full line of
	// waiters, MaxWaitingCalls).
	ReasonDisplaced
)

// Reasons lists every Reason a refusal can carry, in order.
var Reasons = [...]Reason{ReasonFull, ReasonTimeout, ReasonWaiters, ReasonDeadline, ReasonCoDel,
	ReasonKey, ReasonTotal, ReasonKeys, ReasonPriority, ReasonDisplaced}

var reasonNames = [...]string{"none", "full", "timeout", "waiters", "deadline", "codel",
	"key", "total", "keys", "priority", "displaced"}

// String returns the reason's metric label: "full", "timeout", "waiters",
// "deadline", "codel", "key", "total", "keys", "priority", "displaced",
// "none" for ReasonNone, or "Reason(n)".
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// Error names the bulkhead and its limits, for example
// `bulkhead "payment" (semaphore) is full (maxConcurrentCalls 2)`,
// `bulkhead "tenants" (semaphore) is full (maxConcurrentCalls 2) for this
// key` or
// `bulkhead "lookups" (pool) is full (maxWorkers 4, queueCapacity 10): task
// not started within 1s`.
func (e *FullError) Error() string {
	var s string
	if e.Kind == Pool {
		s = fmt.Sprintf("bulkhead %q (pool) is full (maxWorkers %d, queueCapacity %d)",
			e.Name, e.MaxConcurrentCalls, e.QueueCapacity)
	} else {
		s = fmt.Sprintf("bulkhead %q (%s) is full (maxConcurrentCalls %d)", e.Name, e.Kind, e.MaxConcurrentCalls)
	}
	switch e.Reason { // a keyed bulkhead's: which of its limits
	case ReasonKey:
		s += " for this key"
	case ReasonTotal:
		s += " in total"
	case ReasonKeys:
		s = fmt.Sprintf("bulkhead %q (%s) is full: too many active keys (maxActiveKeys %d)", e.Name, e.Kind, e.MaxConcurrentCalls)
	}
	switch { // the line's rules: why it did not wait, or stopped waiting
	case e.Reason == ReasonWaiters && e.Waited:
		return s + ": a waiter, dropped from the full line for a newer caller (maxWaitingCalls)"
	case e.Reason == ReasonWaiters:
		return s + ": too many callers waiting (maxWaitingCalls)"
	case e.Reason == ReasonDeadline && e.Waited:
		return s + ": its deadline came within minDeadlineSlack while it waited"
	case e.Reason == ReasonDeadline:
		return s + ": its deadline is nearer than minDeadlineSlack"
	case e.Reason == ReasonCoDel:
		return s + ": shed by CoDel, the line stood above its target wait"
	case e.Reason == ReasonDisplaced:
		return s + ": pushed out of the line by a call of higher priority"
	}
	if e.Waited {
		if e.Kind == Pool {
			s += fmt.Sprintf(": task not started within %v", e.MaxWaitDuration)
		} else {
			s += fmt.Sprintf(": no permit within %v", e.MaxWaitDuration)
		}
	}
	return s
}

// Is reports whether target is [ErrBulkheadFull].
func (e *FullError) Is(target error) bool { return target == ErrBulkheadFull }

// PanicError is the error of a call or task that panicked. Find it with
// [errors.As]. If the panic value is an error, Unwrap returns it, so
// [errors.Is] sees through the panic.
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the panicking goroutine's stack, as [runtime/debug.Stack]
	// formats it.
	Stack []byte
}

// Error returns "bulkhead: task panicked: " followed by the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("bulkhead: task panicked: %v", e.Value) }

// Unwrap returns the panic value if it is an error, and nil otherwise.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Stats is a snapshot of a bulkhead's state and counters. Both kinds fill in
// the same fields with the same meanings. At rest (nothing running or
// waiting) every field is exact and Permitted == Finished + InFlight; while
// calls run, counters of different outcomes (Rejected beside Permitted, say)
// may be read a few calls apart. Its JSON names are the registry status
// page's "stats" (docs/metrics.md).
type Stats struct {
	// Name is the bulkhead's name.
	Name string `json:"-"`
	// Kind is the bulkhead's kind.
	Kind Kind `json:"-"`

	// MaxConcurrentCalls is the limit in force: permits for a semaphore,
	// workers for a pool.
	MaxConcurrentCalls int `json:"maxConcurrentCalls"`
	// AvailableConcurrentCalls is max(0, MaxConcurrentCalls - InFlight).
	AvailableConcurrentCalls int `json:"availableConcurrentCalls"`
	// InFlight is the number of calls running now (for a pool, tasks
	// running on a worker, not idle workers).
	InFlight int `json:"inFlight"`
	// Waiting is the number of callers waiting: for a permit (semaphore),
	// or for room in the queue (pool Go callers).
	Waiting int `json:"waiting"`
	// QueueDepth is the number of tasks waiting in the queue (pool).
	QueueDepth int `json:"queueDepth"`
	// QueueCapacity is the queue's capacity (pool); 0 for a semaphore.
	QueueCapacity int `json:"queueCapacity"`

	// Permitted counts calls that got to run (a permit, a worker).
	Permitted uint64 `json:"permitted"`
	// Rejected counts calls refused because the bulkhead was full, at once
	// or after waiting (MaxWaitDuration, or a pool's QueueTimeout).
	Rejected uint64 `json:"rejected"`
	// RejectedBy counts the same calls by the Reason of their refusal
	// (indexed by Reason); they add up to Rejected. (A keyed bulkhead
	// counts its reasons in its KeyStats instead.)
	RejectedBy [len(Reasons) + 1]uint64 `json:"-"`
	// Cancelled counts calls that gave up before running because their
	// context ended (or, in a pool, whose future was cancelled or which
	// Close dropped).
	Cancelled uint64 `json:"cancelled"`
	// Finished counts permitted calls that completed, whatever the outcome.
	Finished uint64 `json:"finished"`
	// Failed counts finished calls whose function returned an error,
	// panicked or called runtime.Goexit (in both kinds alike).
	Failed uint64 `json:"failed"`

	// Overloaded is true while CoDel finds the line of waiters overloaded.
	Overloaded bool `json:"codelOverloaded,omitempty"`
	// LIFO is true while the line serves its newest waiter first
	// (QueueOrder LIFO, or AdaptiveLIFO switched to it).
	LIFO bool `json:"lifo,omitempty"`
}

// LogValue makes a Stats a compact group for log/slog, as in
// logger.Info("bulkhead", "stats", b.Stats()): name, kind, the limit, the
// calls in flight and waiting (queued, with the queue's capacity, for a
// pool), and the counters.
func (s Stats) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("name", s.Name),
		slog.String("kind", s.Kind.String()),
		slog.Int("limit", s.MaxConcurrentCalls),
		slog.Int("in_flight", s.InFlight))
	if s.Kind == Pool {
		attrs = append(attrs, slog.Int("queued", s.QueueDepth), slog.Int("queue_capacity", s.QueueCapacity))
	} else {
		attrs = append(attrs, slog.Int("waiting", s.Waiting))
	}
	attrs = append(attrs,
		slog.Uint64("permitted", s.Permitted),
		slog.Uint64("rejected", s.Rejected),
		slog.Uint64("cancelled", s.Cancelled),
		slog.Uint64("finished", s.Finished),
		slog.Uint64("failed", s.Failed))
	return slog.GroupValue(attrs...)
}

// Instance is what both kinds of bulkhead have in common.
type Instance interface {
	Name() string
	Stats() Stats
}
