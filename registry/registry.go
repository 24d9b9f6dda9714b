package registry

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"unicode/utf8"

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
	listeners int    // reasons to receive the instances' events
	recording bool   // Handler was called: keep recent events per instance
	gen       uint64 // bumped by every Reconfigure that changes the configuration

	// Entry events wait in pending, in the order of the changes (which are
	// made under mu), until the goroutine that is delivering takes them:
	// subscribers are called in that order, one event at a time, with no
	// registry lock held.
	pending    []EntryEvent
	delivering bool

	calls   event.Hub[bulkhead.Event] // every instance's per-call events
	changes event.Hub[EntryEvent]     // added, removed, reconfigured
}

type entry struct {
	name  string
	kind  bulkhead.Kind
	sem   *semaphore.Bulkhead
	pool  *pool.Bulkhead
	size  int                  // event buffer size from the config
	ring  atomic.Pointer[ring] // recent events, while recording
	unsub func()               // the forwarding subscription, while listened to

	// The limits the registry last chose for the bulkhead and the
	// generation of the configuration they come from (r.mu guards them).
	// Reconfigure applies them with no lock held, and applies again if a
	// later Reconfigure changed them meanwhile.
	semWant  semaphore.Config
	poolWant pool.Config
	wantGen  uint64
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
	created, err := r.createListed(cfg)
	if err != nil {
		closeEntries(created)
		return nil, err
	}
	for _, e := range created {
		r.addLocked(e) // r is not shared yet
	}
	return r, nil
}

// createListed creates the instances cfg lists that r does not hold yet,
// without adding them to r. On error it returns what it created for the
// caller to close (with closeEntries, after unlocking).
func (r *Registry) createListed(cfg Config) ([]*entry, error) {
	var created []*entry
	for _, k := range []bulkhead.Kind{bulkhead.Semaphore, bulkhead.Pool} {
		names := sortedKeys(cfg.Semaphores)
		if k == bulkhead.Pool {
			names = sortedKeys(cfg.Pools)
		}
		for _, name := range names {
			if _, ok := r.entries[name]; ok {
				continue
			}
			e, err := newEntry(cfg, r.gen, name, k)
			if err != nil {
				return created, err
			}
			created = append(created, e)
		}
	}
	return created, nil
}

// closeEntries closes the pools of entries that were never shared: they
// have no tasks, so Close returns at once.
func closeEntries(es []*entry) {
	for _, e := range es {
		if e.pool != nil {
			_ = e.pool.Close(context.Background())
		}
	}
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
		c.QueueTimeout = *s.MaxWaitDuration
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

// newEntry makes the named bulkhead of kind k from cfg. It calls no user
// code and publishes nothing.
func newEntry(cfg Config, gen uint64, name string, k bulkhead.Kind) (*entry, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if ck := configuredKind(cfg, name); ck != 0 && ck != k {
		return nil, wrongKind(name, ck, k, true)
	}
	e := &entry{name: name, kind: k, wantGen: gen}
	if k == bulkhead.Semaphore {
		spec, err := cfg.resolveSemaphore(name)
		if err != nil {
			return nil, err
		}
		c := semaphoreConfig(spec)
		b, err := semaphore.New(name, c)
		if err != nil {
			return nil, fmt.Errorf("registry: semaphore %q: %w", name, err)
		}
		e.sem, e.semWant, e.size = b, c, bufferSize(spec.EventBufferSize)
	} else {
		spec, err := cfg.resolvePool(name)
		if err != nil {
			return nil, err
		}
		c := poolConfig(spec)
		b, err := pool.New(name, c)
		if err != nil {
			return nil, fmt.Errorf("registry: pool %q: %w", name, err)
		}
		e.pool, e.poolWant, e.size = b, c, bufferSize(spec.EventBufferSize)
	}
	return e, nil
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
	if r.listeners > 0 {
		r.listen(e)
	}
	r.entries[e.name] = e
}

// enqueueLocked queues an entry event for delivery. r.mu must be held, so
// that events queue in the order of the changes they report.
func (r *Registry) enqueueLocked(t EntryEventType, e *entry) {
	r.pending = append(r.pending, EntryEvent{Type: t, Name: e.name, Kind: e.kind, Instance: e.instance()})
}

// deliver calls the entry subscribers with the queued events, in order, with
// no lock held. If another goroutine is delivering already (perhaps the one
// that called the subscriber that called us), it delivers ours too, after
// those queued before them.
func (r *Registry) deliver() {
	r.mu.Lock()
	if r.delivering {
		r.mu.Unlock()
		return
	}
	r.delivering = true
	for len(r.pending) > 0 {
		evs := r.pending
		r.pending = nil
		r.mu.Unlock()
		for _, ev := range evs {
			r.changes.Publish(ev)
		}
		r.mu.Lock()
	}
	r.delivering = false
	r.mu.Unlock()
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
	e, err := newEntry(r.cfg, r.gen, name, k)
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
		r.enqueueLocked(EntryRemoved, e)
	}
	r.mu.Unlock()
	if !ok {
		return nil, false
	}
	r.deliver()
	return e.instance(), true
}

