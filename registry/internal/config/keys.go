package config

import (
	"cmp"
	"slices"
	"strings"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/adaptive"
)

// keyInfo is one key of an entry: as Spring spells it (dotted inside a
// block), the spellings this library also accepts, and the Spec field it
// sets, for values built in code ("-": accepted without effect, with
// anything below it).
type keyInfo struct {
	name, goName string
	alias        []string
}

// The keys of each kind, in the order errors list them: "key|alias GoName";
// a key inside a block has its block's GoName.
var (
	adaptiveKeys = in("adaptive", "algorithm", "minLimit", "maxLimit", "initialLimit", "window", "minSamples",
		"vegas.alpha", "vegas.beta", "vegas.noLoadWindow", "vegas.backoff", "gradient2.smoothing", "gradient2.headroom",
		"gradient2.longWindow", "gradient2.tolerance", "gradient2.backoff", "aimd.increase", "aimd.backoff", "aimd.slowCall", "shadow")
	lineKeys = append([]string{"maxWaitingCalls MaxWaitingCalls", "minDeadlineSlack MinDeadlineSlack", "queueOrder QueueOrder",
		"lifoThreshold LIFOThreshold", "codel CoDel"}, in("codel", "targetDelay", "interval")...)
	priorityKeys  = append([]string{"priorities Priorities"}, in("priorities", "ceilings.sheddable", "ceilings.sheddablePlus", "ceilings.critical", "aging")...)
	semaphoreKeys = keys([]string{"maxConcurrentCalls|maxConcurrentCall MaxConcurrentCalls", "maxWaitDuration|maxWaitTime MaxWaitDuration",
		"baseConfig BaseConfig", "eventConsumerBufferSize EventBufferSize", "maxConcurrentCallsPerKey MaxConcurrentCallsPerKey",
		"maxActiveKeys MaxActiveKeys", "writableStackTraceEnabled -", "fairCallHandlingEnabled -", "tags -", "adaptive Adaptive"},
		adaptiveKeys, lineKeys, []string{"observe Observe", "shadow Shadow"}, in("shadow", "maxConcurrentCalls", "maxWaitDuration"), priorityKeys)
	poolKeys = keys([]string{"maxThreadPoolSize|maxWorkers MaxWorkers", "coreThreadPoolSize CoreWorkers", "queueCapacity QueueCapacity",
		"maxWaitDuration|queueTimeout QueueTimeout", "keepAliveDuration|keepAlive KeepAlive", "baseConfig BaseConfig",
		"eventConsumerBufferSize EventBufferSize", "maxRunningPerKey MaxRunningPerKey", "queueCapacityPerKey QueueCapacityPerKey",
		"writableStackTraceEnabled -", "contextPropagators -", "tags -", "adaptive Adaptive"},
		adaptiveKeys, lineKeys, []string{"priorities.displace Displace", "shadow Shadow"},
		in("shadow", "maxThreadPoolSize|maxWorkers", "queueCapacity", "maxWaitDuration|queueTimeout"), priorityKeys)
)

// in returns the keys of a block, with their aliases, prefixed by it.
func in(block string, keys ...string) []string {
	for i, k := range keys {
		keys[i] = block + "." + strings.ReplaceAll(k, "|", "|"+block+".")
	}
	return keys
}

func keys(lists ...[]string) []keyInfo {
	var out []keyInfo
	for _, l := range slices.Concat(lists...) {
		spelt, goName, _ := strings.Cut(l, " ")
		names := strings.Split(spelt, "|")
		if goName == "" {
			head, _, _ := strings.Cut(names[0], ".")
			goName = out[slices.IndexFunc(out, func(k keyInfo) bool { return k.name == head })].goName
		}
		out = append(out, keyInfo{names[0], goName, names[1:]})
	}
	return out
}

// bind sets the field key (as keys spells it) from v.
func (s *SemaphoreSpec) bind(key string, v *value) {
	switch key {
	case "maxConcurrentCalls":
		s.MaxConcurrentCalls = v.int()
	case "maxWaitDuration":
		s.MaxWaitDuration = v.duration()
	case "maxConcurrentCallsPerKey":
		s.MaxConcurrentCallsPerKey = v.int()
	case "maxActiveKeys":
		s.MaxActiveKeys = v.int()
	case "observe":
		s.Observe = v.boolean()
	case "shadow":
		head(v, &s.Shadow)
	case "shadow.maxConcurrentCalls":
		set(&blk(&s.Shadow).MaxConcurrentCalls, v.int())
	case "shadow.maxWaitDuration":
		set(&blk(&s.Shadow).MaxWaitDuration, v.duration())
	default:
		bindCommon(key, v, &s.BaseConfig, &s.EventBufferSize, &s.Adaptive, &s.Line, &s.Priorities)
	}
}

