package config

import (
	"cmp"
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

// withExtras appends the Extras keys, one line each, in the Spec field get
// returns, set in the Config's fields.
func withExtras(fs []field[SemaphoreSpec, semaphore.Config]) []field[SemaphoreSpec, semaphore.Config] {
	type S = SemaphoreSpec
	type C = semaphore.Config
	prio := func(s *S) **bulkhead.Priorities { return &s.Extras.Priorities }
	shadow := func(s *S) **semaphore.Shadow { return &s.Extras.Shadow }
	observe := ptr("observe", "Observe", boolean, func(s *S) **bool { return &s.Extras.Observe }, func(c *C) *bool { return &c.Observe })
	observe.own = func(S) error { return nil } // checked with the whole Config
	shadowKey := whole("shadow", "Shadow", shadow, func(c *C) **semaphore.Shadow { return &c.Shadow }, func(*semaphore.Shadow) error { return nil })
	return append(fs, observe, shadowKey,
		whole("priorities", "Priorities", prio, func(c *C) **bulkhead.Priorities { return &c.Priorities }, (*bulkhead.Priorities).Validate),
		sub[S, C](prio, "priorities.ceilings.sheddable", number, func(p *bulkhead.Priorities) *float64 { return &p.Sheddable }),
		sub[S, C](prio, "priorities.ceilings.sheddablePlus", number, func(p *bulkhead.Priorities) *float64 { return &p.SheddablePlus }),
		sub[S, C](prio, "priorities.ceilings.critical", number, func(p *bulkhead.Priorities) *float64 { return &p.Critical }),
		sub[S, C](prio, "priorities.aging", duration, func(p *bulkhead.Priorities) *time.Duration { return &p.Aging }),
		sub[S, C](shadow, "shadow.maxConcurrentCalls", integer, func(p *semaphore.Shadow) *int { return &p.MaxConcurrentCalls }),
		sub[S, C](shadow, "shadow.maxWaitDuration", duration, func(p *semaphore.Shadow) *time.Duration { return &p.MaxWaitDuration }),
	)
}

// whole is a block key whose value (a *B in the Spec) is inherited and
// applied whole; check, if not nil, validates it alone.
func whole[S, C, B any](key, goName string, get func(*S) **B, to func(*C) **B, check func(*B) error) field[S, C] {
	f := field[S, C]{key: key, goName: goName, set: func(s *S, v *value) { *get(s) = cmp.Or(*get(s), new(B)) },
		inherit: func(s *S, b S) { *get(s) = cmp.Or(*get(s), *get(&b)) },
		apply: func(s S, c *C) bool {
			if p := *get(&s); p != nil {
				x := *p
				*to(c) = &x
			}
			return *get(&s) != nil
		}}
	if check != nil {
		f.own = func(s S) error {
			if p := *get(&s); p != nil {
				return check(p)
			}
			return nil
		}
	}
	return f
}

// sub is a key inside the block get returns, created when first set.
func sub[S, C, B, T any](get func(*S) **B, key string, p parser[T], at func(*B) *T) field[S, C] {
	return field[S, C]{key: key, goName: key, want: p.want, set: func(s *S, v *value) {
		*get(s) = cmp.Or(*get(s), new(B))
		if x, ok := p.parse(v); ok {
			*at(*get(s)) = x
		}
	}}
}

// withPoolPriorities appends a pool's priorities keys, one line each, as
// withExtras does the semaphore's, priorities.displace (Config.Displace),
// and the shadow block's keys, spelt as the pool's own.
func withPoolPriorities(fs []field[PoolSpec, pool.Config]) []field[PoolSpec, pool.Config] {
	type S = PoolSpec
	type C = pool.Config
	prio := func(s *S) **bulkhead.Priorities { return &s.Priorities }
	displace := ptr("priorities.displace", "Displace", boolean, func(s *S) **bool { return &s.Displace }, func(c *C) *bool { return &c.Displace })
	set := displace.set
	displace.own = func(S) error { return nil }                                                                      // checked with the whole Config
	displace.set = func(s *S, v *value) { s.Priorities = cmp.Or(s.Priorities, new(bulkhead.Priorities)); set(s, v) } // as sub does
	shadow := func(s *S) **pool.Shadow { return &s.Shadow }
	alias := func(f field[S, C], a string) field[S, C] { f.alias = []string{a}; return f }
	return append(fs, displace,
		whole("shadow", "Shadow", shadow, func(c *C) **pool.Shadow { return &c.Shadow }, func(*pool.Shadow) error { return nil }), // checked with the whole Config
		alias(sub[S, C](shadow, "shadow.maxThreadPoolSize", integer, func(p *pool.Shadow) *int { return &p.MaxWorkers }), "shadow.maxWorkers"),
		sub[S, C](shadow, "shadow.queueCapacity", integer, func(p *pool.Shadow) *int { return &p.QueueCapacity }),
		alias(sub[S, C](shadow, "shadow.maxWaitDuration", duration, func(p *pool.Shadow) *time.Duration { return &p.QueueTimeout }), "shadow.queueTimeout"),
		whole("priorities", "Priorities", prio, func(c *C) **bulkhead.Priorities { return &c.Priorities }, (*bulkhead.Priorities).Validate),
		sub[S, C](prio, "priorities.ceilings.sheddable", number, func(p *bulkhead.Priorities) *float64 { return &p.Sheddable }),
		sub[S, C](prio, "priorities.ceilings.sheddablePlus", number, func(p *bulkhead.Priorities) *float64 { return &p.SheddablePlus }),
		sub[S, C](prio, "priorities.ceilings.critical", number, func(p *bulkhead.Priorities) *float64 { return &p.Critical }),
		sub[S, C](prio, "priorities.aging", duration, func(p *bulkhead.Priorities) *time.Duration { return &p.Aging }),
	)
}
