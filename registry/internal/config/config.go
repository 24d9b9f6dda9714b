// Package config is the registry's configuration: the typed Config, its
// validation and inheritance, and a loader that reads Spring Boot files the
// way Spring's binder does. Every document and file becomes one ordered list
// of properties (flattened key, value, file, line); profiles, placeholders
// and precedence are resolved on that list, and the result is bound onto
// Config with relaxed names. Package registry re-exports the types.
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

	"github.com/bulkhead-go/bulkhead/adaptive"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// Config is a registry's configuration. It is a plain value: build it in
// code, or read it from a Spring Boot file with Load or LoadFile.
//
// The two kinds are two namespaces, as in Resilience4j: a name may be a
// semaphore and a pool at once, and they are two bulkheads. In each kind,
// the shared configuration named "default" applies to every instance and
// every other shared configuration that names no BaseConfig (as Spring does
// since Resilience4j 2.0.1), including instances asked for by name but not
// listed.
//
// A field left nil is unset and is inherited: an entry's own value wins,
// then its BaseConfig's (or "default"'s), and so on up the chain; whatever
// is still unset takes semaphore.DefaultConfig() or pool.DefaultConfig().
type Config struct {
	// SemaphoreConfigs are shared semaphore configurations by name
	// (Spring's resilience4j.bulkhead.configs).
	SemaphoreConfigs map[string]SemaphoreSpec
	// Semaphores are the semaphore bulkheads by name
	// (resilience4j.bulkhead.instances), which New creates.
	Semaphores map[string]SemaphoreSpec
	// PoolConfigs are shared pool configurations by name
	// (resilience4j.thread-pool-bulkhead.configs).
	PoolConfigs map[string]PoolSpec
	// Pools are the pool bulkheads by name
	// (resilience4j.thread-pool-bulkhead.instances), which New creates.
	Pools map[string]PoolSpec

	// Strict makes Registry.Semaphore and Registry.Pool fail with
	// ErrNotConfigured for a name this configuration does not list,
	// instead of creating it from "default".
	Strict bool
	// RecordEvents makes every bulkhead keep its last events (its
	// EventBufferSize, 100 by default) for Registry.Handler. With it off
	// the status page shows no events and calls build none for it.
	RecordEvents bool

	// Warnings are what Load accepted but the registry does not do as
	// Spring would (a coreThreadPoolSize with no maxThreadPoolSize). New
	// and Validate ignore them.
	Warnings []string
}

// SemaphoreSpec configures a semaphore bulkhead or a shared semaphore
// configuration. Nil fields are unset and inherited (see Config).
type SemaphoreSpec struct {
	// BaseConfig names the shared configuration this one inherits from;
	// empty means "default" (for "default" itself: nothing).
	BaseConfig string
	// MaxConcurrentCalls is semaphore.Config.MaxConcurrentCalls.
	MaxConcurrentCalls *int
	// MaxWaitDuration is semaphore.Config.MaxWaitDuration.
	MaxWaitDuration *time.Duration
	// EventBufferSize is how many recent events the status page keeps for
	// the instance when Config.RecordEvents is on, 0 to 10000; unset
	// means 100 (Spring's eventConsumerBufferSize).
	EventBufferSize *int
	// Adaptive, if set, attaches an adaptive controller that moves
	// MaxConcurrentCalls between its MinLimit and MaxLimit (see
	// Registry). It is inherited as a whole, like the other fields: an
	// entry's own block replaces its base's, it is not merged with it.
	// Config.Custom is refused. YAML: adaptive, this library's extension.
	Adaptive *adaptive.Config
}

// PoolSpec configures a pool bulkhead or a shared pool configuration. Nil
// fields are unset and inherited (see Config).
type PoolSpec struct {
	// BaseConfig names the shared configuration this one inherits from;
	// empty means "default" (for "default" itself: nothing).
	BaseConfig string
	// MaxWorkers is pool.Config.MaxWorkers (Spring's maxThreadPoolSize).
	MaxWorkers *int
	// CoreWorkers is Spring's coreThreadPoolSize. A Go pool starts workers
	// on demand up to MaxWorkers, so it has no effect; one above MaxWorkers
	// is refused, as Spring refuses it.
	CoreWorkers *int
	// QueueCapacity is pool.Config.QueueCapacity.
	QueueCapacity *int
	// QueueTimeout is pool.Config.QueueTimeout (YAML: maxWaitDuration).
	QueueTimeout *time.Duration
	// KeepAlive is pool.Config.KeepAlive (Spring's keepAliveDuration).
	KeepAlive *time.Duration
	// EventBufferSize is as in SemaphoreSpec.
	EventBufferSize *int
	// Adaptive is as in SemaphoreSpec; the controller moves MaxWorkers.
	Adaptive *adaptive.Config
}

