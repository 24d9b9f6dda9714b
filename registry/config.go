package registry

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
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

// Config is a registry's configuration. It is a plain value: build it in
// code, or read it from YAML with [Load].
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
	// [ErrNotConfigured] for a name this configuration does not list,
	// instead of creating it from "default".
	Strict bool
	// RecordEvents makes every bulkhead keep its last events (its
	// EventBufferSize, 100 by default) for [Registry.Handler]. With it off
	// the status page shows no events and calls build none for it.
	RecordEvents bool

	// Warnings are what Load accepted but the registry does not do as
	// Spring would (a coreThreadPoolSize with no maxThreadPoolSize). New
	// and Validate ignore them.
	Warnings []string
}

// SemaphoreSpec configures a semaphore bulkhead or a shared semaphore
// configuration. Nil fields are unset and inherited (see [Config]).
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
	// [Registry]). It is inherited as a whole, like the other fields: an
	// entry's own block replaces its base's, it is not merged with it.
	// Config.Custom is refused. YAML: adaptive, this library's extension.
	Adaptive *adaptive.Config
}

// PoolSpec configures a pool bulkhead or a shared pool configuration. Nil
// fields are unset and inherited (see [Config]).
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
	// EventBufferSize is as in [SemaphoreSpec].
	EventBufferSize *int
	// Adaptive is as in [SemaphoreSpec]; the controller moves MaxWorkers.
	Adaptive *adaptive.Config
}

// ConfigError is the error of an invalid configuration. Its message names
// the instance or shared configuration, the field and the value.
type ConfigError struct {
	// File is the file LoadFile read, or "".
	File string
	// Line is the 1-based line in the YAML input, or 0 when the
	// configuration did not come from [Load].
	Line int
	// Path locates the problem: a YAML key path such as
	// "resilience4j.bulkhead.instances.payment.maxConcurrentCalls", or a Go
	// expression such as `Semaphores["payment"].MaxConcurrentCalls`.
	Path string
	// Msg says what is wrong.
	Msg string
}

// Error returns the message with its file, line and path.
func (e *ConfigError) Error() string {
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
	return b.String()
}

const (
	defaultName     = "default"
	defaultBuffer   = 100   // Spring's eventConsumerBufferSize default
	maxBuffer       = 10000 // the largest EventBufferSize
	maxErrors       = 20    // problems one Load or Validate reports at most
	maxReportedName = 10    // known names listed in an error
)

// errList collects ConfigErrors up to maxErrors, and warnings. It also
// counts the work done: one unit per step of each loop over the input (a
// key, value, list item or alias read, a baseConfig link followed, a spec
// merged over its base, a name sorted), which the tests check grows
// linearly with the input.
type errList struct {
	errs  []error
	warns []string
	work  int
}

func (l *errList) add(line int, path, format string, args ...any) {
	if len(l.errs) >= maxErrors {
		return
	}
	e := &ConfigError{Line: line, Path: path, Msg: fmt.Sprintf(format, args...)}
	for _, old := range l.errs {
		if *old.(*ConfigError) == *e {
			return
		}
	}
	l.errs = append(l.errs, e)
}

func (l *errList) full() bool { return len(l.errs) >= maxErrors }

// section is one of the four maps of a Config.
type section struct {
	kind   bulkhead.Kind
	shared bool
}

// String names the section for messages: "semaphore instance".
func (s section) String() string {
	if s.shared {
		return s.kind.String() + " config"
	}
	return s.kind.String() + " instance"
}

// goName is the Config field of the section.
func (s section) goName() string {
	n := map[bulkhead.Kind]string{bulkhead.Semaphore: "Semaphore", bulkhead.Pool: "Pool"}[s.kind]
	if s.shared {
		return n + "Configs"
	}
	return n + "s"
}

// locator tells where an entry's field came from, for errors: the line,
// the path and the key as written ("" field: the entry itself).
type locator interface {
	locate(sec section, name, field string) (line int, path, key string)
}

// goLocator describes values built in code.
type goLocator struct{}

func (goLocator) locate(sec section, name, field string) (int, string, string) {
	field, _, _ = strings.Cut(field, ".") // "Adaptive.minLimit": the block
	p := sec.goName() + "[" + strconv.Quote(name) + "]"
	if field != "" {
		p += "." + field
	}
	return 0, p, field
}

