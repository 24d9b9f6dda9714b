// Package config is the registry's Config, its validation and inheritance,
// and a loader that reads Spring Boot files as Spring's binder does: one
// ordered list of properties (flattened key, value, file, line) bound onto
// Config with relaxed names. Package registry re-exports and documents it.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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

func (s SemaphoreSpec) common() (string, *int, *adaptive.Config) {
	return s.BaseConfig, s.EventBufferSize, s.Adaptive
}

func (s PoolSpec) common() (string, *int, *adaptive.Config) {
	return s.BaseConfig, s.EventBufferSize, s.Adaptive
}

// The keys of each kind, one line each, in the order error messages list
// them: Spring key, Spec field, parser, Spec field, Config field, aliases.
var (
	semaphoreKind = &kind[SemaphoreSpec, semaphore.Config]{name: "semaphore", defaults: semaphore.DefaultConfig, fields: withExtras(slices.Concat([]field[SemaphoreSpec, semaphore.Config]{
		ptr("maxConcurrentCalls", "MaxConcurrentCalls", integer, func(s *SemaphoreSpec) **int { return &s.MaxConcurrentCalls }, func(c *semaphore.Config) *int { return &c.MaxConcurrentCalls }, "maxConcurrentCall"),
		ptr("maxWaitDuration", "MaxWaitDuration", duration, func(s *SemaphoreSpec) **time.Duration { return &s.MaxWaitDuration }, func(c *semaphore.Config) *time.Duration { return &c.MaxWaitDuration }, "maxWaitTime"),
		baseConfig[SemaphoreSpec, semaphore.Config](func(s *SemaphoreSpec) *string { return &s.BaseConfig }),
		ptr[SemaphoreSpec, semaphore.Config]("eventConsumerBufferSize", "EventBufferSize", integer, func(s *SemaphoreSpec) **int { return &s.EventBufferSize }, nil),
		ptr[SemaphoreSpec, semaphore.Config]("maxConcurrentCallsPerKey", "MaxConcurrentCallsPerKey", integer, func(s *SemaphoreSpec) **int { return &s.MaxConcurrentCallsPerKey }, nil),
		ptr[SemaphoreSpec, semaphore.Config]("maxActiveKeys", "MaxActiveKeys", integer, func(s *SemaphoreSpec) **int { return &s.MaxActiveKeys }, nil),
		{key: "writableStackTraceEnabled"}, {key: "fairCallHandlingEnabled"}, {key: "tags"},
	}, block[SemaphoreSpec, semaphore.Config]("adaptive", "Adaptive", func(s *SemaphoreSpec) **adaptive.Config { return &s.Adaptive }, nil, nil, adaptiveKeys),
		lineKeys(func(s *SemaphoreSpec) *Line { return &s.Line }, func(c *semaphore.Config) configLine {
			return configLine{&c.MaxWaitingCalls, &c.LIFOThreshold, &c.MinDeadlineSlack, &c.QueueOrder, &c.CoDel}
		})))}
	poolKind = &kind[PoolSpec, pool.Config]{name: "pool", defaults: pool.DefaultConfig, fields: withPoolPriorities(slices.Concat([]field[PoolSpec, pool.Config]{
		ptr("maxThreadPoolSize", "MaxWorkers", integer, func(s *PoolSpec) **int { return &s.MaxWorkers }, func(c *pool.Config) *int { return &c.MaxWorkers }, "maxWorkers"),
		ptr[PoolSpec, pool.Config]("coreThreadPoolSize", "CoreWorkers", integer, func(s *PoolSpec) **int { return &s.CoreWorkers }, nil),
		ptr("queueCapacity", "QueueCapacity", integer, func(s *PoolSpec) **int { return &s.QueueCapacity }, func(c *pool.Config) *int { return &c.QueueCapacity }),
		ptr("maxWaitDuration", "QueueTimeout", duration, func(s *PoolSpec) **time.Duration { return &s.QueueTimeout }, func(c *pool.Config) *time.Duration { return &c.QueueTimeout }, "queueTimeout"),
		ptr("keepAliveDuration", "KeepAlive", duration, func(s *PoolSpec) **time.Duration { return &s.KeepAlive }, func(c *pool.Config) *time.Duration { return &c.KeepAlive }, "keepAlive"),
		baseConfig[PoolSpec, pool.Config](func(s *PoolSpec) *string { return &s.BaseConfig }),
		ptr[PoolSpec, pool.Config]("eventConsumerBufferSize", "EventBufferSize", integer, func(s *PoolSpec) **int { return &s.EventBufferSize }, nil),
		ptr[PoolSpec, pool.Config]("maxRunningPerKey", "MaxRunningPerKey", integer, func(s *PoolSpec) **int { return &s.MaxRunningPerKey }, nil),
		ptr[PoolSpec, pool.Config]("queueCapacityPerKey", "QueueCapacityPerKey", integer, func(s *PoolSpec) **int { return &s.QueueCapacityPerKey }, nil),
		{key: "writableStackTraceEnabled"}, {key: "contextPropagators"}, {key: "tags"},
	}, block[PoolSpec, pool.Config]("adaptive", "Adaptive", func(s *PoolSpec) **adaptive.Config { return &s.Adaptive }, nil, nil, adaptiveKeys),
		lineKeys(func(s *PoolSpec) *Line { return &s.Line }, func(c *pool.Config) configLine {
			return configLine{&c.MaxWaitingCalls, &c.LIFOThreshold, &c.MinDeadlineSlack, &c.QueueOrder, &c.CoDel}
		})))}
	// adaptiveKeys are the keys of an adaptive block, for both kinds.
	adaptiveKeys = []field[adaptive.Config, struct{}]{
		leaf("algorithm", str, func(a *adaptive.Config) *string { return &a.Algorithm }),
		leaf("minLimit", integer, func(a *adaptive.Config) *int { return &a.MinLimit }),
		leaf("maxLimit", integer, func(a *adaptive.Config) *int { return &a.MaxLimit }),
		leaf("initialLimit", integer, func(a *adaptive.Config) *int { return &a.InitialLimit }),
		leaf("window", duration, func(a *adaptive.Config) *time.Duration { return &a.Window }),
		leaf("minSamples", integer, func(a *adaptive.Config) *int { return &a.MinSamples }),
		leaf("vegas.alpha", number, func(a *adaptive.Config) *float64 { return &a.Vegas.Alpha }),
		leaf("vegas.beta", number, func(a *adaptive.Config) *float64 { return &a.Vegas.Beta }),
		leaf("vegas.noLoadWindow", duration, func(a *adaptive.Config) *time.Duration { return &a.Vegas.NoLoadWindow }),
		leaf("vegas.backoff", number, func(a *adaptive.Config) *float64 { return &a.Vegas.Backoff }),
		leaf("gradient2.smoothing", number, func(a *adaptive.Config) *float64 { return &a.Gradient2.Smoothing }),
		leaf("gradient2.headroom", number, func(a *adaptive.Config) *float64 { return &a.Gradient2.Headroom }),
		leaf("gradient2.longWindow", integer, func(a *adaptive.Config) *int { return &a.Gradient2.LongWindow }),
		leaf("gradient2.tolerance", number, func(a *adaptive.Config) *float64 { return &a.Gradient2.Tolerance }),
		leaf("gradient2.backoff", number, func(a *adaptive.Config) *float64 { return &a.Gradient2.Backoff }),
		leaf("aimd.increase", number, func(a *adaptive.Config) *float64 { return &a.AIMD.Increase }),
		leaf("aimd.backoff", number, func(a *adaptive.Config) *float64 { return &a.AIMD.Backoff }),
		leaf("aimd.slowCall", duration, func(a *adaptive.Config) *time.Duration { return &a.AIMD.SlowCall }),
		leaf("shadow", boolean, func(a *adaptive.Config) *bool { return &a.Shadow }),
	}
	codelKeys = []field[bulkhead.CoDel, struct{}]{
		leaf("targetDelay", duration, func(c *bulkhead.CoDel) *time.Duration { return &c.Target }),
		leaf("interval", duration, func(c *bulkhead.CoDel) *time.Duration { return &c.Interval }),
	}
)

