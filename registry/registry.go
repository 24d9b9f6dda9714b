package registry

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/internal/event"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// ErrWrongKind is matched by the error of asking for a bulkhead as the
// other kind: a semaphore by Pool, a pool by Semaphore.
var ErrWrongKind = errors.New("registry: bulkhead is of the other kind")

// Registry holds named bulkheads of both kinds. A name is one bulkhead for
// the registry's life (until Remove): asking for it again returns the same
// one. It is safe for concurrent use. Create one with [New]; stop it with
// [Registry.Close], which closes its pools.
type Registry struct {
	mu        sync.Mutex
	cfg       Config
	entries   map[string]*entry
	closed    bool
	closeDone chan struct{}
	closeErr  error
	listeners int  // reasons to receive the instances' events
	recording bool // Handler was called: keep recent events per instance

	calls   event.Hub       // every instance's per-call events
	changes hub[EntryEvent] // added, removed, reconfigured
}

type entry struct {
	name  string
	kind  bulkhead.Kind
	sem   *semaphore.Bulkhead
	pool  *pool.Bulkhead
	size  int                  // event buffer size from the config
	ring  atomic.Pointer[ring] // recent events, while recording
	unsub func()               // the forwarding subscription, while listened to
}

func (e *entry) instance() bulkhead.Instance {
	if e.sem != nil {
		return e.sem
	}
	return e.pool
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
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Registry{cfg: cfg, entries: map[string]*entry{}}
	var err error
	for _, name := range sortedKeys(cfg.Semaphores) {
		if _, err = r.createLocked(name, bulkhead.Semaphore); err != nil {
			break
		}
	}
	if err == nil {
		for _, name := range sortedKeys(cfg.Pools) {
			if _, err = r.createLocked(name, bulkhead.Pool); err != nil {
				break
			}
		}
	}
	if err != nil {
		// New pools have no tasks: Close returns at once.
		_ = r.Close(context.Background())
		return nil, err
	}
	return r, nil
}

// semaphoreConfig fills a resolved spec's unset fields from
// semaphore.DefaultConfig.
func semaphoreConfig(s SemaphoreSpec) semaphore.Config {
	c := semaphore.DefaultConfig()
	if s.MaxConcurrentCalls != nil {
		c.MaxConcurrentCalls = *s.MaxConcurrentCalls
	}
	if s.MaxWaitDuration != nil {
		c.MaxWaitDuration = *s.MaxWaitDuration
	}
	return c
}

// poolConfig fills a resolved spec's unset fields from pool.DefaultConfig.
func poolConfig(s PoolSpec) pool.Config {
	c := pool.DefaultConfig()
	if s.MaxWorkers != nil {
		c.MaxWorkers = *s.MaxWorkers
	}
	if s.QueueCapacity != nil {
		c.QueueCapacity = *s.QueueCapacity
	}
	if s.MaxWaitDuration != nil {
		c.MaxWaitDuration = *s.MaxWaitDuration
	}
	if s.KeepAlive != nil {
		c.KeepAlive = *s.KeepAlive
	}
	return c
}

// configuredKind says which kind cfg lists name as, or 0.
func configuredKind(cfg Config, name string) bulkhead.Kind {
	if _, ok := cfg.Semaphores[name]; ok {
		return bulkhead.Semaphore
	}
	if _, ok := cfg.Pools[name]; ok {
		return bulkhead.Pool
	}
	return 0
}

func wrongKind(name string, is, asked bulkhead.Kind, configured bool) error {
	how := "is"
	if configured {
		how = "is configured as"
	}
	return fmt.Errorf("registry: %q %s a %s bulkhead, not a %s: %w", name, how, is, asked, ErrWrongKind)
}

// createLocked makes the named bulkhead of kind k from the configuration.
func (r *Registry) createLocked(name string, k bulkhead.Kind) (*entry, error) {
	if ck := configuredKind(r.cfg, name); ck != 0 && ck != k {
		return nil, wrongKind(name, ck, k, true)
	}
	e := &entry{name: name, kind: k}
	if k == bulkhead.Semaphore {
		spec, err := r.cfg.resolveSemaphore(name)
		if err != nil {
			return nil, err
		}
		b, err := semaphore.New(name, semaphoreConfig(spec))
		if err != nil {
			return nil, fmt.Errorf("registry: semaphore %q: %w", name, err)
		}
		e.sem, e.size = b, bufferSize(spec.EventBufferSize)
	} else {
		spec, err := r.cfg.resolvePool(name)
		if err != nil {
			return nil, err
		}
		b, err := pool.New(name, poolConfig(spec))
		if err != nil {
			return nil, fmt.Errorf("registry: pool %q: %w", name, err)
		}
		e.pool, e.size = b, bufferSize(spec.EventBufferSize)
	}
	if r.recording && e.size > 0 {
		e.ring.Store(newRing(e.size))
	}
	if r.listeners > 0 {
		r.listen(e)
	}
	r.entries[name] = e
	return e, nil
}

