package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/internal/event"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/registry/internal/config"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// ErrNotConfigured is matched by the error of asking a registry whose
// Config.Strict is set for a bulkhead its configuration does not list.
var ErrNotConfigured = errors.New("registry: no such bulkhead in the configuration")

// Registry holds named bulkheads, a namespace per kind, and is safe for
// concurrent use; an Adaptive block gives one a controller (docs/adaptive.md).
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

	pending    []EntryEvent // entry events not yet delivered, in order (see deliver)
	delivering bool

	calls   event.Hub[bulkhead.Event] // every instance's per-call events
	changes event.Hub[EntryEvent]     // added, removed, reconfigured
}

var kinds = []bulkhead.Kind{bulkhead.Semaphore, bulkhead.Pool}

type key struct {
	kind bulkhead.Kind
	name string
}

type handle interface {
	bulkhead.Instance
	Subscribe(func(bulkhead.Event)) func()
}

type entry struct {
	key
	b     handle
	ring  atomic.Pointer[ring]      // recent events, while recording
	unsub func()                    // the forwarding subscription, while listened to
	hists event.Hub[bulkhead.Event] // the events for the collectors with histograms

	target  atomic.Pointer[target] // what the registry chose, replaced under r.mu, applied by sync
	removed atomic.Bool            // set by Remove: from then on sync changes nothing
}

// EntryEventType says what happened to a registry entry.
type EntryEventType uint8

const (
	EntryAdded        EntryEventType = iota + 1 // a bulkhead was created
	EntryRemoved                                // Remove removed a bulkhead
	EntryReconfigured                           // Reconfigure changed a live bulkhead's limits
)

// String returns "added", "removed", "reconfigured" or "EntryEventType(n)".
func (t EntryEventType) String() string {
	if names := [...]string{EntryAdded: "added", EntryRemoved: "removed", EntryReconfigured: "reconfigured"}; t > 0 && int(t) < len(names) {
		return names[t]
	}
	return fmt.Sprintf("EntryEventType(%d)", uint8(t))
}

// EntryEvent tells registry subscribers what happened to an entry.
type EntryEvent struct {
	Type     EntryEventType
	Name     string
	Kind     bulkhead.Kind
	Instance bulkhead.Instance // a *semaphore.Bulkhead, *pool.Bulkhead or their Keyed[string]
}

// New validates cfg and creates every instance it lists; on error nothing
// is left running.
func New(cfg Config) (*Registry, error) {
	r := &Registry{entries: map[key]*entry{}, closeDone: make(chan struct{})}
	if _, err := r.reconfigure(cfg, false); err != nil {
		return nil, err
	}
	return r, nil
}

// newEntry makes a bulkhead and its controller, if any; addLocked attaches it.
func newEntry(k key, sp spec) (*entry, error) {
	e := &entry{key: k}
	ctl, err := newControl(e, sp, nil)
	if err == nil {
		t := &target{cfg: sp, ctl: ctl}
		e.target.Store(t)
		e.b, err = newBulkhead(k, sp.withLimit(t.limit()))
	}
	if err != nil {
		return nil, fmt.Errorf("registry: %s %q: %w", k.kind, k.name, err)
	}
	return e, nil
}

// createListed creates, without adding them, the instances res lists that r
// does not hold; on error it returns them for closePools.
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

func listed(res *config.Resolved, k bulkhead.Kind) []string {
	if k == bulkhead.Pool {
		return res.Pools()
	}
	return res.Semaphores()
}

