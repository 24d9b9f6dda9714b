package config

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/adaptive"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// Config is registry.Config.
type Config struct {
	SemaphoreConfigs map[string]SemaphoreSpec // resilience4j.bulkhead.configs
	Semaphores       map[string]SemaphoreSpec // resilience4j.bulkhead.instances
	PoolConfigs      map[string]PoolSpec      // resilience4j.thread-pool-bulkhead.configs
	Pools            map[string]PoolSpec      // resilience4j.thread-pool-bulkhead.instances
	Strict           bool                     // no bulkhead for a name not listed
	RecordEvents     bool                     // keep recent events for the status page
	Warnings         []string                 // what Load accepted but does not do as Spring would
}

// SemaphoreSpec is registry.SemaphoreSpec; nil fields are unset.
type SemaphoreSpec struct {
	BaseConfig         string           // "" means "default"
	MaxConcurrentCalls *int             // the total, if MaxConcurrentCallsPerKey is set
	MaxWaitDuration    *time.Duration   // semaphore.Config.MaxWaitDuration
	EventBufferSize    *int             // eventConsumerBufferSize, 0 to 10000 (100)
	Adaptive           *adaptive.Config // inherited as a whole
	// MaxConcurrentCallsPerKey makes the instance a keyed semaphore
	// (semaphore.KeyedConfig.PerKey); MaxActiveKeys is its MaxActiveKeys.
	MaxConcurrentCallsPerKey, MaxActiveKeys *int
	Line                                    // the line's shedding rules
	Extras                                  // priorities, shadow, observe
}

// Line is registry.Line: the shedding rules of a bulkhead's line of
// waiters, the fields of semaphore.Config and pool.Config of the same names.
type Line struct {
	MaxWaitingCalls, LIFOThreshold *int
	MinDeadlineSlack               *time.Duration
	QueueOrder                     *bulkhead.QueueOrder
	CoDel                          *bulkhead.CoDel // inherited whole
}

// Extras are the semaphore's priorities, shadow and observe keys (this
// library's extensions); a block is inherited whole.
type Extras struct {
	Priorities *bulkhead.Priorities // priorities: {ceilings: {...}, aging}
	Shadow     *semaphore.Shadow    // shadow: {maxConcurrentCalls, maxWaitDuration}
	Observe    *bool                // observe: true
}

// PoolSpec is registry.PoolSpec; nil fields are unset.
type PoolSpec struct {
	BaseConfig      string           // "" means "default"
	MaxWorkers      *int             // maxThreadPoolSize
	CoreWorkers     *int             // coreThreadPoolSize: no effect, at most MaxWorkers
	QueueCapacity   *int             // pool.Config.QueueCapacity
	QueueTimeout    *time.Duration   // maxWaitDuration
	KeepAlive       *time.Duration   // keepAliveDuration
	EventBufferSize *int             // as in SemaphoreSpec
	Adaptive        *adaptive.Config // as in SemaphoreSpec
	// MaxRunningPerKey and QueueCapacityPerKey make the instance a keyed
	// pool (pool.KeyedConfig's fields of the same names).
	MaxRunningPerKey, QueueCapacityPerKey *int
	Line                                                       // as in SemaphoreSpec
	Priorities                            *bulkhead.Priorities // priorities: {ceilings: {...}, aging}, inherited whole
	Displace                              *bool                // priorities.displace
	Shadow                                *pool.Shadow         // shadow: {maxThreadPoolSize, queueCapacity, maxWaitDuration}, inherited whole
}

// over returns s's set fields over base's; BaseConfig is not inherited.
func (s SemaphoreSpec) over(b SemaphoreSpec) SemaphoreSpec {
	s.MaxConcurrentCalls = cmp.Or(s.MaxConcurrentCalls, b.MaxConcurrentCalls)
	s.MaxWaitDuration = cmp.Or(s.MaxWaitDuration, b.MaxWaitDuration)
	s.EventBufferSize = cmp.Or(s.EventBufferSize, b.EventBufferSize)
	s.Adaptive = cmp.Or(s.Adaptive, b.Adaptive)
	s.MaxConcurrentCallsPerKey = cmp.Or(s.MaxConcurrentCallsPerKey, b.MaxConcurrentCallsPerKey)
	s.MaxActiveKeys = cmp.Or(s.MaxActiveKeys, b.MaxActiveKeys)
	s.Line = s.Line.over(b.Line)
	s.Observe = cmp.Or(s.Observe, b.Observe)
	s.Shadow = cmp.Or(s.Shadow, b.Shadow)
	s.Priorities = cmp.Or(s.Priorities, b.Priorities)
	return s
}

func (s PoolSpec) over(b PoolSpec) PoolSpec {
	s.MaxWorkers = cmp.Or(s.MaxWorkers, b.MaxWorkers)
	s.CoreWorkers = cmp.Or(s.CoreWorkers, b.CoreWorkers)
	s.QueueCapacity = cmp.Or(s.QueueCapacity, b.QueueCapacity)
	s.QueueTimeout = cmp.Or(s.QueueTimeout, b.QueueTimeout)
	s.KeepAlive = cmp.Or(s.KeepAlive, b.KeepAlive)
	s.EventBufferSize = cmp.Or(s.EventBufferSize, b.EventBufferSize)
	s.Adaptive = cmp.Or(s.Adaptive, b.Adaptive)
	s.MaxRunningPerKey = cmp.Or(s.MaxRunningPerKey, b.MaxRunningPerKey)
	s.QueueCapacityPerKey = cmp.Or(s.QueueCapacityPerKey, b.QueueCapacityPerKey)
	s.Line = s.Line.over(b.Line)
	s.Displace = cmp.Or(s.Displace, b.Displace)
	s.Shadow = cmp.Or(s.Shadow, b.Shadow)
	s.Priorities = cmp.Or(s.Priorities, b.Priorities)
	return s
}

