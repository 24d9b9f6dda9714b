package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/internal/event"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/registry/internal/config"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// ErrNotConfigured is matched by the error of asking a registry whose
// Config.Strict is set for a bulkhead its configuration does not list.
var ErrNotConfigured = errors.New("registry: no such bulkhead in the configuration")

// Registry holds named bulkheads of both kinds, as two namespaces: a name
// is one semaphore and one pool at most, each for the registry's life (until
// Remove), and asking for it again returns the same one. It is safe for
// concurrent use. Create one with [New]; stop it with [Registry.Close],
// which closes its pools.
//
// A bulkhead whose resolved spec has an Adaptive block gets an adaptive
// controller when it is created (listed, or asked for by name), which owns
// its limit from then on. The configured limit (MaxConcurrentCalls or
// MaxWorkers) is the limit it starts from, brought within MinLimit and
// MaxLimit, unless InitialLimit is set. [Registry.Reconfigure] keeps the
// controller, and the limit it reached, while the block stays the same;
// starts a new one, from the configured limit again, when the block
// changed; and detaches it when the block went away, giving the bulkhead
// its configured limit. [Registry.Remove] and [Registry.Close] detach it:
// the limit stays where the controller left it.
type Registry struct {
	mu         sync.Mutex
	res        *config.Resolved // the configuration, resolved
	entries    map[key]*entry
	closed     bool
	closeDone  chan struct{}
	closeErr   error
	listeners  int          // reasons to receive the instances' events
	recording  bool         // keep recent events per instance (Config.RecordEvents)
	collectors []*collector // the registered collectors with histograms
	reloads    *reloads     // what Follow did, nil if it never ran

	// Entry events wait in pending, in the order of the changes (made
	// under mu), until the goroutine that is delivering takes them:
	// subscribers are called in that order, one event at a time, with no
	// registry lock held.
	pending    []EntryEvent
	delivering bool

	calls   event.Hub[bulkhead.Event] // every instance's per-call events
	changes event.Hub[EntryEvent]     // added, removed, reconfigured
}

var kinds = []bulkhead.Kind{bulkhead.Semaphore, bulkhead.Pool}

type key struct {
	kind bulkhead.Kind
	name string
}

// handle is what both kinds of bulkhead offer.
type handle interface {
	bulkhead.Instance
	Subscribe(func(bulkhead.Event)) func()
}

type entry struct {
	key
	b     handle
	size  int                     // event buffer size from the config (r.mu)
	ring  atomic.Pointer[ring]    // recent events, while recording
	unsub func()                  // the forwarding subscription, while listened to
	sinks atomic.Pointer[[]*sink] // a sink per collector with histograms (written under r.mu)

	// What the registry last chose for the bulkhead: its config and its
	// adaptive controller. Reconfigure replaces it under r.mu and applies
	// it with no lock held (see sync).
	target atomic.Pointer[target]
	// applies is closed by Remove: the caller owns the bulkhead from then
	// on, and neither a controller's late decision nor a Reconfigure that
	// planned the entry before the Remove may change it (see sync).
	applies applies
}

// EntryEventType says what happened to a registry entry.
type EntryEventType uint8

const (
	// EntryAdded: a bulkhead was created.
	EntryAdded EntryEventType = iota + 1
	// EntryRemoved: a bulkhead was removed by Remove.
	EntryRemoved
	// EntryReconfigured: Reconfigure changed a live bulkhead's limits.
	EntryReconfigured
)

// String returns "added", "removed", "reconfigured" or "EntryEventType(n)".
func (t EntryEventType) String() string {
	switch t {
	case EntryAdded:
		return "added"
	case EntryRemoved:
		return "removed"
	case EntryReconfigured:
		return "reconfigured"
	}
	return fmt.Sprintf("EntryEventType(%d)", uint8(t))
}

// EntryEvent tells registry subscribers that an entry was added, removed or
// reconfigured.
type EntryEvent struct {
	Type EntryEventType
	Name string
	Kind bulkhead.Kind
	// Instance is the *semaphore.Bulkhead or *pool.Bulkhead concerned.
	Instance bulkhead.Instance
}