func (s SemaphoreSpec) common() (string, *int, *adaptive.Config) {
	return s.BaseConfig, s.EventBufferSize, s.Adaptive
}

func (s PoolSpec) common() (string, *int, *adaptive.Config) {
	return s.BaseConfig, s.EventBufferSize, s.Adaptive
}

// The keys of each kind, in the order error messages list them. Adding a
// key is one line here (and its Spec field): ptr binds a Spring key to a
// Spec field and, if it has one, to the field of the bulkhead's Config it
// sets; aliases follow. Keys inside a block are dotted ("adaptive.window").
var (
	semaphoreKind = &kind[SemaphoreSpec, semaphore.Config]{name: "semaphore", defaults: semaphore.DefaultConfig, fields: slices.Concat(
		[]field[SemaphoreSpec, semaphore.Config]{
			ptr("maxConcurrentCalls", "MaxConcurrentCalls", integer, func(s *SemaphoreSpec) **int { return &s.MaxConcurrentCalls }, func(c *semaphore.Config) *int { return &c.MaxConcurrentCalls }, "maxConcurrentCall"),
			ptr("maxWaitDuration", "MaxWaitDuration", duration, func(s *SemaphoreSpec) **time.Duration { return &s.MaxWaitDuration }, func(c *semaphore.Config) *time.Duration { return &c.MaxWaitDuration }, "maxWaitTime"),
			baseConfig[SemaphoreSpec, semaphore.Config](func(s *SemaphoreSpec) *string { return &s.BaseConfig }),
			ptr[SemaphoreSpec, semaphore.Config]("eventConsumerBufferSize", "EventBufferSize", integer, func(s *SemaphoreSpec) **int { return &s.EventBufferSize }, nil),
			ignored[SemaphoreSpec, semaphore.Config]("writableStackTraceEnabled"),
			ignored[SemaphoreSpec, semaphore.Config]("fairCallHandlingEnabled"),
			ignored[SemaphoreSpec, semaphore.Config]("tags"),
		},
		adaptiveFields[SemaphoreSpec, semaphore.Config](func(s *SemaphoreSpec) **adaptive.Config { return &s.Adaptive }),
	)}
	poolKind = &kind[PoolSpec, pool.Config]{name: "pool", defaults: pool.DefaultConfig, fields: slices.Concat(
		[]field[PoolSpec, pool.Config]{
			ptr("maxThreadPoolSize", "MaxWorkers", integer, func(s *PoolSpec) **int { return &s.MaxWorkers }, func(c *pool.Config) *int { return &c.MaxWorkers }, "maxWorkers"),
			ptr[PoolSpec, pool.Config]("coreThreadPoolSize", "CoreWorkers", integer, func(s *PoolSpec) **int { return &s.CoreWorkers }, nil),
			ptr("queueCapacity", "QueueCapacity", integer, func(s *PoolSpec) **int { return &s.QueueCapacity }, func(c *pool.Config) *int { return &c.QueueCapacity }),
			ptr("maxWaitDuration", "QueueTimeout", duration, func(s *PoolSpec) **time.Duration { return &s.QueueTimeout }, func(c *pool.Config) *time.Duration { return &c.QueueTimeout }, "queueTimeout"),
			ptr("keepAliveDuration", "KeepAlive", duration, func(s *PoolSpec) **time.Duration { return &s.KeepAlive }, func(c *pool.Config) *time.Duration { return &c.KeepAlive }, "keepAlive"),
			baseConfig[PoolSpec, pool.Config](func(s *PoolSpec) *string { return &s.BaseConfig }),
			ptr[PoolSpec, pool.Config]("eventConsumerBufferSize", "EventBufferSize", integer, func(s *PoolSpec) **int { return &s.EventBufferSize }, nil),
			ignored[PoolSpec, pool.Config]("writableStackTraceEnabled"),
			ignored[PoolSpec, pool.Config]("contextPropagators"),
			ignored[PoolSpec, pool.Config]("tags"),
		},
		adaptiveFields[PoolSpec, pool.Config](func(s *PoolSpec) **adaptive.Config { return &s.Adaptive }),
	)}
)

