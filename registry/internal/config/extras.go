package config

import (
	"cmp"
	"slices"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// Extras are the semaphore's priorities, shadow and observe keys (this
// library's extensions); a block is inherited whole.
type Extras struct {
	Priorities *bulkhead.Priorities // priorities: {ceilings: {...}, aging}
	Shadow     *semaphore.Shadow    // shadow: {maxConcurrentCalls, maxWaitDuration}
	Observe    *bool                // observe: true
}

// noCheck leaves a block to the whole Config's check.
func noCheck[B any](*B) error { return nil }

// priorityKeys are the keys of a priorities block, for both kinds.
var priorityKeys = []field[bulkhead.Priorities, struct{}]{
	leaf("ceilings.sheddable", number, func(p *bulkhead.Priorities) *float64 { return &p.Sheddable }),
	leaf("ceilings.sheddablePlus", number, func(p *bulkhead.Priorities) *float64 { return &p.SheddablePlus }),
	leaf("ceilings.critical", number, func(p *bulkhead.Priorities) *float64 { return &p.Critical }),
	leaf("aging", duration, func(p *bulkhead.Priorities) *time.Duration { return &p.Aging }),
}

// withExtras appends the semaphore's Extras keys.
func withExtras(fs []field[SemaphoreSpec, semaphore.Config]) []field[SemaphoreSpec, semaphore.Config] {
	type S = SemaphoreSpec
	type C = semaphore.Config
	observe := ptr("observe", "Observe", boolean, func(s *S) **bool { return &s.Extras.Observe }, func(c *C) *bool { return &c.Observe })
	observe.own = func(S) error { return nil } // checked with the whole Config
	return slices.Concat(fs, []field[S, C]{observe},
		block("shadow", "Shadow", func(s *S) **semaphore.Shadow { return &s.Extras.Shadow }, func(c *C) **semaphore.Shadow { return &c.Shadow }, noCheck, []field[semaphore.Shadow, struct{}]{
			leaf("maxConcurrentCalls", integer, func(p *semaphore.Shadow) *int { return &p.MaxConcurrentCalls }),
			leaf("maxWaitDuration", duration, func(p *semaphore.Shadow) *time.Duration { return &p.MaxWaitDuration }),
		}),
		block("priorities", "Priorities", func(s *S) **bulkhead.Priorities { return &s.Extras.Priorities }, func(c *C) **bulkhead.Priorities { return &c.Priorities }, (*bulkhead.Priorities).Validate, priorityKeys))
}

// withPoolPriorities appends a pool's priorities (with displace) and shadow
// keys, the shadow's spelt as the pool's own.
func withPoolPriorities(fs []field[PoolSpec, pool.Config]) []field[PoolSpec, pool.Config] {
	type S = PoolSpec
	type C = pool.Config
	displace := ptr("priorities.displace", "Displace", boolean, func(s *S) **bool { return &s.Displace }, func(c *C) *bool { return &c.Displace })
	set := displace.set
	displace.own = func(S) error { return nil }                                                                      // checked with the whole Config
	displace.set = func(s *S, v *value) { s.Priorities = cmp.Or(s.Priorities, new(bulkhead.Priorities)); set(s, v) } // as a block's key does
	return slices.Concat(fs, []field[S, C]{displace},
		block("shadow", "Shadow", func(s *S) **pool.Shadow { return &s.Shadow }, func(c *C) **pool.Shadow { return &c.Shadow }, noCheck, []field[pool.Shadow, struct{}]{
			leaf("maxThreadPoolSize", integer, func(p *pool.Shadow) *int { return &p.MaxWorkers }, "maxWorkers"),
			leaf("queueCapacity", integer, func(p *pool.Shadow) *int { return &p.QueueCapacity }),
			leaf("maxWaitDuration", duration, func(p *pool.Shadow) *time.Duration { return &p.QueueTimeout }, "queueTimeout"),
		}),
		block("priorities", "Priorities", func(s *S) **bulkhead.Priorities { return &s.Priorities }, func(c *C) **bulkhead.Priorities { return &c.Priorities }, (*bulkhead.Priorities).Validate, priorityKeys))
}