// configLine points at a bulkhead Config's fields of a Line.
type configLine struct {
	maxWaiting, threshold *int
	slack                 *time.Duration
	order                 *bulkhead.QueueOrder
	codel                 **bulkhead.CoDel
}

// lineKeys are the line's keys. Their validity depends on other fields (a
// wait, a queue): each is checked on its own, then the whole Config.
func lineKeys[S, C any](line func(*S) *Line, to func(*C) configLine) []field[S, C] {
	return append([]field[S, C]{
		ptr("maxWaitingCalls", "MaxWaitingCalls", nonNegative(integer), func(s *S) **int { return &line(s).MaxWaitingCalls }, func(c *C) *int { return to(c).maxWaiting }),
		ptr("minDeadlineSlack", "MinDeadlineSlack", nonNegative(duration), func(s *S) **time.Duration { return &line(s).MinDeadlineSlack }, func(c *C) *time.Duration { return to(c).slack }),
		ptr("queueOrder", "QueueOrder", queueOrder, func(s *S) **bulkhead.QueueOrder { return &line(s).QueueOrder }, func(c *C) *bulkhead.QueueOrder { return to(c).order }),
		ptr("lifoThreshold", "LIFOThreshold", nonNegative(integer), func(s *S) **int { return &line(s).LIFOThreshold }, func(c *C) *int { return to(c).threshold }),
	}, block("codel", "CoDel", func(s *S) **bulkhead.CoDel { return &line(s).CoDel }, func(c *C) **bulkhead.CoDel { return to(c).codel }, (*bulkhead.CoDel).Validate, codelKeys)...)
}

