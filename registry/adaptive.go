package registry

import (
	"cmp"
	"math"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkhead-go/bulkhead/adaptive"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/semaphore"
	"go.yaml.in/yaml/v3"
)

// The adaptive: block is read key by key through adaptive.Config's yaml
// tags, so that it takes exactly the keys the package documents, with the
// loader's own spellings, durations, errors and budget.

// blockKeys describes one mapping of the block: its keys as the tags spell
// them and the field of each normalized key.
type blockKeys struct {
	keys  []string
	index map[string]int
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	blocks       = map[reflect.Type]*blockKeys{}
)

func init() { describeBlock(reflect.TypeFor[adaptive.Config]()) }

func describeBlock(t reflect.Type) {
	b := &blockKeys{index: map[string]int{}}
	blocks[t] = b
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		if tag == "" || tag == "-" {
			continue
		}
		b.keys = append(b.keys, tag)
		b.index[normalize(tag)] = i
		switch f.Type.Kind() {
		case reflect.Struct:
			describeBlock(f.Type)
		case reflect.Int, reflect.Int64, reflect.Float64, reflect.String: // block reads these
		default:
			panic("registry: adaptive." + t.Name() + "." + f.Name + ": the loader cannot read a " + f.Type.String())
		}
	}
}

// block reads the mapping v into the struct rv (an adaptive block, or a
// struct in one); sub is its place in the block ("" or "vegas."). Validate
// is left to the compile step, which sees inherited blocks too.
func (v *value) block(rv reflect.Value, sub string) {
	if isNull(v.n) {
		v.fail("has no value; give a mapping (adaptive: {} for every default) or remove the key")
		return
	}
	desc := blocks[rv.Type()]
	v.ld.fields(v.n, v.path, v.what, v.key, desc.keys, desc.index, func(i int, key string, n *yaml.Node, path string) {
		canon := sub + rv.Type().Field(i).Tag.Get("yaml")
		v.ld.pos[posKey{v.sec, v.entry, "Adaptive." + canon}] = posVal{line: n.Line, path: path, key: key}
		fv := &value{ld: v.ld, n: n, path: path, what: v.what, key: "adaptive." + canon, sec: v.sec, entry: v.entry}
		fv.into(rv.Field(i), canon+".")
	})
}

// into reads v into f by its type (those of the Specs' and
// adaptive.Config's fields); sub is the place in the adaptive block of a
// struct. A pointer is set only if its value was read without error.
func (v *value) into(f reflect.Value, sub string) {
	switch errs := len(v.ld.l.errs); {
	case f.Kind() == reflect.Pointer:
		p := reflect.New(f.Type().Elem())
		if v.into(p.Elem(), sub); len(v.ld.l.errs) == errs && !v.ld.l.full() {
			f.Set(p)
		}
	case f.Type() == durationType:
		if d := v.duration(); d != nil {
			f.SetInt(int64(*d))
		}
	case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
		if x := v.integer(); x != nil {
			f.SetInt(int64(*x))
		}
	case f.Kind() == reflect.Float64:
		if x := v.float(); x != nil {
			f.SetFloat(*x)
		}
	case f.Kind() == reflect.String:
		if s, ok := v.scalar("a string"); ok {
			f.SetString(s)
		}
	case f.Kind() == reflect.Struct:
		v.block(f, sub)
	}
}

func (v *value) float() *float64 {
	s, ok := v.scalar("a number")
	if !ok {
		return nil
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		v.fail("must be a finite number, got %q", v.n.Value)
		return nil
	}
	return &f
}

// target is what the registry wants an entry's bulkhead to be: its
// configuration, and the controller that owns its limit, if any.
type target struct {
	cfg any      // semaphore.Config or pool.Config, as configured
	ctl *control // nil without an adaptive block
}

// control is an adaptive controller that the registry attached to a
// bulkhead. The registry sets the limit for it (see entry.sync), so that
// the controller's limit and the registry's other fields never undo each
// other.
type control struct {
	cfg   adaptive.Config
	c     *adaptive.Controller
	limit atomic.Int64 // the limit the controller chose last
	unsub func()       // its subscription to the bulkhead's events (r.mu)
}

// newControl makes a controller for e's bulkhead, whose configured limit is
// configured, and records the initial limit it chooses without applying it.
// It subscribes to nothing: attach does.
func newControl(e *entry, cfg adaptive.Config, configured int) (*control, error) {
	ctl := &control{cfg: cfg}
	c, err := adaptive.New(cfg, configured, func(n int) error { return e.setLimit(ctl, n) })
	if err != nil {
		return nil, err
	}
	ctl.c = c
	ctl.limit.Store(int64(c.State().Limit))
	return ctl, nil
}