// New validates cfg and creates every instance it lists. On error nothing
// is left running.
func New(cfg Config) (*Registry, error) {
	res, err := config.Resolve(cfg)
	if err != nil {
		return nil, err
	}
	r := &Registry{res: res, entries: map[key]*entry{}}
	created, err := r.createListed(res)
	if err != nil {
		closeEntries(created)
		return nil, err
	}
	for _, e := range created {
		r.addLocked(e) // r is not shared yet
	}
	r.setRecordingLocked(cfg.RecordEvents)
	return r, nil
}

// newEntry makes a bulkhead from its spec, and its controller if the spec
// has an adaptive block (created with the controller's initial limit,
// attached when the entry is added). It calls no user code and publishes
// nothing.
func newEntry(k key, sp spec) (*entry, error) {
	if err := checkName(k.name); err != nil {
		return nil, err
	}
	e := &entry{key: k, size: sp.size}
	t := &target{cfg: sp}
	var err error
	if sp.adaptive != nil {
		t.ctl, err = newControl(e, *sp.adaptive, sp.limit(k.kind))
	}
	if err == nil {
		e.target.Store(t)
		e.b, err = newBulkhead(k, sp, t.limit())
	}
	if err != nil {
		return nil, fmt.Errorf("registry: %s %q: %w", k.kind, k.name, err)
	}
	return e, nil
}

// createListed creates the instances cfg lists that r does not hold yet,
// without adding them to r. On error it returns what it created for the
// caller to close (with closeEntries, after unlocking).
func (r *Registry) createListed(res *config.Resolved) ([]*entry, error) {
	var created []*entry
	for _, k := range kinds {
		for _, name := range listed(res, k) {
			if _, ok := r.entries[key{k, name}]; ok {
				continue
			}
			sp, _ := specOf(res, key{k, name})
			e, err := newEntry(key{k, name}, sp)
			if err != nil {
				return created, err
			}
			created = append(created, e)
		}
	}
	return created, nil
}

// listed returns the instances of kind k that res lists, sorted.
func listed(res *config.Resolved, k bulkhead.Kind) []string {
	if k == bulkhead.Pool {
		return res.Pools()
	}
	return res.Semaphores()
}

// closeEntries closes the pools of entries that were never shared: they
// have no tasks, so Close returns at once.
func closeEntries(es []*entry) {
	for _, e := range es {
		if p, ok := e.b.(*pool.Bulkhead); ok {
			_ = p.Close(context.Background())
		}
	}
}

// checkName refuses the names no bulkhead may have: empty, or not valid
// UTF-8 (Prometheus label values and JSON must be UTF-8).
func checkName(name string) error {
	if name == "" {
		return errors.New("registry: a bulkhead name must not be empty")
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("registry: bulkhead name %q is not valid UTF-8", name)
	}
	return nil
}

// addLocked makes e part of r: it records and forwards e's events if r
// does. r.mu must be held (or r not shared yet).
func (r *Registry) addLocked(e *entry) {
	if r.recording && e.size > 0 {
		e.ring.Store(newRing(e.size))
	}
	for _, c := range r.collectors {
		e.addSink(c)
	}
	if r.listeners > 0 {
		r.listen(e)
	}
	e.control().attach(e)
	r.entries[e.key] = e
}

// enqueueLocked queues an entry event for delivery. r.mu must be held, so
// that events queue in the order of the changes they report.
func (r *Registry) enqueueLocked(t EntryEventType, e *entry) {
	r.pending = append(r.pending, EntryEvent{Type: t, Name: e.name, Kind: e.kind, Instance: e.b})
}

// deliver calls the entry subscribers with the queued events, in order, with
// no lock held. If another goroutine is delivering already (perhaps the one
// that called the subscriber that called us), it delivers ours too, after
// those queued before them. If a subscriber panics or calls runtime.Goexit,
// the events after the one it was given stay queued, for the next change's
// delivery, and the panic goes on.
func (r *Registry) deliver() {
	r.mu.Lock()
	if r.delivering {
		r.mu.Unlock()
		return
	}
	r.delivering = true
	normal := false
	defer func() {
		if !normal {
			r.mu.Lock()
			r.delivering = false
			r.mu.Unlock()
		}
	}()
	for len(r.pending) > 0 {
		ev := r.pending[0]
		r.pending = r.pending[1:]
		r.mu.Unlock()
		r.changes.Publish(ev)
		r.mu.Lock()
	}
	r.pending, r.delivering = nil, false
	r.mu.Unlock()
	normal = true
}

