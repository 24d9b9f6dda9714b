package registry

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// MaxLimit is the largest MaxConcurrentCalls, MaxWorkers or QueueCapacity a
// configuration may set: semaphore.MaxLimit, which equals pool.MaxLimit.
// Anything larger is almost certainly a typo and is refused.
const MaxLimit = semaphore.MaxLimit

// The registry checks both kinds against one limit: these array lengths
// would be negative, and the package would not compile, if semaphore.MaxLimit
// and pool.MaxLimit ever differed.
var (
	_ [semaphore.MaxLimit - pool.MaxLimit]struct{}
	_ [pool.MaxLimit - semaphore.MaxLimit]struct{}
)

// MaxEventBufferSize is the largest EventBufferSize a configuration may set.
const MaxEventBufferSize = 10000

// DefaultConfigName is the shared configuration that applies to every
// instance of its kind that names no BaseConfig.
const DefaultConfigName = "default"

// DefaultEventBufferSize is how many recent events [Registry.Handler] keeps
// per instance when its configuration does not set EventBufferSize
// (Spring's eventConsumerBufferSize default).
const DefaultEventBufferSize = 100

// Config is a registry's configuration, for both kinds of bulkhead. It is a
// plain value: build it in code, or read it from YAML with [Load].
//
// SemaphoreConfigs and PoolConfigs hold shared named configurations; the one
// named "default" applies to every instance of that kind that names no
// BaseConfig, including instances asked for by name but not listed.
// Semaphores and Pools hold the instances, which [New] creates.
//
// A field left nil is unset and is inherited: an instance's own value wins,
// then its BaseConfig's, then that config's BaseConfig's, and so on; an
// instance without BaseConfig inherits from "default" instead; whatever is
// still unset takes semaphore.DefaultConfig() or pool.DefaultConfig().
type Config struct {
	// SemaphoreConfigs are shared semaphore configurations by name
	// (Spring's resilience4j.bulkhead.configs).
	SemaphoreConfigs map[string]SemaphoreSpec
	// Semaphores are the semaphore bulkheads by name
	// (resilience4j.bulkhead.instances).
	Semaphores map[string]SemaphoreSpec
	// PoolConfigs are shared pool configurations by name
	// (resilience4j.thread-pool-bulkhead.configs).
	PoolConfigs map[string]PoolSpec
	// Pools are the pool bulkheads by name
	// (resilience4j.thread-pool-bulkhead.instances).
	Pools map[string]PoolSpec
}

// SemaphoreSpec configures a semaphore bulkhead or a shared semaphore
// configuration. Nil fields are unset and inherited (see [Config]).
type SemaphoreSpec struct {
	// BaseConfig names the entry of Config.SemaphoreConfigs this one
	// inherits from; empty means "default" for an instance and nothing for
	// a shared configuration.
	BaseConfig string
	// MaxConcurrentCalls is semaphore.Config.MaxConcurrentCalls, 1 to MaxLimit.
	MaxConcurrentCalls *int
	// MaxWaitDuration is semaphore.Config.MaxWaitDuration, >= 0.
	MaxWaitDuration *time.Duration
	// EventBufferSize is how many recent events Handler shows for the
	// instance, 0 to MaxEventBufferSize; unset means DefaultEventBufferSize.
	EventBufferSize *int
}

// PoolSpec configures a pool bulkhead or a shared pool configuration. Nil
// fields are unset and inherited (see [Config]).
type PoolSpec struct {
	// BaseConfig names the entry of Config.PoolConfigs this one inherits
	// from; empty means "default" for an instance and nothing for a shared
	// configuration.
	BaseConfig string
	// MaxWorkers is pool.Config.MaxWorkers, 1 to MaxLimit.
	MaxWorkers *int
	// QueueCapacity is pool.Config.QueueCapacity, 0 to MaxLimit.
	QueueCapacity *int
	// MaxWaitDuration is pool.Config.MaxWaitDuration, >= 0.
	MaxWaitDuration *time.Duration
	// KeepAlive is pool.Config.KeepAlive, >= 0.
	KeepAlive *time.Duration
	// EventBufferSize is how many recent events Handler shows for the
	// instance, 0 to MaxEventBufferSize; unset means DefaultEventBufferSize.
	EventBufferSize *int
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

// Error returns the message with its line and path.
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
		b.WriteString(" (at ")
		b.WriteString(e.Path)
		b.WriteString(")")
	}
	return b.String()
}