// bind sets the field key (as keys spells it) from v.
func (s *PoolSpec) bind(key string, v *value) {
	switch key {
	case "maxThreadPoolSize":
		s.MaxWorkers = v.int()
	case "coreThreadPoolSize":
		s.CoreWorkers = v.int()
	case "queueCapacity":
		s.QueueCapacity = v.int()
	case "maxWaitDuration":
		s.QueueTimeout = v.duration()
	case "keepAliveDuration":
		s.KeepAlive = v.duration()
	case "maxRunningPerKey":
		s.MaxRunningPerKey = v.int()
	case "queueCapacityPerKey":
		s.QueueCapacityPerKey = v.int()
	case "priorities.displace":
		blk(&s.Priorities)
		s.Displace = v.boolean()
	case "shadow":
		head(v, &s.Shadow)
	case "shadow.maxThreadPoolSize":
		set(&blk(&s.Shadow).MaxWorkers, v.int())
	case "shadow.queueCapacity":
		set(&blk(&s.Shadow).QueueCapacity, v.int())
	case "shadow.maxWaitDuration":
		set(&blk(&s.Shadow).QueueTimeout, v.duration())
	default:
		bindCommon(key, v, &s.BaseConfig, &s.EventBufferSize, &s.Adaptive, &s.Line, &s.Priorities)
	}
}

// bindCommon sets a key both kinds have.
func bindCommon(key string, v *value, base *string, buf **int, ad **adaptive.Config, l *Line, pr **bulkhead.Priorities) {
	switch key {
	case "baseConfig":
		*base = v.name()
	case "eventConsumerBufferSize":
		*buf = v.int()
	case "adaptive":
		head(v, ad)
	case "adaptive.algorithm":
		set(&blk(ad).Algorithm, v.str())
	case "adaptive.minLimit":
		set(&blk(ad).MinLimit, v.int())
	case "adaptive.maxLimit":
		set(&blk(ad).MaxLimit, v.int())
	case "adaptive.initialLimit":
		set(&blk(ad).InitialLimit, v.int())
	case "adaptive.window":
		set(&blk(ad).Window, v.duration())
	case "adaptive.minSamples":
		set(&blk(ad).MinSamples, v.int())
	case "adaptive.vegas.alpha":
		set(&blk(ad).Vegas.Alpha, v.number())
	case "adaptive.vegas.beta":
		set(&blk(ad).Vegas.Beta, v.number())
	case "adaptive.vegas.noLoadWindow":
		set(&blk(ad).Vegas.NoLoadWindow, v.duration())
	case "adaptive.vegas.backoff":
		set(&blk(ad).Vegas.Backoff, v.number())
	case "adaptive.gradient2.smoothing":
		set(&blk(ad).Gradient2.Smoothing, v.number())
	case "adaptive.gradient2.headroom":
		set(&blk(ad).Gradient2.Headroom, v.number())
	case "adaptive.gradient2.longWindow":
		set(&blk(ad).Gradient2.LongWindow, v.int())
	case "adaptive.gradient2.tolerance":
		set(&blk(ad).Gradient2.Tolerance, v.number())
	case "adaptive.gradient2.backoff":
		set(&blk(ad).Gradient2.Backoff, v.number())
	case "adaptive.aimd.increase":
		set(&blk(ad).AIMD.Increase, v.number())
	case "adaptive.aimd.backoff":
		set(&blk(ad).AIMD.Backoff, v.number())
	case "adaptive.aimd.slowCall":
		set(&blk(ad).AIMD.SlowCall, v.duration())
	case "adaptive.shadow":
		set(&blk(ad).Shadow, v.boolean())
	case "maxWaitingCalls":
		l.MaxWaitingCalls = v.int()
	case "minDeadlineSlack":
		l.MinDeadlineSlack = v.duration()
	case "queueOrder":
		l.QueueOrder = v.queueOrder()
	case "lifoThreshold":
		l.LIFOThreshold = v.int()
	case "codel":
		head(v, &l.CoDel)
	case "codel.targetDelay":
		set(&blk(&l.CoDel).Target, v.duration())
	case "codel.interval":
		set(&blk(&l.CoDel).Interval, v.duration())
	case "priorities":
		head(v, pr)
	case "priorities.ceilings.sheddable":
		set(&blk(pr).Sheddable, v.number())
	case "priorities.ceilings.sheddablePlus":
		set(&blk(pr).SheddablePlus, v.number())
	case "priorities.ceilings.critical":
		set(&blk(pr).Critical, v.number())
	case "priorities.aging":
		set(&blk(pr).Aging, v.duration())
	}
}

// set stores x in dst if x is not nil (a value read without error).
func set[T any](dst *T, x *T) {
	if x != nil {
		*dst = *x
	}
}

// blk returns the block *b, created if need be.
func blk[B any](b **B) *B {
	*b = cmp.Or(*b, new(B))
	return *b
}

// head creates the block *b given as a whole: adaptive: {}.
func head[B any](v *value, b **B) {
	if v.p.kind == null {
		v.fail("has no value; give a mapping (%s: {} for every default) or remove the key", v.key)
	} else if v.is(emptyMap, "a mapping of keys to values") {
		blk(b)
	}
}