// get returns the named entry of kind k, creating it if need be.
func (r *Registry) get(k bulkhead.Kind, name string) (*entry, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, fmt.Errorf("registry: %s %q: %w", k, name, bulkhead.ErrClosed)
	}
	if e, ok := r.entries[key{k, name}]; ok {
		r.mu.Unlock()
		return e, nil
	}
	sp, ok := specOf(r.res, key{k, name})
	if r.res.Config().Strict && !ok {
		hint := ""
		if best := config.Closest(name, listed(r.res, k), func(s string) string { return s }); best != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", best)
		}
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: %s %q%s", ErrNotConfigured, k, name, hint)
	}
	e, err := newEntry(key{k, name}, sp)
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	r.addLocked(e)
	r.enqueueLocked(EntryAdded, e)
	r.mu.Unlock()
	r.deliver()
	return e, nil
}

// Semaphore returns the semaphore bulkhead called name, creating it if it
// does not exist yet: from its entry in Config.Semaphores if listed,
// otherwise from the "default" semaphore config (or
// semaphore.DefaultConfig), unless Config.Strict makes that an
// [ErrNotConfigured] error. Concurrent first calls create exactly one. It
// fails with bulkhead.ErrClosed after Close.
func (r *Registry) Semaphore(name string) (*semaphore.Bulkhead, error) {
	e, err := r.get(bulkhead.Semaphore, name)
	if err != nil {
		return nil, err
	}
	return e.b.(*semaphore.Bulkhead), nil
}

// Pool returns the pool bulkhead called name, creating it as
// [Registry.Semaphore] does, from Config.Pools, the "default" pool config or
// pool.DefaultConfig. A pool and a semaphore may share a name: they are two
// bulkheads.
func (r *Registry) Pool(name string) (*pool.Bulkhead, error) {
	e, err := r.get(bulkhead.Pool, name)
	if err != nil {
		return nil, err
	}
	return e.b.(*pool.Bulkhead), nil
}

// Find returns the named bulkhead of kind k without creating it.
func (r *Registry) Find(k bulkhead.Kind, name string) (bulkhead.Instance, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.entries[key{k, name}]; ok {
		return e.b, true
	}
	return nil, false
}

// Instances returns every bulkhead, sorted by name, then semaphores before
// pools.
func (r *Registry) Instances() []bulkhead.Instance {
	es := r.snapshot()
	out := make([]bulkhead.Instance, len(es))
	for i, e := range es {
		out[i] = e.b
	}
	return out
}

func (r *Registry) snapshot() []*entry {
	r.mu.Lock()
	es := make([]*entry, 0, len(r.entries))
	for _, e := range r.entries {
		es = append(es, e)
	}
	r.mu.Unlock()
	slices.SortFunc(es, compareEntries)
	return es
}

// compareEntries orders entries by name, then semaphores before pools.
func compareEntries(a, b *entry) int {
	return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.kind, b.kind))
}

// Remove takes the named bulkhead of kind k out of the registry and returns
// it; a later request for the name creates a new one. A removed pool is not
// closed: the caller owns it now and should Close it. Once Remove returns,
// neither an adaptive controller's decision nor a Reconfigure under way
// changes the bulkhead (Remove waits for one already in the bulkhead's
// Reconfigure to take effect).
func (r *Registry) Remove(k bulkhead.Kind, name string) (bulkhead.Instance, bool) {
	r.mu.Lock()
	e, ok := r.entries[key{k, name}]
	var running []*applyRun
	if ok {
		delete(r.entries, e.key)
		e.stopListening()
		if ss := e.sinks.Load(); ss != nil {
			for _, s := range *ss {
				s.deleteSeriesLocked(e)
			}
		}
		running = e.applies.remove()
		e.control().detach()
		r.enqueueLocked(EntryRemoved, e)
	}
	r.mu.Unlock()
	if !ok {
		return nil, false
	}
	wait(e.b, running)
	r.deliver()
	return e.b, true
}