// maxErrors bounds how many problems one Load or Validate reports.
const maxErrors = 20

// errList collects ConfigErrors up to maxErrors.
type errList struct{ errs []error }

func (l *errList) add(line int, path, format string, args ...any) {
	if len(l.errs) >= maxErrors {
		return
	}
	e := &ConfigError{Line: line, Path: path, Msg: fmt.Sprintf(format, args...)}
	for _, old := range l.errs {
		if o, ok := old.(*ConfigError); ok && *o == *e {
			return // one broken reference seen from several entries
		}
	}
	l.errs = append(l.errs, e)
}

func (l *errList) full() bool { return len(l.errs) >= maxErrors }

func (l *errList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	return errors.Join(l.errs...)
}

// Validate checks every value, every BaseConfig reference (unknown names
// and cycles are errors) and that no name is both a semaphore and a pool
// instance. The error joins one [*ConfigError] per problem.
func (c Config) Validate() error {
	var l errList
	c.validate(&l, goLocator{})
	return l.err()
}

// locator tells where an entry or field of a Config came from, for errors.
type locator interface {
	// entry locates field (a Go field name, or "" for the entry itself) of
	// entry name in section sec ("Semaphores", "SemaphoreConfigs", ...),
	// returning the line, the path and the spelling of the field to show.
	entry(sec, name, field string) (line int, path, fieldName string)
}

// goLocator describes Go values built in code.
type goLocator struct{}

func (goLocator) entry(sec, name, field string) (int, string, string) {
	p := sec + "[" + strconv.Quote(name) + "]"
	if field != "" {
		p += "." + field
	}
	return 0, p, field
}

