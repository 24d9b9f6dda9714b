// Package event delivers a bulkhead's (or a registry's) events to their
// subscribers.
package event

import (
	"sync"
	"sync/atomic"
)

// Hub is a set of subscribers. The zero value has none and is ready to use.
// Publishing reads one atomic pointer, so a hub with no subscriber costs a
// single load; subscribing and cancelling copy the list under a mutex.
type Hub[T any] struct {
	mu   sync.Mutex
	subs atomic.Pointer[[]*sub[T]]
}

type sub[T any] struct{ fn func(T) }

// Active reports whether anyone is subscribed. Callers check it before they
// build an event or read the clock.
func (h *Hub[T]) Active() bool { return h.subs.Load() != nil }

// Subscribe adds fn, which must not be nil, and returns a function that
// removes it. Calling cancel more than once is harmless.
func (h *Hub[T]) Subscribe(fn func(T)) (cancel func()) {
	s := &sub[T]{fn: fn}
	h.mu.Lock()
	var next []*sub[T]
	if cur := h.subs.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, s)
	h.subs.Store(&next)
	h.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { h.remove(s) }) }
}

func (h *Hub[T]) remove(s *sub[T]) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := h.subs.Load()
	if cur == nil {
		return
	}
	next := make([]*sub[T], 0, len(*cur))
	for _, x := range *cur {
		if x != s {
			next = append(next, x)
		}
	}
	if len(next) == 0 {
		h.subs.Store(nil)
		return
	}
	h.subs.Store(&next)
}

// Publish calls every subscriber with e on the calling goroutine, in the
// order they subscribed, with no lock held (the module's callback contract,
// see the root package's "Callbacks"). A subscriber's panic is not
// recovered: it goes on up the caller's goroutine, and the subscribers after
// it miss this event. Callers publish only once their own state is
// consistent.
func (h *Hub[T]) Publish(e T) {
	cur := h.subs.Load()
	if cur == nil {
		return
	}
	for _, s := range *cur {
		s.fn(e)
	}
}
