package pool

import (
	"fmt"
	"runtime"
	"time"
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
	return nil
}

// keepAlive is c.KeepAlive with 0 read as DefaultKeepAlive.
func (c Config) keepAlive() time.Duration {
	if c.KeepAlive == 0 {
		return DefaultKeepAlive
	}
	return c.KeepAlive
}
