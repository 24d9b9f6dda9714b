package bulkhead

import (
	"log/slog"
	"strconv"
	"time"
)

// EventType says what happened to a call.
type EventType uint8

const (
	// EventPermitted: the call got a permit (semaphore) or a worker (pool)
	// and is about to run.
	EventPermitted EventType = iota + 1
	// EventRejected: the call was refused because the bulkhead was full.
	EventRejected
	// EventCancelled: the call gave up before running because its context
	// ended, its future was cancelled or the bulkhead was closed.
	EventCancelled
	// EventFinished: a permitted call completed.
	EventFinished
	// EventLimitChanged: the bulkhead's limit (MaxConcurrentCalls) changed,
	// by Reconfigure or by an adaptive controller. Event.Limit is the new
	// limit.
	EventLimitChanged
)

// String returns "permitted", "rejected", "cancelled", "finished",
// "limit changed" or "EventType(n)".
func (t EventType) String() string {
	switch t {
	case EventPermitted:
		return "permitted"
	case EventRejected:
		return "rejected"
	case EventCancelled:
		return "cancelled"
	case EventFinished:
		return "finished"
	case EventLimitChanged:
		return "limit changed"
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// Event is what a bulkhead tells its subscribers about one call. Events are
// built only while someone is subscribed, so a bulkhead with no subscriber
// neither builds them nor reads the clock.
type Event struct {
	// Name and Kind identify the bulkhead.
	Name string
	Kind Kind
	// Type says what happened.
	Type EventType
	// Time is when it happened, with a monotonic clock reading like
	// time.Now's. The bulkheads read only the monotonic clock and add the
	// time elapsed to a time.Now taken at most about a second earlier
	// (one clock read instead of two), so a step of the wall clock shows
	// in Time within about a second (until then, wall times of events
	// stamped on either side of the step may be out of order; Sub, Before
	// and After use the monotonic reading and are exact, as are Wait and
	// Run). Inside a testing/synctest bubble, Time is the bubble's
	// time.Now.
	Time time.Time
	// Err is the rejection (a *FullError) on EventRejected, the reason
	// (a context's error, ErrClosed) on EventCancelled, and the call's own
	// error (nil on success, a *PanicError after a panic) on EventFinished.
	Err error
	// Wait is how long the call waited for a permit or a worker. Zero when
	// it got one at once.
	Wait time.Duration
	// Run is how long the call ran, on EventFinished when the bulkhead saw
	// it start (Do, Execute, a semaphore Permit, bulkheadhttp's Transport
	// and Handler, a pool task); zero otherwise, as after a plain Release.
	Run time.Duration
	// Limit is the new limit on EventLimitChanged, and zero otherwise.
	Limit int
}

// String describes the event in one line, for logs.
func (e Event) String() string {
	s := "bulkhead " + strconv.Quote(e.Name) + " (" + e.Kind.String() + ") " + e.Type.String()
	if e.Wait > 0 {
		s += " wait=" + e.Wait.String()
	}
	if e.Type == EventFinished && e.Run > 0 {
		s += " run=" + e.Run.String()
	}
	if e.Type == EventLimitChanged {
		s += " limit=" + strconv.Itoa(e.Limit)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// LogValue makes an Event a compact group for log/slog, as in
// logger.Info("bulkhead", "event", e): name, kind and type, then wait,
// run, limit and err when they apply. The record's own time stands for
// Time.
func (e Event) LogValue() slog.Value {
	attrs := make([]slog.Attr, 3, 7)
	attrs[0] = slog.String("name", e.Name)
	attrs[1] = slog.String("kind", e.Kind.String())
	attrs[2] = slog.String("type", e.Type.String())
	if e.Wait > 0 {
		attrs = append(attrs, slog.Duration("wait", e.Wait))
	}
	if e.Type == EventFinished && e.Run > 0 {
		attrs = append(attrs, slog.Duration("run", e.Run))
	}
	if e.Type == EventLimitChanged {
		attrs = append(attrs, slog.Int("limit", e.Limit))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", e.Err.Error()))
	}
	return slog.GroupValue(attrs...)
}