// get returns the named entry of kind k, creating it if need be.
func (r *Registry) get(name string, k bulkhead.Kind) (*entry, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, fmt.Errorf("registry: %s %q: %w", k, name, bulkhead.ErrClosed)
	}
	if e, ok := r.entries[name]; ok {
		r.mu.Unlock()
		if e.kind != k {
			return nil, wrongKind(name, e.kind, k, false)
		}
		return e, nil
	}
	e, err := r.createLocked(name, k)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	r.changes.publish(EntryEvent{Type: EntryAdded, Name: name, Kind: k, Instance: e.instance()})
	return e, nil
}

// Semaphore returns the semaphore bulkhead called name, creating it from
// the configuration if it does not exist yet: its own entry in
// Config.Semaphores if listed, otherwise the "default" semaphore config (or
// semaphore.DefaultConfig). Concurrent first calls create exactly one. It
// fails with [ErrWrongKind] if name is a pool, and with bulkhead.ErrClosed
// after Close.
func (r *Registry) Semaphore(name string) (*semaphore.Bulkhead, error) {
	e, err := r.get(name, bulkhead.Semaphore)
	if err != nil {
		return nil, err
	}
	return e.sem, nil
}

// Pool returns the pool bulkhead called name, creating it as [Registry.Semaphore]
// does, from Config.Pools, the "default" pool config or pool.DefaultConfig.
func (r *Registry) Pool(name string) (*pool.Bulkhead, error) {
	e, err := r.get(name, bulkhead.Pool)
	if err != nil {
		return nil, err
	}
	return e.pool, nil
}

// Find returns the named bulkhead without creating it.
func (r *Registry) Find(name string) (bulkhead.Instance, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.entries[name]; ok {
		return e.instance(), true
	}
	return nil, false
}

// Instances returns every bulkhead, sorted by name.
func (r *Registry) Instances() []bulkhead.Instance {
	es := r.snapshot()
	out := make([]bulkhead.Instance, len(es))
	for i, e := range es {
		out[i] = e.instance()
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
	sort.Slice(es, func(i, j int) bool { return es[i].name < es[j].name })
	return es
}

// Remove takes the named bulkhead out of the registry and returns it; a
// later request for the name creates a new one. A removed pool is not
// closed: the caller owns it now and should Close it.
func (r *Registry) Remove(name string) (bulkhead.Instance, bool) {
	r.mu.Lock()
	e, ok := r.entries[name]
	if ok {
		delete(r.entries, name)
		if e.unsub != nil {
			e.unsub()
			e.unsub = nil
		}
	}
	r.mu.Unlock()
	if !ok {
		return nil, false
	}
	r.changes.publish(EntryEvent{Type: EntryRemoved, Name: name, Kind: e.kind, Instance: e.instance()})
	return e.instance(), true
}

// Reconfigure validates cfg and makes it the registry's configuration: every
// live bulkhead gets the limits cfg resolves for its name (a live bulkhead
// that cfg no longer lists gets the "default" config), and instances cfg
// lists that do not exist yet are created. It changes nothing if cfg is
// invalid or would turn a live bulkhead into the other kind. Bulkheads'
// own Reconfigure never blocks, so neither does this.
func (r *Registry) Reconfigure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return fmt.Errorf("registry: reconfigure: %w", bulkhead.ErrClosed)
	}
	for _, name := range sortedKeys(r.entries) {
		e := r.entries[name]
		if ck := configuredKind(cfg, name); ck != 0 && ck != e.kind {
			r.mu.Unlock()
			return fmt.Errorf("registry: reconfigure: %q is a live %s bulkhead and the new config lists it as a %s: %w", name, e.kind, ck, ErrWrongKind)
		}
	}
	r.cfg = cfg
	var events []EntryEvent
	var errs []error
	for _, name := range sortedKeys(r.entries) {
		e := r.entries[name]
		changed, err := r.applyLocked(e)
		if err != nil {
			errs = append(errs, err)
		}
		if changed {
			events = append(events, EntryEvent{Type: EntryReconfigured, Name: name, Kind: e.kind, Instance: e.instance()})
		}
	}
	for _, k := range []bulkhead.Kind{bulkhead.Semaphore, bulkhead.Pool} {
		names := sortedKeys(cfg.Semaphores)
		if k == bulkhead.Pool {
			names = sortedKeys(cfg.Pools)
		}
		for _, name := range names {
			if _, ok := r.entries[name]; ok {
				continue
			}
			e, err := r.createLocked(name, k)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			events = append(events, EntryEvent{Type: EntryAdded, Name: name, Kind: k, Instance: e.instance()})
		}
	}
	r.mu.Unlock()
	for _, ev := range events {
		r.changes.publish(ev)
	}
	return errors.Join(errs...)
}