// queueOrder reads fifo, lifo or adaptiveLifo, in any case; it admits only
// valid orders, so its check has nothing to refuse.
var queueOrder = parser[bulkhead.QueueOrder]{"fifo, lifo or adaptiveLifo", func(s string) (bulkhead.QueueOrder, string) {
	for o := bulkhead.FIFO; o <= bulkhead.AdaptiveLIFO; o++ {
		if strings.EqualFold(strings.ReplaceAll(s, "-", ""), o.String()) {
			return o, ""
		}
	}
	return 0, fmt.Sprintf("must be fifo, lifo or adaptiveLifo, got %q", s)
}, func(string, bulkhead.QueueOrder) error { return nil }}

// nonNegative is p with a check on its own that refuses a negative value.
func nonNegative[T int | time.Duration](p parser[T]) parser[T] {
	p.check = func(key string, x T) error {
		if x < 0 {
			return fmt.Errorf("%s must be >= 0, got %v", key, x)
		}
		return nil
	}
	return p
}

// block is a block of keys, inherited whole, copied whole to the Config
// field to returns if to is not nil; check, if not nil, checks it alone.
func block[S, C, B any](key, goName string, get func(*S) **B, to func(*C) **B, check func(*B) error, keys []field[B, struct{}]) []field[S, C] {
	in := func(s *S) *B {
		*get(s) = cmp.Or(*get(s), new(B))
		return *get(s)
	}
	f := field[S, C]{key: key, goName: goName, set: func(s *S, v *value) { in(s) },
		inherit: func(s *S, b S) { *get(s) = cmp.Or(*get(s), *get(&b)) }}
	if to != nil {
		f.apply = func(s S, c *C) bool {
			if b := *get(&s); b != nil {
				*to(c) = new(*b)
			}
			return *get(&s) != nil
		}
	}
	if check != nil {
		f.own = func(s S) error {
			if b := *get(&s); b != nil {
				return check(b)
			}
			return nil
		}
	}
	fs := []field[S, C]{f}
	for _, k := range keys {
		var alias []string
		for _, a := range k.alias {
			alias = append(alias, key+"."+a)
		}
		fs = append(fs, field[S, C]{key: key + "." + k.key, goName: goName, alias: alias, want: k.want, set: func(s *S, v *value) { k.set(in(s), v) }})
	}
	return fs
}

// spec is what both Spec types offer: BaseConfig, EventBufferSize and
// Adaptive.
type spec interface {
	common() (base string, buffer *int, ad *adaptive.Config)
}

// kind is everything that differs between the two kinds: their keys and
// the bulkhead's Config, whose Validate checks the values.
type kind[S spec, C interface{ Validate() error }] struct {
	name     string
	defaults func() C
	fields   []field[S, C]
}

