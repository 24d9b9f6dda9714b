package registry

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/bulkhead-go/bulkhead/adaptive"
)

// target is what the registry wants an entry's bulkhead to be: its
// configuration, and the controller that owns its limit, if any.
type target struct {
	cfg spec     // as configured
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
		a := e.applies.begin(t.cfg.withLimit(limit))
		if a == nil {
			return changed, nil // the caller of Remove owns it now
		}
		var c bool
		c, err = syncBulkhead(e.b, t.cfg, limit)
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
	want spec // the configuration it gives the bulkhead
	done atomic.Bool
}

// begin registers an apply of want, or returns nil after remove.
func (as *applies) begin(want spec) *applyRun {
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
		for !a.done.Load() && !holds(b, a.want) {
			runtime.Gosched()
		}
	}
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