// applyLocked gives e the limits of the current configuration and reports
// whether anything changed.
func (r *Registry) applyLocked(e *entry) (bool, error) {
	var size int
	changed := false
	if e.sem != nil {
		spec, err := r.cfg.resolveSemaphore(e.name)
		if err != nil {
			return false, err
		}
		if c := semaphoreConfig(spec); c != e.sem.Config() {
			if err := e.sem.Reconfigure(c); err != nil {
				return false, fmt.Errorf("registry: semaphore %q: %w", e.name, err)
			}
			changed = true
		}
		size = bufferSize(spec.EventBufferSize)
	} else {
		spec, err := r.cfg.resolvePool(e.name)
		if err != nil {
			return false, err
		}
		if c := poolConfig(spec); c != e.pool.Config() {
			if err := e.pool.Reconfigure(c); err != nil {
				return false, fmt.Errorf("registry: pool %q: %w", e.name, err)
			}
			changed = true
		}
		size = bufferSize(spec.EventBufferSize)
	}
	if size != e.size {
		e.size = size
		if r.recording {
			var next *ring
			if size > 0 {
				next = newRing(size)
				if old := e.ring.Load(); old != nil {
					for _, ev := range old.events() {
						next.add(ev)
					}
				}
			}
			e.ring.Store(next)
		}
	}
	return changed, nil
}

// Close closes every pool bulkhead, as pool.Bulkhead.Close does: running and
// queued tasks may finish until ctx ends. Afterwards the registry creates
// nothing (Semaphore and Pool fail with bulkhead.ErrClosed) but Find,
// Instances, the metrics and the Handler still show the bulkheads' last
// state. Close is idempotent; a second call waits for the first, or for its
// own ctx.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		done := r.closeDone
		r.mu.Unlock()
		select {
		case <-done:
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.closeErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.closed = true
	r.closeDone = make(chan struct{})
	var pools []*pool.Bulkhead
	for _, e := range r.entries {
		if e.pool != nil {
			pools = append(pools, e.pool)
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
		if e.unsub != nil {
			e.unsub()
			e.unsub = nil
		}
	}
	r.closeErr = err
	close(r.closeDone)
	r.mu.Unlock()
	return err
}

// Subscribe calls fn with the per-call events of every bulkhead in the
// registry, present and future, until cancel is called. fn runs on the
// goroutine of the call that caused the event: keep it short. Instances
// publish events only while someone listens, so with no subscriber (and no
// Handler or histograms) they cost nothing.
func (r *Registry) Subscribe(fn func(bulkhead.Event)) (cancel func()) {
	if fn == nil {
		return func() {}
	}
	c := r.calls.Subscribe(fn)
	r.retain()
	var once sync.Once
	return func() {
		once.Do(func() {
			c()
			r.release()
		})
	}
}

// SubscribeEntries calls fn when a bulkhead is added, removed or
// reconfigured, until cancel is called. fn is called without any registry
// lock held.
func (r *Registry) SubscribeEntries(fn func(EntryEvent)) (cancel func()) {
	return r.changes.subscribe(fn)
}

// retain starts forwarding every instance's events to r.calls and the
// rings, if it was not already.
func (r *Registry) retain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listeners++
	if r.listeners == 1 && !r.closed {
		for _, e := range r.entries {
			r.listen(e)
		}
	}
}

func (r *Registry) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listeners--
	if r.listeners == 0 {
		for _, e := range r.entries {
			if e.unsub != nil {
				e.unsub()
				e.unsub = nil
			}
		}
	}
}

// listen subscribes the registry to e's events.
func (r *Registry) listen(e *entry) {
	if e.unsub != nil {
		return
	}
	fwd := func(ev bulkhead.Event) {
		if rg := e.ring.Load(); rg != nil {
			rg.add(ev)
		}
		r.calls.Publish(ev)
	}
	if e.sem != nil {
		e.unsub = e.sem.Subscribe(fwd)
	} else {
		e.unsub = e.pool.Subscribe(fwd)
	}
}

// hub is a minimal subscriber list for registry events.
type hub[T any] struct {
	mu   sync.Mutex
	next int
	subs map[int]func(T)
}

func (h *hub[T]) subscribe(fn func(T)) func() {
	if fn == nil {
		return func() {}
	}
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[int]func(T){}
	}
	id := h.next
	h.next++
	h.subs[id] = fn
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.subs, id)
		h.mu.Unlock()
	}
}

func (h *hub[T]) publish(v T) {
	h.mu.Lock()
	ids := make([]int, 0, len(h.subs))
	for id := range h.subs {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	fns := make([]func(T), len(ids))
	for i, id := range ids {
		fns[i] = h.subs[id]
	}
	h.mu.Unlock()
	for _, fn := range fns {
		func() {
			defer func() { _ = recover() }()
			fn(v)
		}()
	}
}