// field binds one Spring key onto a Spec field.
type field[S, C any] struct {
	key     string // as Spring spells it; dotted inside a block
	goName  string // the Spec field, for values built in code
	alias   []string
	want    string               // what a value must be: "an integer"; "" for a block
	set     func(s *S, v *value) // reads v into s; nil: accepted without effect, with anything below it
	inherit func(s *S, base S)   // fills s's field from base if unset; nil: not inherited
	apply   func(s S, c *C) bool // copies the field into c if set; nil: c has no such field
	own     func(s S) error      // if set, checks the value alone; the whole Config is checked once resolved
}

// parser reads a scalar as T, or says why it refuses it; check, if set,
// checks a value on its own (see field.own).
type parser[T any] struct {
	want  string
	read  func(s string) (T, string) // the value, or why it is refused
	check func(key string, x T) error
}

func ptr[S, C, T any](key, goName string, p parser[T], get func(*S) **T, to func(*C) *T, alias ...string) field[S, C] {
	f := field[S, C]{key: key, goName: goName, alias: alias, want: p.want,
		set: func(s *S, v *value) {
			if x, ok := p.parse(v); ok {
				*get(s) = &x
			}
		},
		inherit: func(s *S, b S) { *get(s) = cmp.Or(*get(s), *get(&b)) },
	}
	if to != nil {
		f.apply = func(s S, c *C) bool {
			if p := *get(&s); p != nil {
				*to(c) = *p
			}
			return *get(&s) != nil
		}
	}
	if p.check != nil {
		f.own = func(s S) error {
			if x := *get(&s); x != nil {
				return p.check(key, *x)
			}
			return nil
		}
	}
	return f
}

// leaf is a key of a block, set in place.
func leaf[B, T any](key string, p parser[T], get func(*B) *T, alias ...string) field[B, struct{}] {
	return field[B, struct{}]{key: key, alias: alias, want: p.want, set: func(b *B, v *value) {
		if x, ok := p.parse(v); ok {
			*get(b) = x
		}
	}}
}

func baseConfig[S, C any](get func(*S) *string) field[S, C] {
	return field[S, C]{key: "baseConfig", goName: "BaseConfig", want: "a config name", set: func(s *S, v *value) {
		if x, ok := v.scalar("a config name"); ok && x == "" {
			v.fail("must name a config, got %q", v.p.value)
		} else {
			*get(s) = x
		}
	}}
}

// Error is registry.ConfigError.
type Error struct {
	File    string // the file read, or ""
	Line    int    // 1-based; 0 for values built in code
	Path    string // a key path, or a Go expression for values built in code
	Profile string // the profile expression of the document it is in, or ""
	Msg     string // names the entry, the field and the value
}

// Error returns the message with its file, line, path and profile.
func (e *Error) Error() string {
	s := "registry: "
	if e.Line > 0 {
		s += cmp.Or(e.File, "line") + map[bool]string{true: ":", false: " "}[e.File != ""] + strconv.Itoa(e.Line) + ": "
	} else if e.File != "" {
		s += e.File + ": "
	}
	s += e.Msg
	if e.Path != "" {
		s += " (at " + e.Path + ")"
	}
	if e.Profile != "" {
		s += " (in the document for profile " + strconv.Quote(e.Profile) + ")"
	}
	return s
}

const (
	defaultName     = "default"
	defaultBuffer   = 100   // Spring's eventConsumerBufferSize default
	maxBuffer       = 10000 // the largest EventBufferSize
	maxErrors       = 20    // problems one Load or Validate reports at most
	maxReportedName = 10    // known names listed in an error
)

// where is where a value came from, for errors.
type where struct {
	file, path, key, profile string
	line, order              int // order: the file's place among those read
}

// errList collects Errors, with their file's order, and warnings.
type errList struct {
	errs  []ordered
	warns []string
}

type ordered struct {
	*Error
	order int
}

func (l *errList) add(w where, format string, args ...any) {
	e := &Error{File: w.file, Line: w.line, Path: w.path, Profile: w.profile, Msg: fmt.Sprintf(format, args...)}
	if len(l.errs) < 50*maxErrors && !slices.ContainsFunc(l.errs, func(o ordered) bool { return *o.Error == *e }) {
		l.errs = append(l.errs, ordered{e, w.order})
	}
}

