package bulkheadhttp

import (
	"context"
	"net/http"

	"github.com/bulkhead-go/bulkhead/semaphore"
)

// KeyedHandler is [Handler] with a limit per key: each request is served by
// next while holding the permit of its key in k (and of k's total), so that
// one tenant's burst cannot take the whole server. key names the request's
// key, such as the authenticated tenant or user; a request for which it
// returns false has no key and is served without a permit (put an outer
// [Handler] around KeyedHandler to bound those too). The options, the
// answer to a refused request and the classification of outcomes are
// Handler's.
//
// Take the key from something the client cannot choose freely: the
// identity an authentication middleware in front of KeyedHandler has
// verified, not a raw header, a query parameter or an unverified token. A
// client that picks its own key can spread its requests over as many keys
// as it likes (each with a fresh limit), up to k's MaxActiveKeys, which then
// refuses the other clients' new keys.
func KeyedHandler(k *semaphore.Keyed[string], key func(*http.Request) (string, bool), next http.Handler, opts ...Option) http.Handler {
	switch {
	case k == nil:
		panic("bulkheadhttp: KeyedHandler called with a nil *semaphore.Keyed")
	case key == nil:
		panic("bulkheadhttp: KeyedHandler called with a nil key function")
	case next == nil:
		panic("bulkheadhttp: KeyedHandler called with a nil http.Handler")
	}
	return &keyedHandler{k: k, key: key, next: next, config: newConfig(opts)}
}

type keyedHandler struct {
	k    *semaphore.Keyed[string]
	key  func(*http.Request) (string, bool)
	next http.Handler
	config
}

func (h *keyedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, ok := "", false
	if h.bypass == nil || !h.bypass(r) {
		key, ok = h.key(r)
	}
	if !ok {
		h.next.ServeHTTP(w, r)
		return
	}
	r = h.prioritize(r)
	ran := false
	err := h.k.Do(r.Context(), key, func(context.Context) error {
		ran = true
		rw := &responseWriter{ResponseWriter: w}
		h.next.ServeHTTP(rw, r)
		status := rw.status
		if status == 0 {
			status = http.StatusOK
		}
		return h.classify(status, nil)
	})
	if !ran {
		h.refuse(w, r, err)
	}
}
