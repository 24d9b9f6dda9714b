package registry

import (
	"reflect"
	"sync/atomic"

	"github.com/bulkhead-go/bulkhead/adaptive"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// target is what the registry wants an entry's bulkhead to be.
type target struct {
	cfg spec     // as configured
	ctl *control // nil without an adaptive block
}

// control is an adaptive controller that owns a bulkhead's limit.
type control struct {
	cfg   adaptive.Config
	c     *adaptive.Controller
	limit atomic.Int64 // the limit the controller set last, 0 if none
	unsub func()       // its subscription to the bulkhead's events (r.mu)
}

// newControl returns the controller sp gives e's bulkhead: none, cur while
// the adaptive block stays the same, or a new one (attach subscribes it).
func newControl(e *entry, sp spec, cur *control) (*control, error) {
	switch {
	case sp.Adaptive == nil:
		return nil, nil
	case cur != nil && cur.cfg == *sp.Adaptive:
		return cur, nil
	}
	ctl := &control{cfg: *sp.Adaptive}
	c, err := adaptive.New(ctl.cfg, sp.limit(e.kind), func(n int) error { return e.setLimit(ctl, n) })
	if err != nil {
		return nil, err
	}
	ctl.c = c
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

// setLimit is the controller's set function; before newControl set ctl.c,
// adaptive.New is choosing the initial limit, which the registry applies.
func (e *entry) setLimit(ctl *control, n int) error {
	ctl.limit.Store(int64(n))
	if ctl.c == nil {
		return nil // the initial limit
	}
	_, err := e.sync()
	return err
}

// sync gives e's bulkhead the configuration the registry chose, with its
// controller's limit, and reports whether that changed anything. It reads
// what is wanted under the bulkhead's lock, so that whichever of Reconfigure
// and the controller applies last gives the latest of both. It holds no
// registry lock (subscribers run here).
func (e *entry) sync() (changed bool, err error) {
	switch b := e.b.(type) {
	case conditional[semaphore.Config]:
		return syncIf(b, e, func(sp spec) semaphore.Config { return sp.sem })
	case conditional[pool.Config]:
		return syncIf(b, e, func(sp spec) pool.Config { return sp.pool })
	case conditional[semaphore.KeyedConfig]:
		return syncIf(b, e, func(sp spec) semaphore.KeyedConfig { return *sp.Keyed })
	case conditional[pool.KeyedConfig]:
		return syncIf(b, e, func(sp spec) pool.KeyedConfig { return *sp.KeyedPool })
	}
	return false, nil
}

// conditional is a bulkhead as sync uses it (tests wrap one to hold it).
type conditional[C comparable] interface {
	ReconfigureFunc(func(C) (C, bool)) error
}

func syncIf[C comparable](b conditional[C], e *entry, of func(spec) C) (changed bool, err error) {
	err = b.ReconfigureFunc(func(cur C) (C, bool) {
		if e.removed.Load() {
			return cur, false
		}
		t := e.target.Load()
		want := of(t.cfg.withLimit(t.limit()))
		changed = !reflect.DeepEqual(want, cur) // its pointers (CoDel, Priorities, Shadow) by the values they point to
		return want, changed
	})
	return changed && err == nil, err
}

// limit is the limit t's controller set last, 0 if none (a shadow sets none).
func (t *target) limit() int {
	if t.ctl == nil {
		return 0
	}
	return int(t.ctl.limit.Load())
}

func (e *entry) control() *control { return e.target.Load().ctl }