// err returns the errors in file and line order (those with no line after
// their file's), up to maxErrors, joined.
func (l *errList) err() error {
	slices.SortStableFunc(l.errs, func(a, b ordered) int {
		return cmp.Or(cmp.Compare(a.order, b.order), cmp.Compare(min(b.Line, 1), min(a.Line, 1)), cmp.Compare(a.Line, b.Line))
	})
	var errs []error
	for _, e := range l.errs[:min(len(l.errs), maxErrors)] {
		errs = append(errs, e.Error)
	}
	return errors.Join(errs...)
}

// locator tells where an entry's field came from: key is the field's
// Spring key, "" for the entry itself.
type locator func(k string, shared bool, name, key string) where

// goLocate describes values built in code: Pools["mail"].KeepAlive.
func goLocate(k string, shared bool, name, key string) where {
	p := map[string]string{"semaphore": "Semaphore", "pool": "Pool"}[k] + map[bool]string{true: "Configs", false: "s"}[shared] + "[" + strconv.Quote(name) + "]"
	if key != "" {
		key = map[string]string{"semaphore": semaphoreKind.goName(key), "pool": poolKind.goName(key)}[k]
		p += "." + key
	}
	return where{path: p, key: key}
}

func section(k string, shared bool) string {
	return k + map[bool]string{true: " config", false: " instance"}[shared]
}

// entry is an entry being checked, for its errors.
type entry struct {
	l      *errList
	loc    locator
	kind   string
	shared bool
	name   string
}

// add reports a problem of the entry, at its field key ("" for the entry).
func (e entry) add(key, format string, args ...any) {
	e.l.add(e.loc(e.kind, e.shared, e.name, key), "%s %q: "+format, append([]any{section(e.kind, e.shared), e.name}, args...)...)
}

// fail reports a problem of the field key, with its name as spelt first.
func (e entry) fail(key, format string, args ...any) {
	e.add(key, "%s "+format, append([]any{e.loc(e.kind, e.shared, e.name, key).key}, args...)...)
}

// Resolved is a valid Config with its shared configurations' chains
// merged, ready to build bulkheads from.
type Resolved struct {
	cfg  Config
	sem  map[string]SemaphoreSpec
	pool map[string]PoolSpec
}

// Extra is what a configuration gives a bulkhead besides its Config.
type Extra struct {
	Buffer    int                    // event buffer size
	Adaptive  *adaptive.Config       // nil: no controller
	Keyed     *semaphore.KeyedConfig // a keyed semaphore's config; nil: not keyed
	KeyedPool *pool.KeyedConfig      // a keyed pool's config; nil: not keyed
}

// Validate checks every value, name and BaseConfig reference; the error
// joins one *Error per problem.
func (c Config) Validate() error {
	_, err := Resolve(c)
	return err
}

// Resolve validates c and resolves its shared configurations.
func Resolve(c Config) (*Resolved, error) {
	var l errList
	res := resolve(c, &l, goLocate)
	if len(l.errs) > 0 {
		return nil, l.err()
	}
	return res, nil
}

func resolve(c Config, l *errList, loc locator) *Resolved {
	return &Resolved{cfg: c,
		sem:  semaphoreKind.compile(c.SemaphoreConfigs, c.Semaphores, l, loc, checkKeyed),
		pool: poolKind.compile(c.PoolConfigs, c.Pools, l, loc, checkKeyedPool)}
}

// Semaphore returns what r gives the named semaphore, and whether r lists it.
func (r *Resolved) Semaphore(name string) (semaphore.Config, Extra, bool) {
	s, ok := r.cfg.Semaphores[name]
	s = semaphoreKind.instance(r.sem, s)
	c, x := semaphoreKind.config(s, false), extra(s)
	if s.MaxConcurrentCallsPerKey != nil {
		x.Keyed = &semaphore.KeyedConfig{MaxConcurrentCalls: c.MaxConcurrentCalls, MaxActiveKeys: *cmp.Or(s.MaxActiveKeys, new(0)),
			PerKey: semaphore.Config{MaxConcurrentCalls: *s.MaxConcurrentCallsPerKey, MaxWaitDuration: c.MaxWaitDuration}}
	}
	return c, x, ok
}