// Reconfigure validates cfg and makes it the registry's configuration: every
// live bulkhead gets the limits cfg resolves for its name (a live bulkhead
// that cfg no longer lists gets the "default" config), and instances cfg
// lists that do not exist yet are created.
//
// Everything that can be checked is checked before anything changes: if cfg
// is invalid, would turn a live bulkhead into the other kind, or an instance
// cannot be created, Reconfigure returns the error and changes nothing. Then
// it switches the configuration, and applies the new limits to the live
// bulkheads with no registry lock held (a pool that grows starts queued
// tasks there, and its subscribers run on this goroutine, so they may call
// the registry). A pool closed by its user rather than removed first keeps
// its last limits: Reconfigure skips it. The only error left after the
// switch is a pool failing to start its new workers for a changed
// KeepAlive; that pool keeps its old limits, the others get the new ones,
// and the error names it.
//
// Concurrent Reconfigure calls end with the limits of the configuration
// installed last on every bulkhead. It does not block on the bulkheads: their
// own Reconfigure never waits for calls in flight.
func (r *Registry) Reconfigure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	type change struct {
		e    *entry
		sc   semaphore.Config
		pc   pool.Config
		size int
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return fmt.Errorf("registry: reconfigure: %w", bulkhead.ErrClosed)
	}
	names := sortedKeys(r.entries)
	plan := make([]change, 0, len(names))
	for _, name := range names {
		e := r.entries[name]
		if ck := configuredKind(cfg, name); ck != 0 && ck != e.kind {
			r.mu.Unlock()
			return fmt.Errorf("registry: reconfigure: %q is a live %s bulkhead and the new config lists it as a %s: %w", name, e.kind, ck, ErrWrongKind)
		}
		c := change{e: e}
		var err error
		if e.sem != nil {
			var spec SemaphoreSpec
			if spec, err = cfg.resolveSemaphore(name); err == nil {
				c.sc, c.size = semaphoreConfig(spec), bufferSize(spec.EventBufferSize)
				err = c.sc.Validate()
			}
		} else {
			var spec PoolSpec
			if spec, err = cfg.resolvePool(name); err == nil {
				c.pc, c.size = poolConfig(spec), bufferSize(spec.EventBufferSize)
				err = c.pc.Validate()
			}
		}
		if err != nil {
			r.mu.Unlock()
			return fmt.Errorf("registry: reconfigure: %s %q: %w", e.kind, name, err)
		}
		plan = append(plan, c)
	}
	created, err := r.createListed(cfg)
	if err != nil {
		r.mu.Unlock()
		closeEntries(created)
		return err
	}

	// Nothing can fail from here on: switch.
	r.cfg = cfg
	r.gen++
	for _, c := range plan {
		e := c.e
		e.semWant, e.poolWant, e.wantGen = c.sc, c.pc, r.gen
		r.resizeLocked(e, c.size)
	}
	for _, e := range created {
		e.wantGen = r.gen
		r.addLocked(e)
		r.enqueueLocked(EntryAdded, e)
	}
	r.mu.Unlock()

	var errs []error
	for _, c := range plan {
		changed, err := r.apply(c.e)
		if err != nil {
			errs = append(errs, err)
		}
		if changed {
			r.mu.Lock()
			if r.entries[c.e.name] == c.e { // not removed meanwhile
				r.enqueueLocked(EntryReconfigured, c.e)
			}
			r.mu.Unlock()
		}
	}
	r.deliver()
	return errors.Join(errs...)
}

// apply gives e's bulkhead the limits the registry chose for it, with no
// lock held, and reports whether they changed. If a concurrent Reconfigure
// chose other limits meanwhile, it applies those too, so that the last
// configuration installed wins whatever the order the calls finish in.
func (r *Registry) apply(e *entry) (changed bool, err error) {
	for {
		r.mu.Lock()
		gen, sc, pc := e.wantGen, e.semWant, e.poolWant
		r.mu.Unlock()
		err = nil
		if e.sem != nil {
			if sc != e.sem.Config() {
				// Cannot fail: sc was validated.
				if err = e.sem.Reconfigure(sc); err == nil {
					changed = true
				}
			}
		} else if pc != e.pool.Config() {
			err = e.pool.Reconfigure(pc)
			switch {
			case err == nil:
				changed = true
			case errors.Is(err, bulkhead.ErrClosed):
				// Closed by its user, or by Close meanwhile: it runs
				// nothing more, so it has no limits to change.
				err = nil
			}
		}
		if err != nil {
			err = fmt.Errorf("registry: reconfigure: %s %q keeps its old limits: %w", e.kind, e.name, err)
		}
		r.mu.Lock()
		again := e.wantGen != gen
		r.mu.Unlock()
		if !again {
			return changed, err
		}
	}
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
// reconfigured, until cancel is called. Events arrive one at a time, in the
// order of the changes, with no registry lock held, so fn may call the
// registry. Usually fn runs on the goroutine that made the change, before
// that call returns; but while another goroutine is delivering events (for
// instance fn's own), that goroutine delivers the new ones after those
// before them.
func (r *Registry) SubscribeEntries(fn func(EntryEvent)) (cancel func()) {
	return r.changes.Subscribe(fn)
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