// field is one setting of a kind: its Spring key, the other keys accepted
// for it, and the Spec field it sets ("" for a key accepted without
// effect). A Spec field reaches the bulkhead's Config field of the same
// name, if the Config has one.
type field struct {
	key   string
	alias []string
	name  string
}

// kindDesc is everything that differs between the two kinds.
type kindDesc[S any, C comparable] struct {
	kind      bulkhead.Kind
	ptr       func(c *Config, shared bool) *map[string]S
	res       func(c *compiled) *resolved[S]
	fields    []field
	base      func(S) string
	buffer    func(S) *int
	adaptive  func(S) *adaptive.Config
	defaults  func() C
	validate  func(C) error
	limit     func(c *C) *int // MaxConcurrentCalls or MaxWorkers
	create    func(name string, c C) (handle, error)
	status    func(C) statusConfig
	finalize  func(s S, c C, l *errList, loc locator, sec section, name string)
	validKeys []string       // the Spring keys, for suggestions
	index     map[string]int // normalized key or alias -> field
}

// over returns s's set fields over base's: every pointer field of s that
// is not nil, and s's BaseConfig.
func over[S any](s, base S) S {
	sv, bv := reflect.ValueOf(&s).Elem(), reflect.ValueOf(&base).Elem()
	for i := range sv.NumField() {
		if f := sv.Field(i); f.Kind() != reflect.Pointer || !f.IsNil() {
			bv.Field(i).Set(f)
		}
	}
	return base
}

var semaphoreKind = &kindDesc[SemaphoreSpec, semaphore.Config]{
	kind: bulkhead.Semaphore,
	ptr: func(c *Config, shared bool) *map[string]SemaphoreSpec {
		if shared {
			return &c.SemaphoreConfigs
		}
		return &c.Semaphores
	},
	res: func(c *compiled) *resolved[SemaphoreSpec] { return &c.sem },
	fields: []field{
		{"maxConcurrentCalls", []string{"maxConcurrentCall"}, "MaxConcurrentCalls"},
		{"maxWaitDuration", []string{"maxWaitTime"}, "MaxWaitDuration"},
		{key: "baseConfig", name: "BaseConfig"},
		{key: "eventConsumerBufferSize", name: "EventBufferSize"},
		{key: "adaptive", name: "Adaptive"},
		{key: "writableStackTraceEnabled"},
		{key: "fairCallHandlingEnabled"},
		{key: "tags"},
	},
	base:     func(s SemaphoreSpec) string { return s.BaseConfig },
	buffer:   func(s SemaphoreSpec) *int { return s.EventBufferSize },
	adaptive: func(s SemaphoreSpec) *adaptive.Config { return s.Adaptive },
	defaults: semaphore.DefaultConfig,
	validate: semaphore.Config.Validate,
	limit:    func(c *semaphore.Config) *int { return &c.MaxConcurrentCalls },
	create:   func(name string, c semaphore.Config) (handle, error) { return semaphore.New(name, c) },
	status: func(c semaphore.Config) statusConfig {
		return statusConfig{MaxConcurrentCalls: c.MaxConcurrentCalls, MaxWaitDuration: c.MaxWaitDuration.String()}
	},
}