// Pool returns what r gives the named pool, and whether r lists it.
func (r *Resolved) Pool(name string) (pool.Config, Extra, bool) {
	s, ok := r.cfg.Pools[name]
	s = poolKind.instance(r.pool, s)
	c, x := poolKind.config(s, false), extra(s)
	if s.MaxRunningPerKey != nil || s.QueueCapacityPerKey != nil {
		x.KeyedPool = &pool.KeyedConfig{Config: c, MaxRunningPerKey: *cmp.Or(s.MaxRunningPerKey, new(0)), QueueCapacityPerKey: *cmp.Or(s.QueueCapacityPerKey, new(0))}
	}
	return c, x, ok
}

// Semaphores returns the semaphore instances r lists, sorted.
func (r *Resolved) Semaphores() []string { return slices.Sorted(maps.Keys(r.cfg.Semaphores)) }

// Pools returns the pool instances r lists, sorted.
func (r *Resolved) Pools() []string { return slices.Sorted(maps.Keys(r.cfg.Pools)) }

// Config returns the configuration r was resolved from.
func (r *Resolved) Config() Config { return r.cfg }

// checkCore refuses a core size above the maximum, as Spring does; a core
// size alone has no effect here, which Load reports as a warning.
func checkCore(s PoolSpec, c pool.Config, e entry) {
	if s.CoreWorkers == nil || e.shared {
		return
	}
	switch w, name := e.loc("pool", false, e.name, "coreThreadPoolSize"), e.name; {
	case *s.CoreWorkers < 0 || *s.CoreWorkers > c.MaxWorkers:
		e.fail("coreThreadPoolSize", "must be between 0 and maxThreadPoolSize (%d), got %d", c.MaxWorkers, *s.CoreWorkers)
	case s.MaxWorkers == nil:
		e.l.warns = append(e.l.warns, fmt.Sprintf("pool instance %q: %s %d has no effect: a Go pool starts workers on demand up to maxThreadPoolSize, which is unset here and defaults to %d (GOMAXPROCS) (at %s)",
			name, w.key, *s.CoreWorkers, c.MaxWorkers, w.path))
	}
}

func (k *kind[S, C]) goName(key string) string {
	if i := slices.IndexFunc(k.fields, func(f field[S, C]) bool { return f.key == key }); i >= 0 {
		return k.fields[i].goName
	}
	return key
}

// checkKeyed checks the keys that make a semaphore keyed, this library's
// extension: maxConcurrentCalls is then the total.
func checkKeyed(s SemaphoreSpec, _ semaphore.Config, e entry) {
	fail := e.fail
	switch per := s.MaxConcurrentCallsPerKey; {
	case per == nil && s.MaxActiveKeys != nil:
		fail("maxActiveKeys", "has no effect without maxConcurrentCallsPerKey")
	case per == nil:
	case *per < 1 || *per > semaphore.MaxLimit:
		fail("maxConcurrentCallsPerKey", "must be between 1 and %d, got %d", semaphore.MaxLimit, *per)
	case s.MaxActiveKeys != nil && *s.MaxActiveKeys < 0:
		fail("maxActiveKeys", "must be >= 0 (0 means 65536), got %d", *s.MaxActiveKeys)
	case s.Adaptive != nil:
		fail("adaptive", "is not supported on a keyed semaphore (one with maxConcurrentCallsPerKey)")
	default:
		// semaphore.KeyedConfig.Validate refuses them too, but a keyed
		// instance's PerKey is built from the keys below only.
		const which = "a keyed semaphore (one with maxConcurrentCallsPerKey), whose lines are first in, first out, bounded by maxWaitDuration only"
		l, x := s.Line, s.Extras
		switch {
		case l.MaxWaitingCalls != nil && *l.MaxWaitingCalls != 0:
			fail("maxWaitingCalls", "is not supported on %s, got %d", which, *l.MaxWaitingCalls)
		case l.MinDeadlineSlack != nil && *l.MinDeadlineSlack != 0:
			fail("minDeadlineSlack", "is not supported on %s, got %v", which, *l.MinDeadlineSlack)
		case l.QueueOrder != nil && *l.QueueOrder != bulkhead.FIFO:
			fail("queueOrder", "must be fifo on %s, got %v", which, *l.QueueOrder)
		case l.LIFOThreshold != nil && *l.LIFOThreshold != 0:
			fail("lifoThreshold", "is not supported on %s, got %d", which, *l.LIFOThreshold)
		case l.CoDel != nil:
			fail("codel", "is not supported on %s", which)
		case x.Priorities != nil:
			fail("priorities", "is not supported on %s; give each priority its own keyed semaphore", which)
		case x.Shadow != nil:
			fail("shadow", "is not supported on %s; shadow a plain semaphore", which)
		case x.Observe != nil && *x.Observe:
			fail("observe", "is not supported on %s; observe with a plain semaphore", which)
		}
	}
	if s.Adaptive != nil && s.Extras.Shadow != nil {
		// the controller would move the limit below the shadow's
		fail("shadow", "is not supported beside adaptive (use adaptive.shadow: true to try an adaptive limit)")
	}
}