// attach starts feeding the controller e's events. r.mu must be held.
func (ctl *control) attach(e *entry) {
	if ctl != nil && ctl.unsub == nil {
		ctl.unsub = e.b.Subscribe(ctl.c.Observe)
	}
}

// detach stops it; the limit stays where it is. r.mu must be held.
func (ctl *control) detach() {
	if ctl != nil && ctl.unsub != nil {
		ctl.unsub()
		ctl.unsub = nil
	}
}

// setLimit is the controller's set function. It runs on the goroutines of
// the bulkhead's events, which attach subscribes only after newControl has
// set ctl.c; before, adaptive.New is choosing the initial limit, which the
// registry applies itself.
func (e *entry) setLimit(ctl *control, n int) error {
	ctl.limit.Store(int64(n))
	if ctl.c == nil {
		return nil // the initial limit
	}
	_, err := e.sync()
	return err
}

// sync gives e's bulkhead the configuration the registry chose for it, with
// the limit of the controller that owns it, and reports whether that changed
// anything. It holds no lock (the bulkhead's subscribers run here). The
// registry's Reconfigure and the controller may call it at once: each reads
// what is wanted, applies it, and tries again if either changed meanwhile,
// so that the bulkhead ends with the latest of both. Once Remove returned
// it changes nothing (see applies).
func (e *entry) sync() (changed bool, err error) {
	for {
		t := e.target.Load()
		limit := t.limit()
		a := e.applies.begin(applied(t.cfg, limit))
		if a == nil {
			return changed, nil // the caller of Remove owns it now
		}
		var c bool
		c, err = e.ops.sync(e.b, t.cfg, limit)
		a.done.Store(true)
		e.applies.end(a)
		changed = changed || c
		if e.target.Load() == t && t.limit() == limit {
			return changed, err
		}
	}
}

// applies keeps sync's applies from landing after Remove returned: an
// apply registers before it reads the bulkhead's configuration, unless
// Remove came first, and Remove waits for those registered (see wait).
type applies struct {
	mu      sync.Mutex
	removed bool
	running []*applyRun
}

// applyRun is one call of the bulkhead's Reconfigure by sync.
type applyRun struct {
	want any // the configuration it gives the bulkhead
	done atomic.Bool
}

// begin registers an apply of want, or returns nil after remove.
func (as *applies) begin(want any) *applyRun {
	as.mu.Lock()
	defer as.mu.Unlock()
	if as.removed {
		return nil
	}
	a := &applyRun{want: want}
	as.running = append(as.running, a)
	return a
}

func (as *applies) end(a *applyRun) {
	as.mu.Lock()
	as.running = slices.DeleteFunc(as.running, func(x *applyRun) bool { return x == a })
	as.mu.Unlock()
}

// remove makes every later begin fail and returns the applies running.
func (as *applies) remove() []*applyRun {
	as.mu.Lock()
	defer as.mu.Unlock()
	as.removed = true
	return slices.Clone(as.running)
}

// wait returns once each of running has either given b its configuration
// or returned. It does not wait for the rest of Reconfigure, whose
// subscribers may be calling Remove; the wait is the bulkhead's own
// critical section.
func wait(b handle, running []*applyRun) {
	for _, a := range running {
		for !a.done.Load() && configOf(b) != a.want {
			runtime.Gosched()
		}
	}
}

// applied is the configuration sync gives the bulkhead for want (a
// semaphore.Config or a pool.Config) and the limit n (0: want's own).
func applied(want any, n int) any {
	switch c := want.(type) {
	case semaphore.Config:
		c.MaxConcurrentCalls = cmp.Or(n, c.MaxConcurrentCalls)
		return c
	case pool.Config:
		c.MaxWorkers = cmp.Or(n, c.MaxWorkers)
		return c
	}
	return want
}

// configOf returns b's configuration.
func configOf(b handle) any {
	switch b := b.(type) {
	case interface{ Config() semaphore.Config }:
		return b.Config()
	case interface{ Config() pool.Config }:
		return b.Config()
	}
	return nil
}

// limit is the limit t's controller chose last, 0 without one.
func (t *target) limit() int {
	if t.ctl == nil {
		return 0
	}
	return int(t.ctl.limit.Load())
}

// control returns the controller that owns e's limit, or nil.
func (e *entry) control() *control {
	if t := e.target.Load(); t != nil {
		return t.ctl
	}
	return nil
}
