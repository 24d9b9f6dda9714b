package semaphore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// Shadow is a tighter limit evaluated on live traffic and never enforced:
// each call that holds its permit for its whole duration (Do, Execute, a
// Permit) also takes a shadow permit if one is free, and gives it back
// when it ends, so that the shadow runs exactly as enforcement would have.
// See [Bulkhead.ShadowStats].
type Shadow struct {
	// MaxConcurrentCalls is the shadow's limit, at most the Config's; 0
	// means the Config's.
	MaxConcurrentCalls int
	// MaxWaitDuration is the shadow's wait, at most the Config's; 0 means
	// the Config's. A call that waited longer for its permit counts as one
	// the shadow would have timed out.
	MaxWaitDuration time.Duration
}

// validateShadow reports what is wrong with c's Shadow or Observe.
func (c Config) validateShadow() error {
	switch sh := c.Shadow; {
	case c.Observe && sh != nil:
		return fmt.Errorf("observe and shadow: set one (observe makes maxConcurrentCalls the shadow)")
	case c.Observe && c.Priorities != nil:
		return fmt.Errorf("observe and priorities: set one (observe enforces nothing, so no capacity is reserved)")
	case sh == nil:
		return nil
	case sh.MaxConcurrentCalls < 0 || sh.MaxConcurrentCalls > c.MaxConcurrentCalls:
		return fmt.Errorf("shadow.maxConcurrentCalls must be from 0 (maxConcurrentCalls) to maxConcurrentCalls %d, got %d", c.MaxConcurrentCalls, sh.MaxConcurrentCalls)
	case sh.MaxWaitDuration < 0 || sh.MaxWaitDuration > c.MaxWaitDuration:
		return fmt.Errorf("shadow.maxWaitDuration must be from 0 (maxWaitDuration) to maxWaitDuration %v, got %v", c.MaxWaitDuration, sh.MaxWaitDuration)
	case cmp.Or(sh.MaxConcurrentCalls, c.MaxConcurrentCalls) == c.MaxConcurrentCalls && cmp.Or(sh.MaxWaitDuration, c.MaxWaitDuration) == c.MaxWaitDuration:
		return fmt.Errorf("shadow %+v is the enforced limit itself: it would count nothing", *sh)
	}
	return nil
}

// applyShadow sets st's shadow from cfg, and, for a bulkhead without
// Priorities, the limit its calls are admitted to on the configured path.
func (st *settings) applyShadow(cfg Config) {
	switch {
	case cfg.Observe:
		st.shadow, st.shadowWait = cfg.MaxConcurrentCalls, cfg.MaxWaitDuration
	case cfg.Shadow != nil:
		c := *cfg.Shadow // a copy: the caller's may change
		st.cfg.Shadow = &c
		st.shadow, st.shadowWait = cmp.Or(c.MaxConcurrentCalls, cfg.MaxConcurrentCalls), cmp.Or(c.MaxWaitDuration, cfg.MaxWaitDuration)
		st.timeOuts = st.shadowWait < cfg.MaxWaitDuration
	}
	st.slow = st.prio || st.shadow > 0
	st.refuseNow = !st.slow && cfg.MaxWaitDuration <= 0
	if !st.prio {
		limit := cfg.MaxConcurrentCalls
		if cfg.Observe {
			limit = MaxLimit
		}
		st.ceil = [nLanes]int{limit, limit, limit, limit}
	}
}

// ShadowStats returns what the Config's Shadow, or with Observe the
// Config's own limit, would have done to the calls so far, and false if
// neither is set. Bare Acquire and TryAcquire hold no shadow permit: for
// them the shadow counts a call when the permits in use reach its limit,
// which over-counts (the calls it would have refused are running).
func (b *Bulkhead) ShadowStats() (bulkhead.ShadowStats, bool) {
	st := b.settings()
	if st.shadow == 0 {
		return bulkhead.ShadowStats{}, false
	}
	return bulkhead.ShadowStats{Limit: st.shadow, InUse: int(b.shadowInUse.Load()), WouldReject: b.wouldReject.Load(),
		WouldWait: b.wouldWait.Load(), WouldTimeOut: b.wouldTimeOut.Load(), Observe: st.cfg.Observe}, true
}

// shadowTake takes a shadow permit for a call just admitted, if the shadow
// has one free, and reports whether it did; a call that finds the shadow
// full is counted. The enforced decision is made before and alone.
func (b *Bulkhead) shadowTake(st *settings) bool {
	for {
		n := b.shadowInUse.Load()
		if n >= int64(st.shadow) {
			b.shadowMiss(st)
			return false
		}
		if b.shadowInUse.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// shadowMiss counts a call that found the shadow full: one the shadow would
// have made wait, if it waits, or refused.
func (b *Bulkhead) shadowMiss(st *settings) {
	if st.shadowWait > 0 {
		b.wouldWait.Add(1)
	} else {
		b.wouldReject.Add(1)
	}
}

// shadowNaive counts a call admitted by Acquire or TryAcquire, which holds
// no shadow permit, if the permits in use before it reached the shadow's.
func (b *Bulkhead) shadowNaive(st *settings) {
	if inUse(b.state.Load())-1 >= st.shadow {
		b.shadowMiss(st)
	}
}

// shadowDone gives back a shadow permit if the call held one.
func (b *Bulkhead) shadowDone(held bool) {
	if held {
		b.shadowInUse.Add(-1)
	}
}

// errShadowed tells Do that its bulkhead has a shadow: doShadowed takes
// over the call.
var errShadowed = errors.New("semaphore: shadowed")

// acquireDo is acquireClass for Do, which a shadowed bulkhead sends to
// doShadowed instead. It loads the settings itself, so that Do keeps none
// live past its rejection (G2_Reject, G1_Guard semaphore_Do: the
// instruction counts from before priorities).
//
//go:noinline
func (b *Bulkhead) acquireDo(ctx context.Context) (time.Time, *waiter, error) {
	st := b.set.Load()
	if st.shadow > 0 {
		return time.Time{}, nil, errShadowed
	}
	return b.acquireClass(ctx, st)
}

// doShadowed is Do for a bulkhead with a shadow, once ctx is known to be
// live. The shadow permit is given back before the enforced one, so that a
// waiter granted the enforced permit finds it free.
//
//go:noinline
func (b *Bulkhead) doShadowed(ctx context.Context, fn func(context.Context) error) error {
	st := b.set.Load()
	start, spare, err := b.acquireClass(ctx, st)
	if err != nil {
		return err
	}
	if b.hub.Active() {
		start = b.permitted(start)
	}
	held := b.shadowTake(st)
	returned := false
	defer func() {
		if !returned {
			b.shadowDone(held)
			b.abort(start, recover())
		}
	}()
	err = fn(ctx)
	returned = true
	b.shadowDone(held)
	s := b.state.Add(oneFinished-1) - (oneFinished - 1)
	b.releasedSlow(s, start, err, spare)
	return err
}

// acquirePermitShadowed is AcquirePermit for a bulkhead with a shadow.
func (b *Bulkhead) acquirePermitShadowed(ctx context.Context, st *settings) (Permit, error) {
	if err := ctx.Err(); err != nil {
		return Permit{}, err
	}
	start, _, err := b.acquireClass(ctx, st)
	if err != nil {
		return Permit{}, err
	}
	if b.hub.Active() {
		start = b.permitted(start)
	}
	return Permit{b: b, start: start, shadow: b.shadowTake(st), released: new(atomic.Bool)}, nil
}