// Reconfigure validates cfg and makes it the registry's configuration
// (Strict and RecordEvents included): every live bulkhead gets the limits
// cfg resolves for its name (one that cfg no longer lists gets the
// "default" config), and instances cfg lists that do not exist yet are
// created.
//
// If cfg is invalid or an instance cannot be created, Reconfigure returns
// the error and changes nothing. Otherwise it switches the configuration,
// and applies the new limits to the live bulkheads with no registry lock
// held (a pool that grows starts queued tasks there, and their subscribers
// run on this goroutine, so they may call the registry). A pool closed by
// its user rather than removed first keeps its last limits. The only error
// left after the switch is a pool failing to apply a changed KeepAlive;
// that pool keeps its old limits, the others get the new ones, and the
// error names it.
//
// A bulkhead with an adaptive controller keeps the limit the controller
// chose, whatever the configured limit, while its adaptive block is
// unchanged; its other fields apply as usual (see [Registry]).
//
// Concurrent Reconfigure calls end with the limits of the configuration
// installed last on every bulkhead. It never waits for calls in flight.
func (r *Registry) Reconfigure(cfg Config) error { return r.reconfigure(cfg, false) }

// reconfigure is Reconfigure; with keep, it refuses a configuration that no
// longer lists an instance that the running one lists and r holds.
func (r *Registry) reconfigure(cfg Config, keep bool) error {
	res, err := config.Resolve(cfg)
	if err != nil {
		return err
	}
	type change struct {
		e   *entry
		sp  spec
		ctl *control
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return fmt.Errorf("registry: reconfigure: %w", bulkhead.ErrClosed)
	}
	plan := make([]change, 0, len(r.entries))
	for _, e := range r.entries {
		if _, was := specOf(r.res, e.key); keep && was {
			if _, still := specOf(res, e.key); !still {
				r.mu.Unlock()
				return fmt.Errorf("registry: the new configuration no longer lists %s instance %q, which is in use; the running configuration stays (Remove it first)", e.kind, e.name)
			}
		}
		sp, _ := specOf(res, e.key)
		// The controller stays while its block does; a new or changed
		// block starts a new one.
		ctl := e.control()
		switch {
		case sp.adaptive == nil:
			ctl = nil
		case ctl == nil || ctl.cfg != *sp.adaptive:
			var err error
			if ctl, err = newControl(e, *sp.adaptive, sp.limit(e.kind)); err != nil {
				r.mu.Unlock()
				return fmt.Errorf("registry: %s %q: %w", e.kind, e.name, err)
			}
		}
		plan = append(plan, change{e, sp, ctl})
	}
	slices.SortFunc(plan, func(a, b change) int { return compareEntries(a.e, b.e) })
	created, err := r.createListed(res)
	if err != nil {
		r.mu.Unlock()
		closeEntries(created)
		return err
	}

	// Nothing can fail from here on: switch.
	r.res = res
	for _, c := range plan {
		old := c.e.target.Swap(&target{cfg: c.sp, ctl: c.ctl}).ctl
		if old != c.ctl {
			old.detach()
			c.ctl.attach(c.e)
		}
		r.resizeLocked(c.e, c.sp.size)
	}
	for _, e := range created {
		r.addLocked(e)
		r.enqueueLocked(EntryAdded, e)
	}
	r.setRecordingLocked(cfg.RecordEvents)
	r.mu.Unlock()

	var errs []error
	for _, c := range plan {
		changed, err := c.e.sync()
		if err != nil && !errors.Is(err, bulkhead.ErrClosed) { // closed: it runs nothing more
			errs = append(errs, fmt.Errorf("registry: reconfigure: %s %q keeps its old limits: %w", c.e.kind, c.e.name, err))
		}
		if changed {
			r.mu.Lock()
			if r.entries[c.e.key] == c.e { // not removed meanwhile
				r.enqueueLocked(EntryReconfigured, c.e)
			}
			r.mu.Unlock()
		}
	}
	r.deliver()
	return errors.Join(errs...)
}

// resizeLocked gives e's event ring the new size, keeping the newest
// events. r.mu must be held.
func (r *Registry) resizeLocked(e *entry, size int) {
	if size == e.size {
		return
	}
	e.size = size
	if !r.recording {
		return
	}
	var next *ring
	if size > 0 {
		next = newRing(size)
		if old := e.ring.Load(); old != nil {
			for _, rec := range old.records() {
				next.put(rec)
			}
		}
	}
	e.ring.Store(next)
}

// setRecordingLocked starts or stops keeping recent events. r.mu must be
// held.
func (r *Registry) setRecordingLocked(on bool) {
	if on == r.recording {
		return
	}
	r.recording = on
	for _, e := range r.entries {
		var rg *ring
		if on && e.size > 0 {
			rg = newRing(e.size)
		}
		e.ring.Store(rg)
	}
	if on {
		r.retainLocked()
	} else {
		r.releaseLocked()
	}
}

