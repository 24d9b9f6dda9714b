package bulkheadhttp

import (
	"net/http"

	"github.com/bulkhead-go/bulkhead"
)

// WithPriorityHeader makes a Handler (or KeyedHandler) take each request's
// priority from the header name, whose value is a priority's name
// ("criticalPlus", "critical", "sheddablePlus", "sheddable"; see
// [bulkhead.Priority.UnmarshalText]): the request waits for its permit with
// that priority, and next sees it in the request's context
// ([bulkhead.PriorityFrom]). A request without the header, or with a value
// that names no priority, keeps the priority its context already has
// (Critical if none). Without this option nothing is read from the wire.
//
// A client that may set the header may claim CriticalPlus for everything:
// strip or overwrite the header at the edge of your network (the proxy or
// gateway that faces clients), and set it only from what you trust. An
// empty name panics.
func WithPriorityHeader(name string) Option {
	if name == "" {
		panic("bulkheadhttp: WithPriorityHeader called with an empty header name")
	}
	name = http.CanonicalHeaderKey(name)
	return optionFunc(func(c *config) { c.priority = name; c.serverOption("WithPriorityHeader") })
}

// prioritize returns r with the priority its header names in its context,
// or r itself.
func (c *config) prioritize(r *http.Request) *http.Request {
	if c.priority == "" {
		return r
	}
	v := r.Header[c.priority]
	var p bulkhead.Priority
	if len(v) == 0 || p.UnmarshalText([]byte(v[0])) != nil {
		return r
	}
	return r.WithContext(bulkhead.WithPriority(r.Context(), p))
}
