package pool

import (
	"fmt"
	"runtime"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/internal/shed"
)

// MaxLimit is the largest MaxWorkers and the largest QueueCapacity a
// Bulkhead accepts.
const MaxLimit = 1 << 20

// DefaultKeepAlive is how long an idle worker goroutine lives when
// Config.KeepAlive is 0: long enough that bursts a few seconds apart reuse
// warm workers, short enough that an idle bulkhead gives its goroutines back.
const DefaultKeepAlive = 10 * time.Second

// Config is a pool bulkhead's configuration. Its zero value is not valid:
// start from [DefaultConfig] or set MaxWorkers.
type Config struct {
	// MaxWorkers is how many tasks may run at once, from 1 to MaxLimit.
	MaxWorkers int
	// QueueCapacity is how many tasks may wait for a worker, from 0 to
	// MaxLimit. 0 means hand-off only: a task starts at once or is rejected.
	QueueCapacity int
	// QueueTimeout is how long a task may wait in the queue for a worker. 0
	// means no timeout: a queued task waits as long as it must. A task not
	// started within a positive QueueTimeout is dropped with a
	// [*bulkhead.FullError]. It must not be negative. (The registry's YAML
	// still accepts the key maxWaitDuration for it.)
	QueueTimeout time.Duration
	// KeepAlive is how long an idle worker goroutine lives before it exits.
	// 0 means DefaultKeepAlive; it must not be negative.
	KeepAlive time.Duration

	// The fields below shed load under overload (docs/shedding.md); their
	// zero values keep a plain first-in, first-out queue. Rejections they
	// cause carry their [bulkhead.Reason].

	// MaxWaitingCalls caps the submitters waiting for room in the queue
	// ([Go], [Bulkhead.Go]); 0 means no cap. A submitter that finds that
	// many waiting is refused at once (ReasonWaiters), unless the queue
	// serves the newest first: then the oldest waiting submitter is refused
	// and the newcomer waits. With Priorities, the newest waiter of the
	// lowest class (raised by Aging) below the newcomer's is refused instead
	// (ReasonDisplaced if Displace is on, else ReasonWaiters) and the
	// newcomer waits; it is refused only if nobody lower waits.
	MaxWaitingCalls int
	// MinDeadlineSlack, if positive, is the time a task needs before its
	// submitter's context deadline: a task that would have to queue (or its
	// submitter wait for room) with less left is refused at once, and a
	// queued task is dropped, and a submitter waiting for room refused,
	// when that point comes, instead of started or queued too late
	// (ReasonDeadline).
	MinDeadlineSlack time.Duration
	// QueueOrder is the order queued tasks get a worker: bulkhead.FIFO (the
	// default), bulkhead.LIFO or bulkhead.AdaptiveLIFO; the LIFO orders need
	// a QueueTimeout. Waiting submitters move into the queue first in,
	// first out.
	QueueOrder bulkhead.QueueOrder
	// LIFOThreshold is, for AdaptiveLIFO, the queue depth above which the
	// newest task is started first; 0 means only while CoDel reports the
	// queue overloaded (CoDel must then be set).
	LIFOThreshold int
	// CoDel, if not nil, drops queued tasks of a queue that stays above its
	// target wait (ReasonCoDel); see [bulkhead.CoDel].
	CoDel *bulkhead.CoDel

	// Priorities, if not nil, gives each task the class of its submitter's
	// context ([bulkhead.PriorityFrom]) and reserves for higher classes
	// the workers and the queue slots above a class's ceiling (refusals:
	// ReasonPriority); queued tasks start highest class first, first in,
	// first out within a class (docs/priorities.md). It needs the FIFO
	// QueueOrder and no CoDel, and a plain (not keyed) pool.
	Priorities *bulkhead.Priorities
	// Displace, with Priorities, lets a task that finds no queue slot its
	// class may take push out the newest queued task of the lowest class
	// (raised by Aging) below its own, and take its slot; that task's
	// future fails with a [*bulkhead.FullError] of
	// [bulkhead.ReasonDisplaced], on a goroutine of the pool's (Close waits
	// for it), not in the displacing Submit.
	Displace bool

	// Shadow, if not nil, evaluates a smaller pool on live traffic without
	// enforcing it, and counts what it would have done
	// ([Bulkhead.ShadowStats]); the counts are an estimate (see [Shadow]).
	// It is not available in a keyed pool.
	Shadow *Shadow
}

// DefaultConfig returns Resilience4j's thread-pool defaults, GOMAXPROCS
// workers and a queue of 100, with no queue timeout and DefaultKeepAlive.
func DefaultConfig() Config {
	return Config{MaxWorkers: runtime.GOMAXPROCS(0), QueueCapacity: 100, KeepAlive: DefaultKeepAlive}
}

// Validate reports the first invalid field of c, naming the field and value.
func (c Config) Validate() error {
	switch {
	case c.MaxWorkers < 1:
		return fmt.Errorf("maxWorkers must be >= 1, got %d", c.MaxWorkers)
	case c.MaxWorkers > MaxLimit:
		return fmt.Errorf("maxWorkers must be <= %d, got %d", MaxLimit, c.MaxWorkers)
	case c.QueueCapacity < 0:
		return fmt.Errorf("queueCapacity must be >= 0, got %d", c.QueueCapacity)
	case c.QueueCapacity > MaxLimit:
		return fmt.Errorf("queueCapacity must be <= %d, got %d", MaxLimit, c.QueueCapacity)
	case c.QueueTimeout < 0:
		return fmt.Errorf("queueTimeout must be >= 0, got %v", c.QueueTimeout)
	case c.KeepAlive < 0:
		return fmt.Errorf("keepAlive must be >= 0, got %v", c.KeepAlive)
	}
	if err := shed.Validate(c.MaxWaitingCalls, c.MinDeadlineSlack, c.QueueOrder, c.LIFOThreshold, c.CoDel); err != nil {
		return err
	}
	if err := c.validateShadow(); err != nil {
		return err
	}
	switch {
	case c.QueueOrder != bulkhead.FIFO && c.QueueTimeout == 0:
		// so that nobody waits forever at the back of a LIFO queue
		return fmt.Errorf("queueOrder %v needs queueTimeout > 0 (a bounded wait), got 0", c.QueueOrder)
	case c.QueueCapacity == 0 && c.QueueOrder != bulkhead.FIFO:
		return fmt.Errorf("queueOrder %v needs queueCapacity > 0 (a queue), got 0", c.QueueOrder)
	case c.QueueCapacity == 0 && c.CoDel != nil:
		return fmt.Errorf("codel needs queueCapacity > 0 (a queue), got 0")
	case c.Priorities == nil && c.Displace:
		return fmt.Errorf("displace needs priorities (a class to displace by), got none")
	case c.Priorities == nil:
		return nil
	case c.QueueOrder != bulkhead.FIFO:
		return fmt.Errorf("queueOrder must be fifo with priorities (the queue is served by class), got %v", c.QueueOrder)
	case c.CoDel != nil:
		return fmt.Errorf("codel is not available with priorities, got %+v", *c.CoDel)
	}
	return c.Priorities.Validate()
}

// keepAlive is c.KeepAlive with 0 read as DefaultKeepAlive.
func (c Config) keepAlive() time.Duration {
	if c.KeepAlive == 0 {
		return DefaultKeepAlive
	}
	return c.KeepAlive
}