// checkKeyedPool checks checkCore's key and those that make a pool keyed;
// bounds from maxThreadPoolSize and queueCapacity, on instances only.
func checkKeyedPool(s PoolSpec, c pool.Config, e entry) {
	checkCore(s, c, e)
	fail, shared := e.fail, e.shared
	run, queue := s.MaxRunningPerKey, s.QueueCapacityPerKey
	const which = "a keyed pool (one with maxRunningPerKey or queueCapacityPerKey)"
	switch {
	case run == nil && queue == nil:
	case run != nil && (*run < 0 || !shared && *run > c.MaxWorkers):
		fail("maxRunningPerKey", "must be between 0 and maxThreadPoolSize (%d) (0 means maxThreadPoolSize), got %d", c.MaxWorkers, *run)
	case queue != nil && (*queue < 0 || !shared && *queue > c.QueueCapacity):
		fail("queueCapacityPerKey", "must be between 0 and queueCapacity (%d) (0 means queueCapacity), got %d", c.QueueCapacity, *queue)
	case s.Adaptive != nil:
		fail("adaptive", "is not supported on %s", which)
	case c.QueueOrder != bulkhead.FIFO:
		fail("queueOrder", "must be fifo on %s, whose keys' tasks start in submission order, got %v", which, c.QueueOrder)
	case c.CoDel != nil:
		fail("codel", "is not supported on %s", which)
	case s.Shadow != nil:
		fail("shadow", "is not supported on %s", which)
	}
	if s.Adaptive != nil && s.Shadow != nil {
		// the controller would move maxThreadPoolSize below the shadow's
		fail("shadow", "is not supported beside adaptive (use adaptive.shadow: true to try an adaptive limit)")
	}
}

// over returns s's set fields over base's.
func (k *kind[S, C]) over(s, base S) S {
	for _, f := range k.fields {
		if f.inherit != nil {
			f.inherit(&s, base)
		}
	}
	return s
}

// config is the bulkhead's Config a resolved spec gives, without the
// fields checked on their own if skipOwn.
func (k *kind[S, C]) config(s S, skipOwn bool) C {
	c := k.defaults()
	for _, f := range k.fields {
		if f.apply != nil && (f.own == nil || !skipOwn) {
			f.apply(s, &c)
		}
	}
	return c
}

func extra(s spec) Extra {
	_, buf, ad := s.common()
	return Extra{Buffer: *cmp.Or(buf, new(defaultBuffer)), Adaptive: ad}
}

// instance resolves an instance's spec (listed or not) over its base.
func (k *kind[S, C]) instance(res map[string]S, s S) S {
	b, _, _ := s.common()
	if base, ok := res[cmp.Or(b, defaultName)]; ok {
		return k.over(s, base)
	}
	return s
}

func (k *kind[S, C]) compile(configs, instances map[string]S, l *errList, loc locator, final func(S, C, entry)) map[string]S {
	at := func(shared bool, name string) entry { return entry{l, loc, k.name, shared, name} }
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		k.check(configs[name], at(true, name))
	}
	for _, name := range slices.Sorted(maps.Keys(instances)) {
		k.check(instances[name], at(false, name))
	}
	names := sync.OnceValue(func() string { return known(configs) }) // once: it sorts
	res := k.resolve(configs, names, at)
	for _, name := range slices.Sorted(maps.Keys(res)) {
		final(res[name], k.config(res[name], false), at(true, name))
	}
	for _, name := range slices.Sorted(maps.Keys(instances)) {
		s := instances[name]
		if b, _, _ := s.common(); b != "" {
			if _, ok := configs[b]; !ok {
				at(false, name).fail("baseConfig", "names %q, which is not a known config (known: %s)", b, names())
				continue
			}
			if _, ok := res[b]; !ok {
				continue // its chain is broken: reported there
			}
		}
		full := k.instance(res, s)
		c := k.config(full, false)
		if err := c.Validate(); err != nil && k.config(full, true).Validate() == nil {
			// The fields checked on their own are at fault together: point
			// at the first of them the instance sets.
			key := ""
			if i := slices.IndexFunc(k.fields, func(f field[S, C]) bool { c := k.defaults(); return f.own != nil && f.apply != nil && f.apply(s, &c) }); i >= 0 {
				key = k.fields[i].key
			}
			at(false, name).add(key, "%s", err)
		}
		final(full, c, at(false, name))
	}
	return res
}

