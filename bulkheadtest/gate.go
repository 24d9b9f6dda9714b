package bulkheadtest

import (
	"context"
	"net/http"
	"sync"
)

// Gate holds a stub dependency's calls during a burst and counts them. Put
// it inside the dependency, after the bulkhead: a call that reaches the gate
// holds a permit. While [Run] is running a burst that names the gate, Wait
// blocks until every worker of the run has settled; at any other time it
// returns at once, so the stub also serves ordinary traffic.
//
// The zero value is ready to use. A Gate belongs to one burst at a time, and
// during that burst each of its calls should pass the gate at most once and
// nothing else should pass it, or the counts will be wrong.
type Gate struct {
	mu  sync.Mutex
	cur *session // nil when no burst is running
}

// session is one burst's use of a gate. Calls keep the session they entered,
// so a straggler leaving after its burst ended does not disturb the next one.
type session struct {
	open   chan struct{} // closed when the run has settled
	wake   chan<- struct{}
	inside int // calls waiting at the gate now
	peak   int // most calls ever waiting at the gate together
}

// Wait is what the stub dependency calls first. During a burst it records
// the call and blocks until the run has settled or ctx ends, returning
// ctx.Err() in the latter case; otherwise it returns nil at once. A nil
// ctx is a bug in the caller: Wait panics.
func (g *Gate) Wait(ctx context.Context) error {
	if ctx == nil {
		panic("bulkheadtest: Gate.Wait called with a nil Context")
	}
	g.mu.Lock()
	s := g.cur
	if s == nil {
		g.mu.Unlock()
		return nil
	}
	s.inside++
	s.peak = max(s.peak, s.inside)
	g.mu.Unlock()
	notify(s.wake)

	var err error
	select {
	case <-s.open:
	case <-ctx.Done():
		err = ctx.Err()
	}

	g.mu.Lock()
	s.inside--
	g.mu.Unlock()
	notify(s.wake)
	return err
}

// Handler returns a handler that waits at the gate with the request's
// context and then serves the request with next. If the request's context
// ends first, it answers 503 Service Unavailable (the client has usually
// gone by then). A nil next is a bug in the caller: Handler panics.
func (g *Gate) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("bulkheadtest: Gate.Handler called with a nil http.Handler")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := g.Wait(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// arm starts a session; it fails if another run is using the gate.
func (g *Gate) arm(wake chan<- struct{}) (*session, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur != nil {
		return nil, false
	}
	g.cur = &session{open: make(chan struct{}), wake: wake}
	return g.cur, true
}

// inside reports how many calls of s are waiting at the gate.
func (g *Gate) inside(s *session) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return s.inside
}

// open lets the calls of s through. It is safe to call more than once.
func (g *Gate) open(s *session) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-s.open:
	default:
		close(s.open)
	}
}

// end opens s if it is still closed, detaches it from the gate and returns
// its peak.
func (g *Gate) end(s *session) (peak int) {
	g.open(s)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur == s {
		g.cur = nil
	}
	return s.peak
}

// notify wakes the run without blocking; one pending wake-up is enough,
// because the run re-reads every count after it wakes.
func notify(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}