// adaptiveFields are the keys of an adaptive block, whose Spec field get
// returns.
func adaptiveFields[S, C any](get func(*S) **adaptive.Config) []field[S, C] {
	in := func(s *S) *adaptive.Config {
		if *get(s) == nil {
			*get(s) = &adaptive.Config{}
		}
		return *get(s)
	}
	i := func(key string, f func(*adaptive.Config) *int) field[S, C] {
		return leaf[S, C]("adaptive."+key, integer, func(s *S) *int { return f(in(s)) })
	}
	d := func(key string, f func(*adaptive.Config) *time.Duration) field[S, C] {
		return leaf[S, C]("adaptive."+key, duration, func(s *S) *time.Duration { return f(in(s)) })
	}
	n := func(key string, f func(*adaptive.Config) *float64) field[S, C] {
		return leaf[S, C]("adaptive."+key, number, func(s *S) *float64 { return f(in(s)) })
	}
	return []field[S, C]{
		{key: "adaptive", goName: "Adaptive", set: func(s *S, v *value) { in(s) },
			inherit: func(s *S, b S) { *get(s) = cmp.Or(*get(s), *get(&b)) }},
		leaf[S, C]("adaptive.algorithm", str, func(s *S) *string { return &in(s).Algorithm }),
		i("minLimit", func(a *adaptive.Config) *int { return &a.MinLimit }),
		i("maxLimit", func(a *adaptive.Config) *int { return &a.MaxLimit }),
		i("initialLimit", func(a *adaptive.Config) *int { return &a.InitialLimit }),
		d("window", func(a *adaptive.Config) *time.Duration { return &a.Window }),
		i("minSamples", func(a *adaptive.Config) *int { return &a.MinSamples }),
		n("vegas.alpha", func(a *adaptive.Config) *float64 { return &a.Vegas.Alpha }),
		n("vegas.beta", func(a *adaptive.Config) *float64 { return &a.Vegas.Beta }),
		d("vegas.noLoadWindow", func(a *adaptive.Config) *time.Duration { return &a.Vegas.NoLoadWindow }),
		n("vegas.backoff", func(a *adaptive.Config) *float64 { return &a.Vegas.Backoff }),
		n("gradient2.smoothing", func(a *adaptive.Config) *float64 { return &a.Gradient2.Smoothing }),
		n("gradient2.headroom", func(a *adaptive.Config) *float64 { return &a.Gradient2.Headroom }),
		i("gradient2.longWindow", func(a *adaptive.Config) *int { return &a.Gradient2.LongWindow }),
		n("gradient2.tolerance", func(a *adaptive.Config) *float64 { return &a.Gradient2.Tolerance }),
		n("gradient2.backoff", func(a *adaptive.Config) *float64 { return &a.Gradient2.Backoff }),
		n("aimd.increase", func(a *adaptive.Config) *float64 { return &a.AIMD.Increase }),
		n("aimd.backoff", func(a *adaptive.Config) *float64 { return &a.AIMD.Backoff }),
		d("aimd.slowCall", func(a *adaptive.Config) *time.Duration { return &a.AIMD.SlowCall }),
		leaf[S, C]("adaptive.shadow", boolean, func(s *S) *bool { return &in(s).Shadow }),
	}
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
}

// parser reads a value as T, reporting false (and an error on v) if it
// cannot.
type parser[T any] struct {
	want  string
	parse func(*value) (T, bool)
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
				return true
			}
			return false
		}
	}
	return f
}

