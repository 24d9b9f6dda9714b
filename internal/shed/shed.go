// Package shed holds the rules a line of waiters sheds load by, shared by
// the bulkheads: the order it serves (FIFO, LIFO, adaptive LIFO) and CoDel's
// state. Nothing here locks, reads a clock or starts a goroutine: a
// bulkhead calls it under the lock that guards its line, with the times it
// read (nanoseconds on any one monotonic clock).
package shed

import (
	"fmt"
	"math"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// Line is the shedding state of one line of waiters. Its zero value sheds
// nothing and serves FIFO.
type Line struct {
	order     bulkhead.QueueOrder
	threshold int
	codel     bool
	target    int64 // CoDel's target and interval, in nanoseconds
	interval  int64

	started    bool  // the first interval has begun
	next       int64 // when CoDel's interval ends
	min        int64 // the shortest wait seen in the interval
	overloaded bool
}

// Set configures l, keeping CoDel's state unless its settings changed.
func (l *Line) Set(order bulkhead.QueueOrder, threshold int, codel *bulkhead.CoDel) {
	l.order, l.threshold = order, threshold
	if codel == nil {
		*l = Line{order: order, threshold: threshold}
		return
	}
	c := codel.WithDefaults()
	if !l.codel || l.target != int64(c.Target) || l.interval != int64(c.Interval) {
		*l = Line{order: order, threshold: threshold, codel: true,
			target: int64(c.Target), interval: int64(c.Interval)}
	}
}

// Clocked reports whether l needs the time at each grant (CoDel).
func (l *Line) Clocked() bool { return l.codel }

// LIFO reports whether the line serves its newest waiter first now, with
// waiting callers in line.
func (l *Line) LIFO(waiting int) bool { return LIFO(l.order, l.threshold, waiting, l.overloaded) }

// LIFO reports whether a line in order, with the given LIFOThreshold,
// serves its newest waiter first with waiting callers in line, CoDel
// finding it overloaded or not.
func LIFO(order bulkhead.QueueOrder, threshold, waiting int, overloaded bool) bool {
	switch order {
	case bulkhead.LIFO:
		return true
	case bulkhead.AdaptiveLIFO:
		return threshold > 0 && waiting > threshold || overloaded
	}
	return false
}

// Overloaded reports whether CoDel found the line overloaded in its last
// interval.
func (l *Line) Overloaded() bool { return l.overloaded }

// Serve is called when the line is about to serve a waiter that has waited
// wait, while its oldest waiter has waited oldest (the same in FIFO order),
// at time now. It reports whether CoDel sheds that waiter instead.
//
// CoDel, as folly's: each interval keeps the shortest wait of the line, and
// at its end the line is overloaded if even that was above the target. The
// oldest waiter's wait is the one measured (in FIFO order, the one served),
// so that serving the newest first does not hide a standing line.
func (l *Line) Serve(now, wait, oldest int64) (shed bool) {
	if !l.codel {
		return false
	}
	if !l.started || now >= l.next {
		if l.started, l.next = true, now+l.interval; l.next < now { // an interval near the largest Duration never ends
			l.next = math.MaxInt64
		}
		l.overloaded = l.min > l.target
		l.min = oldest
		return false // the first of an interval is never shed (folly)
	}
	l.min = min(l.min, oldest)
	return l.Stale(wait)
}

// Stale reports whether CoDel, in its state now, sheds a waiter that has
// waited wait: the line is overloaded and wait is above twice the target.
func (l *Line) Stale(wait int64) bool { return l.codel && l.overloaded && wait-l.target > l.target }

// Empty records that the line emptied: a caller who came now would not
// wait, so the interval's shortest wait is 0, and the line stands no more:
// it is not overloaded.
func (l *Line) Empty() { l.min, l.overloaded = 0, false }

// Validate reports what is wrong with a line's rules, as both bulkheads'
// Configs name them: maxWaitingCalls, minDeadlineSlack, queueOrder,
// lifoThreshold and codel.
func Validate(maxWaiting int, slack time.Duration, order bulkhead.QueueOrder, threshold int, codel *bulkhead.CoDel) error {
	switch {
	case maxWaiting < 0:
		return fmt.Errorf("maxWaitingCalls must be >= 0, got %d", maxWaiting)
	case slack < 0:
		return fmt.Errorf("minDeadlineSlack must be >= 0, got %v", slack)
	case order > bulkhead.AdaptiveLIFO:
		return fmt.Errorf("queueOrder must be fifo, lifo or adaptiveLifo, got %v", order)
	case threshold < 0:
		return fmt.Errorf("lifoThreshold must be >= 0, got %d", threshold)
	case threshold > 0 && order != bulkhead.AdaptiveLIFO:
		return fmt.Errorf("lifoThreshold %d applies only to queueOrder adaptiveLifo, got queueOrder %v", threshold, order)
	case order == bulkhead.AdaptiveLIFO && threshold == 0 && codel == nil:
		return fmt.Errorf("queueOrder adaptiveLifo needs lifoThreshold > 0 or codel, got neither")
	case codel != nil:
		return codel.Validate()
	}
	return nil
}