// closePools closes the pools among es at once, until ctx ends.
func closePools(ctx context.Context, es []*entry) error {
	errs := make([]error, len(es))
	var wg sync.WaitGroup
	for i, e := range es {
		if p, ok := e.b.(interface{ Close(context.Context) error }); ok {
			wg.Go(func() {
				if err := p.Close(ctx); err != nil {
					errs[i] = fmt.Errorf("registry: closing pool %q: %w", e.name, err)
				}
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// addLocked makes e part of r. r.mu must be held (or r not shared yet).
func (r *Registry) addLocked(e *entry) {
	r.setRingLocked(e)
	for _, c := range r.collectors {
		c.watch(e)
	}
	if r.listeners > 0 {
		r.listen(e)
	}
	e.control().attach(e)
	r.entries[e.key] = e
}

func (r *Registry) enqueueLocked(t EntryEventType, e *entry) {
	r.pending = append(r.pending, EntryEvent{Type: t, Name: e.name, Kind: e.kind, Instance: e.b})
}

// deliver calls the entry subscribers with the queued events, in order, with
// no lock held, unless another goroutine is delivering them.
func (r *Registry) deliver() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.delivering {
		return
	}
	r.delivering = true
	defer func() { r.delivering = false }() // also after a panic
	for len(r.pending) > 0 {
		ev := r.pending[0]
		r.pending = r.pending[1:]
		r.mu.Unlock()
		func() {
			defer r.mu.Lock()
			r.changes.Publish(ev)
		}()
	}
	r.pending = nil
}

func get[T handle](r *Registry, k bulkhead.Kind, name string, keyed bool) (T, error) {
	defer r.deliver()
	r.mu.Lock()
	defer r.mu.Unlock()
	var none T
	if r.closed {
		return none, fmt.Errorf("registry: %s %q: %w", k, name, bulkhead.ErrClosed)
	}
	if e, ok := r.entries[key{k, name}]; ok {
		if b, ok := e.b.(T); ok {
			return b, nil
		}
		return none, kindError(e.key, !keyed)
	}
	sp, ok := specOf(r.res, key{k, name})
	if r.res.Config().Strict && !ok {
		hint := ""
		if best := config.Closest(name, listed(r.res, k), func(s string) string { return s }); best != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", best)
		}
		return none, fmt.Errorf("%w: %s %q%s", ErrNotConfigured, k, name, hint)
	}
	if sp.isKeyed() != keyed {
		return none, kindError(key{k, name}, sp.isKeyed())
	}
	e, err := newEntry(key{k, name}, sp)
	if err != nil {
		return none, err
	}
	r.addLocked(e)
	r.enqueueLocked(EntryAdded, e)
	return e.b.(T), nil
}

// Semaphore returns the semaphore bulkhead called name, creating it (once)
// from its configuration, "default" or semaphore.DefaultConfig; after Close
// it fails with bulkhead.ErrClosed.
func (r *Registry) Semaphore(name string) (*semaphore.Bulkhead, error) {
	return get[*semaphore.Bulkhead](r, bulkhead.Semaphore, name, false)
}

// KeyedSemaphore returns the keyed semaphore called name (its configuration
// sets maxConcurrentCallsPerKey) as [Registry.Semaphore] does; asking either
// for the other form is an error that says which it is.
func (r *Registry) KeyedSemaphore(name string) (*semaphore.Keyed[string], error) {
	return get[*semaphore.Keyed[string]](r, bulkhead.Semaphore, name, true)
}

// Pool returns the pool bulkhead called name, as [Registry.Semaphore] does.
func (r *Registry) Pool(name string) (*pool.Bulkhead, error) {
	return get[*pool.Bulkhead](r, bulkhead.Pool, name, false)
}

// KeyedPool returns the keyed pool called name (its configuration sets
// maxRunningPerKey or queueCapacityPerKey) as [Registry.Pool] does; asking
// either for the other form is an error that says which it is.
func (r *Registry) KeyedPool(name string) (*pool.Keyed[string], error) {
	return get[*pool.Keyed[string]](r, bulkhead.Pool, name, true)
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

// Instances returns every bulkhead, by name, semaphores before pools.
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
	defer r.mu.Unlock()
	return r.sortedLocked()
}

func (r *Registry) sortedLocked() []*entry {
	return slices.SortedFunc(maps.Values(r.entries), func(a, b *entry) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.kind, b.kind))
	})
}

// Remove takes the named bulkhead out of the registry and returns it to the
// caller, who owns (and closes) it: nothing the registry does changes it
// after Remove returns.
func (r *Registry) Remove(k bulkhead.Kind, name string) (bulkhead.Instance, bool) {
	r.mu.Lock()
	e, ok := r.entries[key{k, name}]
	if !ok {
		r.mu.Unlock()
		return nil, false
	}
	delete(r.entries, e.key)
	e.stopListening()
	for _, c := range r.collectors {
		c.unwatch(e)
	}
	e.removed.Store(true)
	e.control().detach()
	r.enqueueLocked(EntryRemoved, e)
	r.mu.Unlock()
	_, _ = e.sync() // through the bulkhead's lock: an apply under way has landed
	r.deliver()
	return e.b, true
}

// Reconfigure makes a valid cfg the configuration: every live bulkhead gets
// the limits cfg resolves for its name ("default" if no longer listed), and
// listed instances are created; a cfg invalid or refused by a live bulkhead
// changes nothing. The only later error is a pool refusing a new KeepAlive,
// which keeps its old limits; concurrent calls leave the last cfg installed everywhere.
func (r *Registry) Reconfigure(cfg Config) error { _, err := r.reconfigure(cfg, false); return err }