// leaf is a key inside a block, set in place.
func leaf[S, C, T any](key string, p parser[T], get func(*S) *T) field[S, C] {
	return field[S, C]{key: key, goName: "Adaptive", want: p.want, set: func(s *S, v *value) {
		if x, ok := p.parse(v); ok {
			*get(s) = x
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

func ignored[S, C any](key string) field[S, C] { return field[S, C]{key: key} }

// Error is the error of an invalid configuration. Its message names the
// instance or shared configuration, the field and the value.
type Error struct {
	// File is the file LoadFile read, or "".
	File string
	// Line is the 1-based line in the input, or 0 when the configuration
	// did not come from a file.
	Line int
	// Path locates the problem: a key path such as
	// "resilience4j.bulkhead.instances.payment.maxConcurrentCalls", or a Go
	// expression such as `Semaphores["payment"].MaxConcurrentCalls`.
	Path string
	// Profile is the profile expression of the document the problem is in
	// (its spring.config.activate.on-profile), or "".
	Profile string
	// Msg says what is wrong.
	Msg string
}

// Error returns the message with its file, line, path and profile.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("registry: ")
	switch {
	case e.File != "" && e.Line > 0:
		b.WriteString(e.File + ":" + strconv.Itoa(e.Line) + ": ")
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	b.WriteString(e.Msg)
	if e.Path != "" {
		b.WriteString(" (at " + e.Path + ")")
	}
	if e.Profile != "" {
		b.WriteString(" (in the document for profile " + strconv.Quote(e.Profile) + ")")
	}
	return b.String()
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

// errList collects Errors and warnings.
type errList struct {
	errs  []*Error
	order []int // each error's file order, for sorting
	warns []string
}

func (l *errList) add(w where, format string, args ...any) {
	if len(l.errs) >= 50*maxErrors {
		return
	}
	e := &Error{File: w.file, Line: w.line, Path: w.path, Profile: w.profile, Msg: fmt.Sprintf(format, args...)}
	for _, old := range l.errs {
		if *old == *e {
			return
		}
	}
	l.errs, l.order = append(l.errs, e), append(l.order, w.order)
}

// err returns the errors in file and line order, up to maxErrors, joined.
func (l *errList) err() error {
	idx := make([]int, len(l.errs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ea, eb := l.errs[a], l.errs[b]
		return cmp.Or(cmp.Compare(l.order[a], l.order[b]), cmp.Compare(min(ea.Line, 1), min(eb.Line, 1))*-1, cmp.Compare(ea.Line, eb.Line))
	})
	errs := make([]error, 0, min(len(idx), maxErrors))
	for _, i := range idx[:min(len(idx), maxErrors)] {
		errs = append(errs, l.errs[i])
	}
	return errors.Join(errs...)
}

// locator tells where an entry's field came from: key is the field's
// Spring key, "" for the entry itself.
type locator interface {
	locate(k string, shared bool, name, key string) where
}

// goLocator describes values built in code.
type goLocator struct{}

func (goLocator) locate(k string, shared bool, name, key string) where {
	p := map[string]string{"semaphore": "Semaphore", "pool": "Pool"}[k] + "s"
	if shared {
		p = strings.TrimSuffix(p, "s") + "Configs"
	}
	p += "[" + strconv.Quote(name) + "]"
	if key != "" {
		key = goName(k, key)
		p += "." + key
	}
	return where{path: p, key: key}
}

func goName(k, key string) string {
	if k == "pool" {
		return fieldGoName(poolKind.fields, key)
	}
	return fieldGoName(semaphoreKind.fields, key)
}

func fieldGoName[S, C any](fs []field[S, C], key string) string {
	for _, f := range fs {
		if f.key == key {
			return f.goName
		}
	}
	return key
}

func section(k string, shared bool) string {
	if shared {
		return k + " config"
	}
	return k + " instance"
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
	Buffer   int              // event buffer size
	Adaptive *adaptive.Config // nil: no controller
}

// Validate checks every value through semaphore.Config.Validate and
// pool.Config.Validate, the event buffer sizes, the names, and every
// BaseConfig reference (unknown names and cycles are errors). The error
// joins one *Error per problem.
func (c Config) Validate() error {
	_, err := Resolve(c)
	return err
}

// Resolve validates c and resolves its shared configurations.
func Resolve(c Config) (*Resolved, error) {
	var l errList
	res := resolve(c, &l, goLocator{})
	if len(l.errs) > 0 {
		return nil, l.err()
	}
	return res, nil
}

func resolve(c Config, l *errList, loc locator) *Resolved {
	return &Resolved{cfg: c,
		sem:  semaphoreKind.compile(c.SemaphoreConfigs, c.Semaphores, l, loc, nil),
		pool: poolKind.compile(c.PoolConfigs, c.Pools, l, loc, checkCore)}
}

// Semaphore returns what r gives the named semaphore, and whether r lists
// it.
func (r *Resolved) Semaphore(name string) (semaphore.Config, Extra, bool) {
	s, ok := r.cfg.Semaphores[name]
	c, x := semaphoreKind.build(semaphoreKind.instance(r.sem, s))
	return c, x, ok
}

// Pool returns what r gives the named pool, and whether r lists it.
func (r *Resolved) Pool(name string) (pool.Config, Extra, bool) {
	s, ok := r.cfg.Pools[name]
	c, x := poolKind.build(poolKind.instance(r.pool, s))
	return c, x, ok
}

// Names returns the instances of c of kind k ("semaphore" or "pool"),
// sorted.
func (c Config) names(pools bool) []string {
	if pools {
		return slices.Sorted(maps.Keys(c.Pools))
	}
	return slices.Sorted(maps.Keys(c.Semaphores))
}

// Semaphores returns the semaphore instances r lists, sorted.
func (r *Resolved) Semaphores() []string { return r.cfg.names(false) }

// Pools returns the pool instances r lists, sorted.
func (r *Resolved) Pools() []string { return r.cfg.names(true) }

// Config returns the configuration r was resolved from.
func (r *Resolved) Config() Config { return r.cfg }

// checkCore refuses a core size above the maximum, as Spring does; a core
// size alone has no effect here, which Load reports as a warning.
func checkCore(s PoolSpec, c pool.Config, l *errList, loc locator, name string) {
	if s.CoreWorkers == nil {
		return
	}
	w := loc.locate("pool", false, name, "coreThreadPoolSize")
	switch {
	case *s.CoreWorkers < 0 || *s.CoreWorkers > c.MaxWorkers:
		l.add(w, "pool instance %q: %s must be between 0 and maxThreadPoolSize (%d), got %d", name, w.key, c.MaxWorkers, *s.CoreWorkers)
	case s.MaxWorkers == nil:
		l.warns = append(l.warns, fmt.Sprintf("pool instance %q: %s %d has no effect: a Go pool starts workers on demand up to maxThreadPoolSize, which is unset here and defaults to %d (GOMAXPROCS) (at %s)",
			name, w.key, *s.CoreWorkers, c.MaxWorkers, w.path))
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

// build turns a resolved spec into the bulkhead's config and extras.
func (k *kind[S, C]) build(s S) (C, Extra) {
	c := k.defaults()
	for _, f := range k.fields {
		if f.apply != nil {
			f.apply(s, &c)
		}
	}
	_, buf, ad := s.common()
	return c, Extra{Buffer: *cmp.Or(buf, new(defaultBuffer)), Adaptive: ad}
}

// instance resolves an instance's spec (listed or not) over its base.
func (k *kind[S, C]) instance(res map[string]S, s S) S {
	b, _, _ := s.common()
	if base, ok := res[cmp.Or(b, defaultName)]; ok {
		return k.over(s, base)
	}
	return s
}

func (k *kind[S, C]) compile(configs, instances map[string]S, l *errList, loc locator, final func(S, C, *errList, locator, string)) map[string]S {
	for _, shared := range []bool{true, false} {
		m := map[bool]map[string]S{true: configs, false: instances}[shared]
		for _, name := range slices.Sorted(maps.Keys(m)) {
			k.check(m[name], l, loc, shared, name)
		}
	}
	names := sync.OnceValue(func() string { return known(configs) }) // once: it sorts
	res := k.resolve(configs, names, l, loc)
	for _, name := range slices.Sorted(maps.Keys(instances)) {
		s := instances[name]
		if b, _, _ := s.common(); b != "" {
			if _, ok := configs[b]; !ok {
				w := loc.locate(k.name, false, name, "baseConfig")
				l.add(w, "%s %q: %s names %q, which is not a known config (known: %s)", section(k.name, false), name, w.key, b, names())
				continue
			}
			if _, ok := res[b]; !ok {
				continue // its chain is broken: reported there
			}
		}
		if final != nil {
			full := k.instance(res, s)
			c, _ := k.build(full)
			final(full, c, l, loc, name)
		}
	}
	return res
}

// check validates an entry's name and each of its fields on its own,
// through the kind's Validate: the defaults are valid, so an error is the
// field's.
func (k *kind[S, C]) check(s S, l *errList, loc locator, shared bool, name string) {
	sec := section(k.name, shared)
	switch {
	case strings.TrimSpace(name) == "":
		l.add(loc.locate(k.name, shared, name, ""), "%s %q: a name must not be empty", sec, name)
	case !utf8.ValidString(name):
		l.add(loc.locate(k.name, shared, name, ""), "%s %q: a name must be valid UTF-8", sec, name)
	}
	for _, f := range k.fields {
		c := k.defaults()
		if f.apply == nil || !f.apply(s, &c) {
			continue
		}
		if err := c.Validate(); err != nil {
			w := loc.locate(k.name, shared, name, f.key)
			msg := err.Error()
			if !strings.HasPrefix(normalize(msg), normalize(w.key)) {
				msg = w.key + ": " + msg
			}
			l.add(w, "%s %q: %s", sec, name, msg)
		}
	}
	_, buf, ad := s.common()
	if buf != nil && (*buf < 0 || *buf > maxBuffer) {
		w := loc.locate(k.name, shared, name, "eventConsumerBufferSize")
		l.add(w, "%s %q: %s must be between 0 and %d, got %d", sec, name, w.key, maxBuffer, *buf)
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
		l.add(loc.locate(k.name, shared, name, "adaptive."+sub), "%s %q: adaptive.%s", sec, name, err)
	}
}

// resolve merges every shared configuration over its chain, each one once,
// so that the work is linear in the number of configurations however long
// the chains. Configurations on a cycle or naming an unknown base are
// reported and left out.
func (k *kind[S, C]) resolve(configs map[string]S, names func() string, l *errList, loc locator) map[string]S {
	res := make(map[string]S, len(configs))
	const (
		unseen = iota
		onPath
		done
	)
	state := make(map[string]int, len(configs))
	sec := section(k.name, true)
	baseOf := func(name string) string {
		if b, _, _ := configs[name].common(); b != "" {
			return b
		}
		if _, ok := configs[defaultName]; ok && name != defaultName {
			return defaultName
		}
		return ""
	}
	for _, start := range slices.Sorted(maps.Keys(configs)) {
		var path []string
		cur := start
		for cur != "" && state[cur] == unseen {
			if _, ok := configs[cur]; !ok {
				break
			}
			state[cur] = onPath
			path = append(path, cur)
			cur = baseOf(cur)
		}
		ok := true
		switch {
		case cur == "":
		case state[cur] == onPath:
			// A cycle from cur to the end of path: report it once, at its
			// first member in path order.
			i := slices.Index(path, cur)
			cycle := append(slices.Clone(path[i:min(len(path), i+maxReportedName)]), cur)
			if len(path)-i > maxReportedName {
				cycle[len(cycle)-1] = "... -> " + cur
			}
			w := loc.locate(k.name, true, path[i], "baseConfig")
			l.add(w, "%s %q: %s makes a cycle: %s", sec, path[i], w.key, strings.Join(cycle, " -> "))
			ok = false
		case state[cur] == done:
			_, ok = res[cur]
		default: // unknown name
			last := path[len(path)-1]
			w := loc.locate(k.name, true, last, "baseConfig")
			l.add(w, "%s %q: %s names %q, which is not a known config (known: %s)", sec, last, w.key, cur, names())
			ok = false
		}
		for i := len(path) - 1; i >= 0; i-- {
			name := path[i]
			state[name] = done
			if !ok {
				continue
			}
			s := configs[name]
			if b := baseOf(name); b != "" {
				s = k.over(s, res[b])
			}
			res[name] = s
		}
	}
	return res
}

func known[S any](configs map[string]S) string {
	if len(configs) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(configs))
	if len(keys) > maxReportedName {
		keys = append(keys[:maxReportedName], "...")
	}
	return strings.Join(keys, ", ")
}