// check validates an entry's name and each field alone, through Validate:
// the defaults are valid, so an error is the field's.
func (k *kind[S, C]) check(s S, e entry) {
	switch {
	case strings.TrimSpace(e.name) == "":
		e.add("", "a name must not be empty")
	case !utf8.ValidString(e.name):
		e.add("", "a name must be valid UTF-8")
	}
	for _, f := range k.fields {
		c := k.defaults()
		var err error
		switch {
		case f.own != nil:
			err = f.own(s)
		case f.apply == nil || !f.apply(s, &c):
			continue
		default:
			err = c.Validate()
		}
		if err != nil {
			msg := err.Error()
			if key := e.loc(k.name, e.shared, e.name, f.key).key; !strings.HasPrefix(normalize(msg), normalize(key)) {
				msg = key + ": " + msg
			}
			e.add(f.key, "%s", msg)
		}
	}
	_, buf, ad := s.common()
	if buf != nil && (*buf < 0 || *buf > maxBuffer) {
		e.fail("eventConsumerBufferSize", "must be between 0 and %d, got %d", maxBuffer, *buf)
	}
	if ad == nil {
		return
	}
	err := ad.Validate()
	if ad.Custom != nil {
		err = errors.New("Custom is not supported in a registry's configuration (one algorithm value would serve every bulkhead that inherits the block); use adaptive.Attach")
	}
	if err != nil {
		// adaptive.Config.Validate's messages begin with the key: point at
		// its line when it was read from a file, at the block otherwise.
		sub, _, _ := strings.Cut(err.Error(), " ")
		e.add("adaptive."+sub, "adaptive.%s", err)
	}
}

// resolve merges each shared configuration over its chain once (linear
// work); one on a cycle or naming an unknown base is reported and left out.
func (k *kind[S, C]) resolve(configs map[string]S, names func() string, at func(bool, string) entry) map[string]S {
	res := make(map[string]S, len(configs))
	const onPath, done = 1, 2
	state := make(map[string]int, len(configs))
	var visit func(name string, path []string) bool
	visit = func(name string, path []string) bool {
		switch _, listed := configs[name]; {
		case state[name] == done:
			_, ok := res[name]
			return ok
		case state[name] == onPath:
			i := slices.Index(path, name)
			cycle := append(slices.Clone(path[i:min(len(path), i+maxReportedName)]), name)
			if len(path)-i > maxReportedName {
				cycle[len(cycle)-1] = "... -> " + name
			}
			at(true, path[i]).fail("baseConfig", "makes a cycle: %s", strings.Join(cycle, " -> "))
			return false
		case !listed:
			at(true, path[len(path)-1]).fail("baseConfig", "names %q, which is not a known config (known: %s)", name, names())
			return false
		}
		state[name] = onPath
		s := configs[name]
		b, _, _ := s.common()
		if _, ok := configs[defaultName]; b == "" && ok && name != defaultName {
			b = defaultName
		}
		ok := b == "" || visit(b, append(path, name))
		if state[name] = done; ok {
			if b != "" {
				s = k.over(s, res[b])
			}
			res[name] = s
		}
		return ok
	}
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		visit(name, nil)
	}
	return res
}

func known[S any](configs map[string]S) string {
	keys := slices.Sorted(maps.Keys(configs))
	if len(keys) > maxReportedName {
		keys = append(keys[:maxReportedName], "...")
	}
	return map[bool]string{true: "none", false: strings.Join(keys, ", ")}[len(keys) == 0]
}