// Close closes every pool bulkhead, as pool.Bulkhead.Close does: running and
// queued tasks may finish until ctx ends. Afterwards the registry creates
// nothing (Semaphore and Pool fail with bulkhead.ErrClosed) but Instances,
// the metrics and the Handler still show the bulkheads' last state. Close is
// idempotent; a second call waits for the first, or for its own ctx. A nil
// ctx is a bug in the caller: Close panics, before closing anything.
func (r *Registry) Close(ctx context.Context) error {
	if ctx == nil {
		panic("registry: Close called with a nil Context")
	}
	r.mu.Lock()
	if r.closed {
		done := r.closeDone
		r.mu.Unlock()
		select {
		case <-done: // closed after closeErr was set
			return r.closeErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.closed = true
	r.closeDone = make(chan struct{})
	var pools []*pool.Bulkhead
	for _, e := range r.entries {
		e.control().detach()
		if p, ok := e.b.(*pool.Bulkhead); ok {
			pools = append(pools, p)
		}
	}
	r.mu.Unlock()

	errs := make([]error, len(pools))
	var wg sync.WaitGroup
	for i, p := range pools {
		wg.Go(func() {
			if err := p.Close(ctx); err != nil {
				errs[i] = fmt.Errorf("registry: closing pool %q: %w", p.Name(), err)
			}
		})
	}
	wg.Wait()
	err := errors.Join(errs...)
	r.mu.Lock()
	// Stop listening only now, so that the events of tasks Close ended
	// are still seen.
	for _, e := range r.entries {
		e.stopListening()
	}
	r.closeErr = err
	close(r.closeDone)
	r.mu.Unlock()
	return err
}

// Subscribe calls fn with the per-call events of every bulkhead in the
// registry, present and future, until cancel is called; each event's Name
// and Kind say which bulkhead. fn runs on the goroutine of the call that
// caused the event (see the callback contract in package bulkhead).
// Instances build events only while someone listens, so with no subscriber
// (no histograms, no RecordEvents) they cost nothing.
func (r *Registry) Subscribe(fn func(bulkhead.Event)) (cancel func()) {
	if fn == nil {
		panic("registry: Subscribe called with a nil function")
	}
	c := r.calls.Subscribe(fn)
	r.mu.Lock()
	r.retainLocked()
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c()
			r.mu.Lock()
			r.releaseLocked()
			r.mu.Unlock()
		})
	}
}

// SubscribeEntries calls fn when a bulkhead is added, removed or
// reconfigured, until cancel is called. Events arrive one at a time, in the
// order of the changes, with no registry lock held, so fn may call the
// registry. Usually fn runs on the goroutine that made the change, before
// that call returns; but while another goroutine is delivering events (for
// instance fn's own), that goroutine delivers the new ones after those
// before them.
func (r *Registry) SubscribeEntries(fn func(EntryEvent)) (cancel func()) {
	if fn == nil {
		panic("registry: SubscribeEntries called with a nil function")
	}
	return r.changes.Subscribe(fn)
}

// retainLocked starts forwarding every instance's events to r.calls and
// the rings, if it was not already. r.mu must be held.
func (r *Registry) retainLocked() {
	r.listeners++
	if r.listeners == 1 && !r.closed {
		for _, e := range r.entries {
			r.listen(e)
		}
	}
}

func (r *Registry) releaseLocked() {
	r.listeners--
	if r.listeners == 0 {
		for _, e := range r.entries {
			e.stopListening()
		}
	}
}

// stopListening ends the registry's subscription to e's events. r.mu must
// be held.
func (e *entry) stopListening() {
	if e.unsub != nil {
		e.unsub()
		e.unsub = nil
	}
}

// listen subscribes the registry to e's events: each goes to e's ring,
// to the registry's subscribers and to the collectors' histograms, with no
// lock, no lookup and no allocation.
func (r *Registry) listen(e *entry) {
	if e.unsub != nil {
		return
	}
	e.unsub = e.b.Subscribe(func(ev bulkhead.Event) {
		if rg := e.ring.Load(); rg != nil {
			rg.add(&ev)
		}
		if r.calls.Active() {
			r.calls.Publish(ev)
		}
		if ss := e.sinks.Load(); ss != nil {
			for _, s := range *ss {
				s.observe(e, &ev)
			}
		}
	})
}