var poolKind = &kindDesc[PoolSpec, pool.Config]{
	kind: bulkhead.Pool,
	ptr: func(c *Config, shared bool) *map[string]PoolSpec {
		if shared {
			return &c.PoolConfigs
		}
		return &c.Pools
	},
	res: func(c *compiled) *resolved[PoolSpec] { return &c.pool },
	fields: []field{
		{"maxThreadPoolSize", []string{"maxWorkers"}, "MaxWorkers"},
		{key: "coreThreadPoolSize", name: "CoreWorkers"},
		{key: "queueCapacity", name: "QueueCapacity"},
		{"maxWaitDuration", []string{"queueTimeout"}, "QueueTimeout"},
		{"keepAliveDuration", []string{"keepAlive"}, "KeepAlive"},
		{key: "baseConfig", name: "BaseConfig"},
		{key: "eventConsumerBufferSize", name: "EventBufferSize"},
		{key: "adaptive", name: "Adaptive"},
		{key: "writableStackTraceEnabled"},
		{key: "contextPropagators"},
		{key: "tags"},
	},
	base:     func(s PoolSpec) string { return s.BaseConfig },
	buffer:   func(s PoolSpec) *int { return s.EventBufferSize },
	adaptive: func(s PoolSpec) *adaptive.Config { return s.Adaptive },
	defaults: pool.DefaultConfig,
	validate: pool.Config.Validate,
	limit:    func(c *pool.Config) *int { return &c.MaxWorkers },
	create:   func(name string, c pool.Config) (handle, error) { return pool.New(name, c) },
	status: func(c pool.Config) statusConfig {
		return statusConfig{MaxWorkers: c.MaxWorkers, QueueCapacity: &c.QueueCapacity,
			QueueTimeout: c.QueueTimeout.String(), KeepAlive: c.KeepAlive.String()}
	},
	// Spring refuses a core size above the maximum; a core size alone has
	// no effect here, which Load reports as a warning.
	finalize: func(s PoolSpec, c pool.Config, l *errList, loc locator, sec section, name string) {
		if s.CoreWorkers == nil {
			return
		}
		line, path, key := loc.locate(sec, name, "CoreWorkers")
		switch {
		case *s.CoreWorkers < 0 || *s.CoreWorkers > c.MaxWorkers:
			l.add(line, path, "%s %q: %s must be between 0 and maxThreadPoolSize (%d), got %d", sec, name, key, c.MaxWorkers, *s.CoreWorkers)
		case s.MaxWorkers == nil:
			l.warns = append(l.warns, fmt.Sprintf("%s %q: %s %d has no effect: a Go pool starts workers on demand up to maxThreadPoolSize, which is unset here and defaults to %d (GOMAXPROCS) (at %s)",
				sec, name, key, *s.CoreWorkers, c.MaxWorkers, path))
		}
	},
}

// fieldKeys maps each kind's Spec field names to their Spring keys.
var fieldKeys = map[bulkhead.Kind]map[string]string{bulkhead.Semaphore: {}, bulkhead.Pool: {}}

func init() {
	semaphoreKind.init()
	poolKind.init()
}

func (d *kindDesc[S, C]) init() {
	d.index = map[string]int{}
	for i, f := range d.fields {
		d.validKeys = append(d.validKeys, f.key)
		for _, k := range append([]string{f.key}, f.alias...) {
			d.index[normalize(k)] = i
		}
		if f.name != "" {
			if _, ok := reflect.TypeFor[S]().FieldByName(f.name); !ok {
				panic("registry: no Spec field " + f.name)
			}
			fieldKeys[d.kind][f.name] = f.key
		}
	}
}

// apply copies s's field name, if set, into c's field of that name, if c
// has one, and reports whether it did.
func apply[S, C any](s S, name string, c *C) bool {
	sf, cf := reflect.ValueOf(s).FieldByName(name), reflect.ValueOf(c).Elem().FieldByName(name)
	if !cf.IsValid() || sf.IsNil() {
		return false
	}
	cf.Set(sf.Elem())
	return true
}

// build turns a resolved spec into the bulkhead's config and buffer size.
func (d *kindDesc[S, C]) build(s S) (C, int) {
	c := d.defaults()
	for _, f := range d.fields {
		apply(s, f.name, &c)
	}
	buf := defaultBuffer
	if b := d.buffer(s); b != nil {
		buf = *b
	}
	return c, buf
}

// resolved is a kind's shared configurations with their chains merged.
type resolved[S any] map[string]S

// compiled is a valid Config's shared configurations, resolved.
type compiled struct {
	sem  resolved[SemaphoreSpec]
	pool resolved[PoolSpec]
}

// kindOps is what code holding a bulkhead of either kind needs of its
// kindDesc. Its "want" values are the kind's Config (semaphore.Config or
// pool.Config).
type kindOps interface {
	spec(cfg Config, res *compiled, name string) (sp spec, listed bool)
	names(cfg Config) []string // the instances cfg lists, sorted
	newBulkhead(name string, want any, limit int) (handle, error)
	sync(b handle, want any, limit int) (changed bool, err error)
	statusOf(b handle) statusConfig
}

