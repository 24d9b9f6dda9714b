package bulkhead

import (
	"fmt"
	"strconv"
	"time"
)

// QueueOrder is the order in which a bulkhead's waiters are served: callers
// waiting for a permit (semaphore), tasks waiting for a worker (pool).
type QueueOrder uint8

const (
	// FIFO serves the oldest waiter first. It is the zero QueueOrder.
	FIFO QueueOrder = iota
	// LIFO serves the newest waiter first, whose caller is the likeliest
	// to be still waiting for the answer; the oldest wait out their
	// bounded wait and are refused.
	LIFO
	// AdaptiveLIFO is FIFO while the line is short and healthy, and LIFO
	// while it is longer than the LIFOThreshold or CoDel reports it
	// overloaded.
	AdaptiveLIFO
)

// String returns "fifo", "lifo", "adaptiveLifo" (the spellings of the YAML
// key queueOrder) or "QueueOrder(n)".
func (o QueueOrder) String() string {
	switch o {
	case FIFO:
		return "fifo"
	case LIFO:
		return "lifo"
	case AdaptiveLIFO:
		return "adaptiveLifo"
	}
	return "QueueOrder(" + strconv.Itoa(int(o)) + ")"
}

// CoDel is controlled delay for a bulkhead's line of waiters, as folly
// applies it to server queues: the line is overloaded once the shortest wait
// of the calls served in an Interval stays above Target, and while it is, a
// waiter that has waited more than twice the Target is refused with
// [ReasonCoDel] instead of served. A burst that drains within an Interval
// sheds nothing.
type CoDel struct {
	// Target is the wait a healthy line stays under; 0 means 5ms.
	Target time.Duration
	// Interval is how long the shortest wait must stay above Target
	// before the line counts as overloaded; 0 means 100ms. It must be
	// longer than Target.
	Interval time.Duration
}

// WithDefaults returns c with zero fields set to folly's defaults, 5ms
// and 100ms.
func (c CoDel) WithDefaults() CoDel {
	if c.Target == 0 {
		c.Target = 5 * time.Millisecond
	}
	if c.Interval == 0 {
		c.Interval = 100 * time.Millisecond
	}
	return c
}

// Validate reports an invalid field of c (with the defaults applied),
// naming it and its value.
func (c CoDel) Validate() error {
	d := c.WithDefaults()
	switch {
	case c.Target < 0:
		return fmt.Errorf("codel.target must be >= 0, got %v", c.Target)
	case c.Interval < 0:
		return fmt.Errorf("codel.interval must be >= 0, got %v", c.Interval)
	case d.Target >= d.Interval:
		return fmt.Errorf("codel.target must be shorter than codel.interval (%v), got %v", d.Interval, d.Target)
	}
	return nil
}