// reconfigure is Reconfigure, reporting whether it switched; with keep, it
// refuses a configuration dropping an instance the running one lists and r holds.
func (r *Registry) reconfigure(cfg Config, keep bool) (switched bool, err error) {
	res, err := config.Resolve(cfg)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	plan, created, err := r.planLocked(res, keep)
	if err != nil {
		r.mu.Unlock()
		_ = closePools(context.Background(), created) // never shared: no tasks
		return false, err
	}
	// Nothing but a pool's new KeepAlive can fail from here on: switch.
	r.res = res
	for _, c := range plan {
		old := c.e.target.Swap(c.t)
		if old.ctl != c.t.ctl {
			old.ctl.detach()
			c.t.ctl.attach(c.e)
		}
		if old.cfg.Buffer != c.t.cfg.Buffer {
			r.setRingLocked(c.e)
		}
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
	return true, errors.Join(errs...)
}

type change struct {
	e *entry
	t *target
}

// planLocked returns what res changes for r's entries and the instances it
// creates, or why res cannot replace r's configuration.
func (r *Registry) planLocked(res *config.Resolved, keep bool) (plan []change, created []*entry, err error) {
	if r.closed {
		return nil, nil, fmt.Errorf("registry: reconfigure: %w", bulkhead.ErrClosed)
	}
	es := r.sortedLocked()
	var dropped []string
	for _, e := range es {
		_, was := specOf(r.res, e.key)
		if _, still := specOf(res, e.key); keep && was && !still {
			dropped = append(dropped, fmt.Sprintf("%s instance %q", e.kind, e.name))
		}
	}
	if len(dropped) > 0 {
		return nil, nil, fmt.Errorf("registry: the new configuration no longer lists %s, %s in use; the running configuration stays (Remove it first)",
			strings.Join(dropped, ", "), map[bool]string{false: "which is", true: "which are"}[len(dropped) > 1])
	}
	for _, e := range es {
		sp, _ := specOf(res, e.key)
		if form := sp.form(e.kind); form != e.target.Load().cfg.form(e.kind) {
			return nil, nil, fmt.Errorf("registry: the new configuration makes %s %q %s, which it is not now; the running configuration stays (Remove it first)", e.kind, e.name, form)
		}
		ctl, err := newControl(e, sp, e.control())
		if err != nil {
			return nil, nil, fmt.Errorf("registry: %s %q: %w", e.kind, e.name, err)
		}
		plan = append(plan, change{e, &target{cfg: sp, ctl: ctl}})
	}
	created, err = r.createListed(res)
	return plan, created, err
}

// setRingLocked gives e a ring of its configured size, keeping the newest
// events, while r records, and none otherwise.
func (r *Registry) setRingLocked(e *entry) {
	var next *ring
	if size := e.target.Load().cfg.Buffer; r.recording && size > 0 {
		next = &ring{buf: make([]record, size)}
		if old := e.ring.Load(); old != nil {
			for _, rec := range old.records() {
				next.put(rec)
			}
		}
	}
	e.ring.Store(next)
}

func (r *Registry) setRecordingLocked(on bool) {
	if on == r.recording {
		return
	}
	r.recording = on
	for _, e := range r.entries {
		r.setRingLocked(e)
	}
	if on {
		r.retainLocked()
	} else {
		r.releaseLocked()
	}
}

// Close closes every pool as pool.Bulkhead.Close does, until ctx ends; then
// the registry creates nothing (bulkhead.ErrClosed) but still shows them.
// A second call waits for the first.
func (r *Registry) Close(ctx context.Context) error {
	if ctx == nil {
		panic("registry: Close called with a nil Context")
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		select {
		case <-r.closeDone: // closed after closeErr was set
			return r.closeErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.closed = true
	es := slices.Collect(maps.Values(r.entries))
	for _, e := range es {
		e.control().detach()
	}
	r.mu.Unlock()
	err := closePools(ctx, es)
	r.mu.Lock()
	for _, e := range r.entries {
		e.stopListening()
	}
	r.closeErr = err
	close(r.closeDone)
	r.mu.Unlock()
	return err
}

// Subscribe calls fn with every bulkhead's per-call events until cancel
// (package bulkhead, "Callbacks").
func (r *Registry) Subscribe(fn func(bulkhead.Event)) (cancel func()) {
	if fn == nil {
		panic("registry: Subscribe called with a nil function")
	}
	c := r.calls.Subscribe(fn)
	r.mu.Lock()
	r.retainLocked()
	r.mu.Unlock()
	return sync.OnceFunc(func() {
		c()
		r.mu.Lock()
		r.releaseLocked()
		r.mu.Unlock()
	})
}

// SubscribeEntries calls fn when a bulkhead is added, removed or
// reconfigured, in order and with no lock held, so fn may call the registry.
func (r *Registry) SubscribeEntries(fn func(EntryEvent)) (cancel func()) {
	if fn == nil {
		panic("registry: SubscribeEntries called with a nil function")
	}
	return r.changes.Subscribe(fn)
}

// retainLocked counts one more reason to forward the instances' events.
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

func (e *entry) stopListening() {
	if e.unsub != nil {
		e.unsub()
		e.unsub = nil
	}
}

// listen feeds e's events to its ring, r's subscribers and the histograms.
func (r *Registry) listen(e *entry) {
	e.unsub = e.b.Subscribe(func(ev bulkhead.Event) {
		if rg := e.ring.Load(); rg != nil {
			rg.add(&ev)
		}
		r.calls.Publish(ev)
		e.hists.Publish(ev)
	})
}