var kinds = []bulkhead.Kind{bulkhead.Semaphore, bulkhead.Pool}

func opsOf(k bulkhead.Kind) kindOps {
	if k == bulkhead.Pool {
		return poolKind
	}
	return semaphoreKind
}

// spec resolves the named instance's spec (listed or not) from cfg.
func (d *kindDesc[S, C]) spec(cfg Config, res *compiled, name string) (spec, bool) {
	s, ok := (*d.ptr(&cfg, false))[name]
	full := d.instance(*d.res(res), s)
	c, size := d.build(full)
	return spec{c, *d.limit(&c), size, d.adaptive(full)}, ok
}

func (d *kindDesc[S, C]) names(cfg Config) []string { return sortedKeys(*d.ptr(&cfg, false)) }

// withLimit returns want with its limit set to n, or as it is if n is 0.
func (d *kindDesc[S, C]) withLimit(want any, n int) C {
	c := want.(C)
	if n > 0 {
		*d.limit(&c) = n
	}
	return c
}

func (d *kindDesc[S, C]) newBulkhead(name string, want any, limit int) (handle, error) {
	return d.create(name, d.withLimit(want, limit))
}

// configurable is what both kinds of bulkhead offer for their Config C.
type configurable[C any] interface {
	Config() C
	Reconfigure(C) error
}

// sync gives b the config want with the limit n (if not 0), and reports
// whether that changed it.
func (d *kindDesc[S, C]) sync(b handle, want any, n int) (bool, error) {
	c, bc := d.withLimit(want, n), b.(configurable[C])
	if c == bc.Config() {
		return false, nil
	}
	err := bc.Reconfigure(c)
	return err == nil, err
}

func (d *kindDesc[S, C]) statusOf(b handle) statusConfig {
	return d.status(b.(configurable[C]).Config())
}

// instance resolves an instance's spec (listed or not) over its base.
func (d *kindDesc[S, C]) instance(res resolved[S], s S) S {
	b := d.base(s)
	if b == "" {
		b = defaultName
	}
	if base, ok := res[b]; ok {
		return over(s, base)
	}
	return s
}

// Validate checks every value through semaphore.Config.Validate and
// pool.Config.Validate, the event buffer sizes, the names, and every
// BaseConfig reference (unknown names and cycles are errors). The error
// joins one [*ConfigError] per problem.
func (c Config) Validate() error {
	var l errList
	c.compile(&l, goLocator{})
	return errors.Join(l.errs...)
}

// compile validates c into l and resolves every shared configuration's
// chain.
func (c Config) compile(l *errList, loc locator) *compiled {
	return &compiled{sem: semaphoreKind.compile(c, l, loc), pool: poolKind.compile(c, l, loc)}
}

func (d *kindDesc[S, C]) compile(c Config, l *errList, loc locator) resolved[S] {
	for _, shared := range []bool{true, false} {
		m := *d.ptr(&c, shared)
		for _, name := range sortedKeys(m) {
			l.work++
			d.check(m[name], l, loc, section{d.kind, shared}, name)
		}
	}
	configs, instances := *d.ptr(&c, true), *d.ptr(&c, false)
	names := sync.OnceValue(func() string { // once: it sorts
		l.work += len(configs)
		return known(configs)
	})
	res := d.resolve(configs, names, l, loc)
	sec := section{d.kind, false}
	for _, name := range sortedKeys(instances) {
		l.work++
		s := instances[name]
		if b := d.base(s); b != "" {
			if _, ok := configs[b]; !ok {
				line, path, key := loc.locate(sec, name, "BaseConfig")
				l.add(line, path, "%s %q: %s names %q, which is not a known config (known: %s)", sec, name, key, b, names())
				continue
			}
			if _, ok := res[b]; !ok {
				continue // its chain is broken: reported there
			}
		}
		if d.finalize != nil {
			full := d.instance(res, s)
			cfg, _ := d.build(full)
			d.finalize(full, cfg, l, loc, sec, name)
		}
	}
	return res
}