// what names an entry for messages: `semaphore instance "payment"`.
func what(sec, name string) string {
	switch sec {
	case "Semaphores":
		return "semaphore instance " + strconv.Quote(name)
	case "SemaphoreConfigs":
		return "semaphore config " + strconv.Quote(name)
	case "Pools":
		return "pool instance " + strconv.Quote(name)
	default:
		return "pool config " + strconv.Quote(name)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (c Config) validate(l *errList, loc locator) {
	checkInt := func(sec, name, field string, v *int, lo, hi int) {
		if v == nil || (*v >= lo && *v <= hi) {
			return
		}
		line, path, f := loc.entry(sec, name, field)
		if *v < lo {
			l.add(line, path, "%s: %s must be >= %d, got %d", what(sec, name), f, lo, *v)
		} else {
			l.add(line, path, "%s: %s must be <= %d, got %d", what(sec, name), f, hi, *v)
		}
	}
	checkDur := func(sec, name, field string, v *time.Duration) {
		if v == nil || *v >= 0 {
			return
		}
		line, path, f := loc.entry(sec, name, field)
		l.add(line, path, "%s: %s must be >= 0, got %v", what(sec, name), f, *v)
	}
	checkName := func(sec, name string) {
		switch {
		case strings.TrimSpace(name) == "":
			line, path, _ := loc.entry(sec, name, "")
			l.add(line, path, "%s: a name must not be empty", what(sec, name))
		case !utf8.ValidString(name):
			line, path, _ := loc.entry(sec, name, "")
			l.add(line, path, "%s: a name must be valid UTF-8", what(sec, name))
		}
	}
	for _, sec := range []string{"SemaphoreConfigs", "Semaphores"} {
		m := c.SemaphoreConfigs
		if sec == "Semaphores" {
			m = c.Semaphores
		}
		for _, name := range sortedKeys(m) {
			s := m[name]
			checkName(sec, name)
			checkInt(sec, name, "MaxConcurrentCalls", s.MaxConcurrentCalls, 1, MaxLimit)
			checkDur(sec, name, "MaxWaitDuration", s.MaxWaitDuration)
			checkInt(sec, name, "EventBufferSize", s.EventBufferSize, 0, MaxEventBufferSize)
		}
	}
	for _, sec := range []string{"PoolConfigs", "Pools"} {
		m := c.PoolConfigs
		if sec == "Pools" {
			m = c.Pools
		}
		for _, name := range sortedKeys(m) {
			s := m[name]
			checkName(sec, name)
			checkInt(sec, name, "MaxWorkers", s.MaxWorkers, 1, MaxLimit)
			checkInt(sec, name, "QueueCapacity", s.QueueCapacity, 0, MaxLimit)
			checkDur(sec, name, "MaxWaitDuration", s.MaxWaitDuration)
			checkDur(sec, name, "KeepAlive", s.KeepAlive)
			checkInt(sec, name, "EventBufferSize", s.EventBufferSize, 0, MaxEventBufferSize)
		}
	}
	for _, name := range sortedKeys(c.Pools) {
		if _, ok := c.Semaphores[name]; ok {
			line, path, _ := loc.entry("Pools", name, "")
			l.add(line, path, "%s: the name is also a semaphore instance; one name is one bulkhead", what("Pools", name))
		}
	}
	// References: every entry's chain must end without a cycle or an
	// unknown name. Checking every entry (configs too) reports a broken
	// config even when no instance uses it yet; a cycle is reported once,
	// at the first of its configs, not again for each entry that reaches it.
	cycles := map[string]bool{}
	report := func(err *chainError) {
		if err.cycle != "" {
			if cycles[err.cycle] {
				return
			}
			cycles[err.cycle] = true
		}
		line, path, f := loc.entry(err.sec, err.name, "BaseConfig")
		l.add(line, path, "%s: %s %s", what(err.sec, err.name), f, err.msg)
	}
	for _, sec := range []string{"SemaphoreConfigs", "Semaphores"} {
		m := c.SemaphoreConfigs
		if sec == "Semaphores" {
			m = c.Semaphores
		}
		for _, name := range sortedKeys(m) {
			if l.full() {
				return
			}
			if _, err := chain(c.SemaphoreConfigs, func(s SemaphoreSpec) string { return s.BaseConfig }, sec, name, m[name]); err != nil {
				report(err)
			}
		}
	}
	for _, sec := range []string{"PoolConfigs", "Pools"} {
		m := c.PoolConfigs
		if sec == "Pools" {
			m = c.Pools
		}
		for _, name := range sortedKeys(m) {
			if l.full() {
				return
			}
			if _, err := chain(c.PoolConfigs, func(s PoolSpec) string { return s.BaseConfig }, sec, name, m[name]); err != nil {
				report(err)
			}
		}
	}
}

// chainError says which entry holds the broken reference. cycle, for a
// cycle, identifies it whatever entry it was reached from.
type chainError struct{ sec, name, msg, cycle string }

// chain returns start followed by the configs it inherits from, nearest
// first. sec is "Semaphores"/"Pools" for an instance (which falls back to
// "default" when it names no base) or "SemaphoreConfigs"/"PoolConfigs" for
// a shared config.
func chain[S any](configs map[string]S, base func(S) string, sec, name string, start S) ([]S, *chainError) {
	out := []S{start}
	isInstance := sec == "Semaphores" || sec == "Pools"
	cfgSec := sec
	switch sec {
	case "Semaphores":
		cfgSec = "SemaphoreConfigs"
	case "Pools":
		cfgSec = "PoolConfigs"
	}
	visited := map[string]bool{}
	if !isInstance {
		visited[name] = true
	}
	curSec, curName, cur := sec, name, start
	next := base(cur)
	if next == "" && isInstance {
		if _, ok := configs[DefaultConfigName]; !ok {
			return out, nil
		}
		next = DefaultConfigName
	}
	for next != "" {
		if visited[next] {
			if !isInstance && next == name {
				// The cycle goes through start: report it there.
				curSec, curName, next = sec, name, base(start)
			}
			return nil, &chainError{sec: curSec, name: curName,
				msg:   fmt.Sprintf("%q makes a cycle: %s", next, cycleText(configs, base, next)),
				cycle: cycleID(configs, base, next)}
		}
		s, ok := configs[next]
		if !ok {
			return nil, &chainError{sec: curSec, name: curName,
				msg: fmt.Sprintf("names %q, which is not a known config (known: %s)", next, known(configs))}
		}
		visited[next] = true
		out = append(out, s)
		curSec, curName, cur = cfgSec, next, s
		next = base(cur)
	}
	return out, nil
}

func cycleText[S any](configs map[string]S, base func(S) string, from string) string {
	parts := []string{from}
	seen := map[string]bool{from: true}
	cur := from
	for i := 0; i < 64; i++ {
		s, ok := configs[cur]
		if !ok {
			break
		}
		nxt := base(s)
		if nxt == "" {
			break
		}
		parts = append(parts, nxt)
		if seen[nxt] {
			break
		}
		seen[nxt] = true
		cur = nxt
	}
	return strings.Join(parts, " -> ")
}

// cycleID names the cycle through from by its members, sorted.
func cycleID[S any](configs map[string]S, base func(S) string, from string) string {
	members := []string{from}
	for cur := base(configs[from]); cur != from && len(members) <= len(configs); cur = base(configs[cur]) {
		members = append(members, cur)
	}
	sort.Strings(members)
	return strings.Join(members, "\x00")
}

func known[S any](configs map[string]S) string {
	if len(configs) == 0 {
		return "none"
	}
	keys := sortedKeys(configs)
	if len(keys) > 10 {
		keys = append(keys[:10], "...")
	}
	return strings.Join(keys, ", ")
}

// resolveSemaphore merges the chain of an instance (listed or not) into one
// spec whose nil fields are still unset.
func (c Config) resolveSemaphore(name string) (SemaphoreSpec, error) {
	s := c.Semaphores[name]
	ch, cerr := chain(c.SemaphoreConfigs, func(s SemaphoreSpec) string { return s.BaseConfig }, "Semaphores", name, s)
	if cerr != nil {
		return SemaphoreSpec{}, &ConfigError{Msg: what(cerr.sec, cerr.name) + ": BaseConfig " + cerr.msg}
	}
	var out SemaphoreSpec
	for i := len(ch) - 1; i >= 0; i-- {
		x := ch[i]
		out.MaxConcurrentCalls = pick(x.MaxConcurrentCalls, out.MaxConcurrentCalls)
		out.MaxWaitDuration = pick(x.MaxWaitDuration, out.MaxWaitDuration)
		out.EventBufferSize = pick(x.EventBufferSize, out.EventBufferSize)
	}
	out.BaseConfig = s.BaseConfig
	return out, nil
}

// resolvePool is resolveSemaphore for pools.
func (c Config) resolvePool(name string) (PoolSpec, error) {
	s := c.Pools[name]
	ch, cerr := chain(c.PoolConfigs, func(s PoolSpec) string { return s.BaseConfig }, "Pools", name, s)
	if cerr != nil {
		return PoolSpec{}, &ConfigError{Msg: what(cerr.sec, cerr.name) + ": BaseConfig " + cerr.msg}
	}
	var out PoolSpec
	for i := len(ch) - 1; i >= 0; i-- {
		x := ch[i]
		out.MaxWorkers = pick(x.MaxWorkers, out.MaxWorkers)
		out.QueueCapacity = pick(x.QueueCapacity, out.QueueCapacity)
		out.MaxWaitDuration = pick(x.MaxWaitDuration, out.MaxWaitDuration)
		out.KeepAlive = pick(x.KeepAlive, out.KeepAlive)
		out.EventBufferSize = pick(x.EventBufferSize, out.EventBufferSize)
	}
	out.BaseConfig = s.BaseConfig
	return out, nil
}

// pick returns v when set, otherwise old.
func pick[T any](v, old *T) *T {
	if v != nil {
		return v
	}
	return old
}

func bufferSize(v *int) int {
	if v == nil {
		return DefaultEventBufferSize
	}
	return *v
}
