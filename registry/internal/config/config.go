// Package config is the registry's Config, its validation and inheritance
// (spec.go, config.go), and a loader that reads Spring Boot files as
// Spring's binder does (keys.go, bind.go, props.go, load.go, duration.go):
// one ordered list of properties (flattened key, value, file, line) bound
// onto Config with relaxed names. Package registry re-exports and documents it.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/adaptive"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

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

// where is where a value came from, for errors: an Error but its Msg, the
// key as spelt, and its file's place among those read.
type where struct {
	Error
	key   string
	order int
}

// errList collects the problems found, and warnings.
type errList struct {
	errs  []where
	warns []string
}

func (l *errList) add(w where, format string, args ...any) {
	w.Msg = fmt.Sprintf(format, args...)
	if len(l.errs) < 50*maxErrors && !slices.ContainsFunc(l.errs, func(o where) bool { return o.Error == w.Error }) {
		l.errs = append(l.errs, w)
	}
}

// err returns the errors in file and line order (those with no line after
// their file's), up to maxErrors, joined.
func (l *errList) err() error {
	slices.SortStableFunc(l.errs, func(a, b where) int {
		return cmp.Or(cmp.Compare(a.order, b.order), cmp.Compare(min(b.Line, 1), min(a.Line, 1)), cmp.Compare(a.Line, b.Line))
	})
	var errs []error
	for i := range min(len(l.errs), maxErrors) {
		errs = append(errs, &l.errs[i].Error)
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
		key = goName(map[string][]keyInfo{"semaphore": semaphoreKeys, "pool": poolKeys}[k], key)
		p += "." + key
	}
	return where{Error: Error{Path: p}, key: key}
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
		sem:  compile("semaphore", semaphoreKeys, c.SemaphoreConfigs, c.Semaphores, l, loc, checkKeyed),
		pool: compile("pool", poolKeys, c.PoolConfigs, c.Pools, l, loc, checkKeyedPool)}
}

// Semaphore returns what r gives the named semaphore, and whether r lists it.
func (r *Resolved) Semaphore(name string) (semaphore.Config, Extra, bool) {
	s, ok := r.cfg.Semaphores[name]
	s = instance(r.sem, s)
	c, x := s.config(&pick{}), extra(s)
	if s.MaxConcurrentCallsPerKey != nil {
		x.Keyed = &semaphore.KeyedConfig{MaxConcurrentCalls: c.MaxConcurrentCalls, MaxActiveKeys: *cmp.Or(s.MaxActiveKeys, new(0)),
			PerKey: semaphore.Config{MaxConcurrentCalls: *s.MaxConcurrentCallsPerKey, MaxWaitDuration: c.MaxWaitDuration}}
	}
	return c, x, ok
}

// Pool returns what r gives the named pool, and whether r lists it.
func (r *Resolved) Pool(name string) (pool.Config, Extra, bool) {
	s, ok := r.cfg.Pools[name]
	s = instance(r.pool, s)
	c, x := s.config(&pick{}), extra(s)
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
			name, w.key, *s.CoreWorkers, c.MaxWorkers, w.Path))
	}
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
	case s.MaxActiveKeys != nil && *s.MaxActiveKeys > math.MaxInt32: // semaphore.KeyedConfig's limit
		fail("maxActiveKeys", "must be at most %d, got %d", math.MaxInt32, *s.MaxActiveKeys)
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
	case s.Priorities != nil:
		fail("priorities", "is not supported on %s; give each priority its own pool", which)
	}
	if s.Adaptive != nil && s.Shadow != nil {
		// the controller would move maxThreadPoolSize below the shadow's
		fail("shadow", "is not supported beside adaptive (use adaptive.shadow: true to try an adaptive limit)")
	}
}

func goName(keys []keyInfo, key string) string {
	if i := slices.IndexFunc(keys, func(k keyInfo) bool { return k.name == key }); i >= 0 {
		return keys[i].goName
	}
	return key
}

// spec is what both Spec types offer.
type spec[S any, C interface{ Validate() error }] interface {
	common() (base string, buffer *int, ad *adaptive.Config)
	over(base S) S
	config(p *pick) C // the bulkhead's Config, with the fields p picks
	own(key string) error
}

func extra[S spec[S, C], C interface{ Validate() error }](s S) Extra {
	_, buf, ad := s.common()
	return Extra{Buffer: *cmp.Or(buf, new(defaultBuffer)), Adaptive: ad}
}

// instance resolves an instance's spec (listed or not) over its base.
func instance[S spec[S, C], C interface{ Validate() error }](res map[string]S, s S) S {
	b, _, _ := s.common()
	if base, ok := res[cmp.Or(b, defaultName)]; ok {
		return s.over(base)
	}
	return s
}

func compile[S spec[S, C], C interface{ Validate() error }](kind string, keys []keyInfo, configs, instances map[string]S, l *errList, loc locator, final func(S, C, entry)) map[string]S {
	at := func(shared bool, name string) entry { return entry{l, loc, kind, shared, name} }
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		check(keys, configs[name], at(true, name))
	}
	for _, name := range slices.Sorted(maps.Keys(instances)) {
		check(keys, instances[name], at(false, name))
	}
	names := sync.OnceValue(func() string { return known(configs) }) // once: it sorts
	res := resolveChains(configs, names, at)
	for _, name := range slices.Sorted(maps.Keys(res)) {
		final(res[name], res[name].config(&pick{}), at(true, name))
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
		full := instance(res, s)
		c := full.config(&pick{})
		if err := c.Validate(); err != nil && full.config(&pick{skipOwn: true}).Validate() == nil {
			// The fields checked on their own are at fault together: point
			// at the first of them the instance sets.
			key := ""
			if i := slices.IndexFunc(keys, func(k keyInfo) bool {
				p := pick{only: k.name}
				s.config(&p)
				return p.set && slices.Contains(ownKeys, k.name)
			}); i >= 0 {
				key = keys[i].name
			}
			at(false, name).add(key, "%s", err)
		}
		final(full, c, at(false, name))
	}
	return res
}

// check validates an entry's name and each field alone, through Validate:
// the defaults are valid, so an error is the field's.
func check[S spec[S, C], C interface{ Validate() error }](keys []keyInfo, s S, e entry) {
	switch {
	case strings.TrimSpace(e.name) == "":
		e.add("", "a name must not be empty")
	case !utf8.ValidString(e.name):
		e.add("", "a name must be valid UTF-8")
	}
	for _, k := range keys {
		p := pick{only: k.name}
		c := s.config(&p)
		var err error
		switch {
		case slices.Contains(ownKeys, k.name):
			err = s.own(k.name)
		case !p.set:
			continue
		default:
			err = c.Validate()
		}
		if err != nil {
			msg := err.Error()
			if key := e.loc(e.kind, e.shared, e.name, k.name).key; !strings.HasPrefix(normalize(msg), normalize(key)) {
				msg = key + ": " + msg
			}
			e.add(k.name, "%s", msg)
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

// resolveChains merges each shared configuration over its chain once (linear
// work); one on a cycle or naming an unknown base is reported and left out.
func resolveChains[S spec[S, C], C interface{ Validate() error }](configs map[string]S, names func() string, at func(bool, string) entry) map[string]S {
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
				s = s.over(res[b])
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