// check validates an entry's name and each of its fields on its own, through
// the kind's Validate: the defaults are valid, so an error is the field's.
func (d *kindDesc[S, C]) check(s S, l *errList, loc locator, sec section, name string) {
	switch {
	case strings.TrimSpace(name) == "":
		line, path, _ := loc.locate(sec, name, "")
		l.add(line, path, "%s %q: a name must not be empty", sec, name)
	case !utf8.ValidString(name):
		line, path, _ := loc.locate(sec, name, "")
		l.add(line, path, "%s %q: a name must be valid UTF-8", sec, name)
	}
	for _, f := range d.fields {
		c := d.defaults()
		if !apply(s, f.name, &c) {
			continue
		}
		if err := d.validate(c); err != nil {
			line, path, key := loc.locate(sec, name, f.name)
			msg := err.Error()
			if !strings.HasPrefix(normalize(msg), normalize(key)) {
				msg = key + ": " + msg
			}
			l.add(line, path, "%s %q: %s", sec, name, msg)
		}
	}
	if b := d.buffer(s); b != nil && (*b < 0 || *b > maxBuffer) {
		line, path, key := loc.locate(sec, name, "EventBufferSize")
		l.add(line, path, "%s %q: %s must be between 0 and %d, got %d", sec, name, key, maxBuffer, *b)
	}
	if a := d.adaptive(s); a != nil {
		checkAdaptive(*a, l, loc, sec, name)
	}
}

// checkAdaptive validates an adaptive block through adaptive.Config.Validate,
// whose messages begin with the field's YAML key: the error points at that
// key's line when Load recorded it, at the block otherwise.
func checkAdaptive(a adaptive.Config, l *errList, loc locator, sec section, name string) {
	err := a.Validate()
	if a.Custom != nil {
		err = errors.New("Custom is not supported in a registry's configuration (one algorithm value would serve every bulkhead that inherits the block); use adaptive.Attach")
	}
	if err == nil {
		return
	}
	msg := err.Error()
	sub, _, _ := strings.Cut(msg, " ")
	line, path, _ := loc.locate(sec, name, "Adaptive."+sub)
	l.add(line, path, "%s %q: adaptive.%s", sec, name, msg)
}

// resolve merges every shared configuration over its chain, each one once,
// so that the work is linear in the number of configurations however long
// the chains. Configurations on a cycle or naming an unknown base are
// reported and left out.
func (d *kindDesc[S, C]) resolve(configs map[string]S, names func() string, l *errList, loc locator) resolved[S] {
	res := make(resolved[S], len(configs))
	const (
		unseen = iota
		onPath
		done
	)
	state := make(map[string]int, len(configs))
	sec := section{d.kind, true}
	baseOf := func(name string) string {
		if b := d.base(configs[name]); b != "" {
			return b
		}
		if _, ok := configs[defaultName]; ok && name != defaultName {
			return defaultName
		}
		return ""
	}
	for _, start := range sortedKeys(configs) {
		var path []string
		cur := start
		for cur != "" && state[cur] == unseen {
			if _, ok := configs[cur]; !ok {
				break
			}
			l.work++
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
			i := len(path) - 1
			for path[i] != cur {
				i--
			}
			cycle := append(append([]string{}, path[i:min(len(path), i+maxReportedName)]...), cur)
			if len(path)-i > maxReportedName {
				cycle[len(cycle)-1] = "... -> " + cur
			}
			line, p, key := loc.locate(sec, path[i], "BaseConfig")
			l.add(line, p, "%s %q: %s makes a cycle: %s", sec, path[i], key, strings.Join(cycle, " -> "))
			ok = false
		case state[cur] == done:
			_, ok = res[cur]
		default: // unknown name
			last := path[len(path)-1]
			line, p, key := loc.locate(sec, last, "BaseConfig")
			l.add(line, p, "%s %q: %s names %q, which is not a known config (known: %s)", sec, last, key, cur, names())
			ok = false
		}
		for i := len(path) - 1; i >= 0; i-- {
			name := path[i]
			state[name] = done
			if !ok {
				continue
			}
			l.work++
			s := configs[name]
			if b := baseOf(name); b != "" {
				s = over(s, res[b])
			}
			res[name] = s
		}
	}
	return res
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func known[S any](configs map[string]S) string {
	if len(configs) == 0 {
		return "none"
	}
	keys := sortedKeys(configs)
	if len(keys) > maxReportedName {
		keys = append(keys[:maxReportedName], "...")
	}
	return strings.Join(keys, ", ")
}