func (l Line) over(b Line) Line {
	return Line{cmp.Or(l.MaxWaitingCalls, b.MaxWaitingCalls), cmp.Or(l.LIFOThreshold, b.LIFOThreshold),
		cmp.Or(l.MinDeadlineSlack, b.MinDeadlineSlack), cmp.Or(l.QueueOrder, b.QueueOrder), cmp.Or(l.CoDel, b.CoDel)}
}

// ownKeys are checked on their own: their validity depends on other fields
// (a wait, a queue), so the whole Config is checked once resolved.
var ownKeys = []string{"maxWaitingCalls", "minDeadlineSlack", "queueOrder", "lifoThreshold", "codel", "observe", "priorities.displace", "shadow", "priorities"}

// pick selects the set fields a Spec copies onto its bulkhead's Config.
type pick struct {
	only    string // a key: that field only; "": every field
	skipOwn bool   // leave out ownKeys
	set     bool   // whether a field was copied
}

func put[T any](p *pick, key string, dst, src *T) {
	if src != nil && (p.only == "" || p.only == key) && !(p.skipOwn && slices.Contains(ownKeys, key)) {
		*dst, p.set = *src, true
	}
}

// putBlock copies a block whole.
func putBlock[B any](p *pick, key string, dst **B, src *B) {
	if src != nil {
		put(p, key, dst, new(new(*src)))
	}
}

// config is the semaphore.Config s gives: its defaults and the fields p picks.
func (s SemaphoreSpec) config(p *pick) semaphore.Config {
	c := semaphore.DefaultConfig()
	put(p, "maxConcurrentCalls", &c.MaxConcurrentCalls, s.MaxConcurrentCalls)
	put(p, "maxWaitDuration", &c.MaxWaitDuration, s.MaxWaitDuration)
	s.Line.put(p, &c.MaxWaitingCalls, &c.LIFOThreshold, &c.MinDeadlineSlack, &c.QueueOrder, &c.CoDel)
	put(p, "observe", &c.Observe, s.Observe)
	putBlock(p, "shadow", &c.Shadow, s.Shadow)
	putBlock(p, "priorities", &c.Priorities, s.Priorities)
	return c
}

// config is the pool.Config s gives: its defaults and the fields p picks.
func (s PoolSpec) config(p *pick) pool.Config {
	c := pool.DefaultConfig()
	put(p, "maxThreadPoolSize", &c.MaxWorkers, s.MaxWorkers)
	put(p, "queueCapacity", &c.QueueCapacity, s.QueueCapacity)
	put(p, "maxWaitDuration", &c.QueueTimeout, s.QueueTimeout)
	put(p, "keepAliveDuration", &c.KeepAlive, s.KeepAlive)
	s.Line.put(p, &c.MaxWaitingCalls, &c.LIFOThreshold, &c.MinDeadlineSlack, &c.QueueOrder, &c.CoDel)
	put(p, "priorities.displace", &c.Displace, s.Displace)
	putBlock(p, "shadow", &c.Shadow, s.Shadow)
	putBlock(p, "priorities", &c.Priorities, s.Priorities)
	return c
}

func (l Line) put(p *pick, waiting, threshold *int, slack *time.Duration, order *bulkhead.QueueOrder, codel **bulkhead.CoDel) {
	put(p, "maxWaitingCalls", waiting, l.MaxWaitingCalls)
	put(p, "minDeadlineSlack", slack, l.MinDeadlineSlack)
	put(p, "queueOrder", order, l.QueueOrder)
	put(p, "lifoThreshold", threshold, l.LIFOThreshold)
	putBlock(p, "codel", codel, l.CoDel)
}

// own checks a field of ownKeys on its own.
func (l Line) own(key string, pr *bulkhead.Priorities) error {
	switch {
	case key == "maxWaitingCalls":
		return nonNegative(key, l.MaxWaitingCalls)
	case key == "minDeadlineSlack":
		return nonNegative(key, l.MinDeadlineSlack)
	case key == "lifoThreshold":
		return nonNegative(key, l.LIFOThreshold)
	case key == "codel" && l.CoDel != nil:
		return l.CoDel.Validate()
	case key == "priorities" && pr != nil:
		return pr.Validate()
	}
	return nil
}

func nonNegative[T int | time.Duration](key string, x *T) error {
	if x != nil && *x < 0 {
		return fmt.Errorf("%s must be >= 0, got %v", key, *x)
	}
	return nil
}

func (s SemaphoreSpec) own(key string) error { return s.Line.own(key, s.Priorities) }
func (s PoolSpec) own(key string) error      { return s.Line.own(key, s.Priorities) }

func (s SemaphoreSpec) common() (string, *int, *adaptive.Config) {
	return s.BaseConfig, s.EventBufferSize, s.Adaptive
}

func (s PoolSpec) common() (string, *int, *adaptive.Config) {
	return s.BaseConfig, s.EventBufferSize, s.Adaptive
}
