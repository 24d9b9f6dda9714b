package bulkhead

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Priority is a call's criticality, after the four levels of the Google SRE
// book ("Handling Overload"). The zero value is Critical: a call that says
// nothing is production traffic. A bulkhead configured with [Priorities]
// reserves capacity for higher priorities and serves waiters highest first;
// any other bulkhead ignores priorities.
type Priority int8

const (
	// Sheddable is best-effort traffic that may be refused often.
	Sheddable Priority = -2
	// SheddablePlus is batch traffic that tolerates refusals and retries
	// later.
	SheddablePlus Priority = -1
	// Critical is production traffic, and the priority of a call that has
	// none.
	Critical Priority = 0
	// CriticalPlus is the traffic refused only when nothing else is left.
	CriticalPlus Priority = 1
)

var priorityNames = [...]string{"sheddable", "sheddablePlus", "critical", "criticalPlus"}

// String returns the priority's metric label and YAML name: "sheddable",
// "sheddablePlus", "critical", "criticalPlus", or "Priority(n)".
func (p Priority) String() string {
	if p >= Sheddable && p <= CriticalPlus {
		return priorityNames[p-Sheddable]
	}
	return "Priority(" + strconv.Itoa(int(p)) + ")"
}

// MarshalText returns the priority's name, as String does.
func (p Priority) MarshalText() ([]byte, error) {
	if p < Sheddable || p > CriticalPlus {
		return nil, fmt.Errorf("bulkhead: no such priority %d", p)
	}
	return []byte(p.String()), nil
}

// UnmarshalText sets p from a name String returns, in any case, so that an
// HTTP header, gRPC metadata or a YAML value can carry it; the SRE book's
// spellings ("CRITICAL_PLUS", "sheddable_plus") are accepted too.
func (p *Priority) UnmarshalText(text []byte) error {
	s := strings.ReplaceAll(string(text), "_", "")
	for i, name := range priorityNames {
		if strings.EqualFold(s, name) {
			*p = Sheddable + Priority(i)
			return nil
		}
	}
	return fmt.Errorf("bulkhead: priority must be sheddable, sheddablePlus, critical or criticalPlus, got %q", text)
}

type priorityKey struct{}

// WithPriority returns a copy of ctx that carries priority p. Bulkheads read
// it from the context their calls are made with, and bulkheadgrpc's client
// interceptors can propagate it downstream.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityFrom returns the priority ctx carries, or Critical if it carries
// none.
func PriorityFrom(ctx context.Context) Priority {
	p, _ := ctx.Value(priorityKey{}).(Priority)
	return p
}

// Priorities configures a bulkhead's priorities: how much of its limit each
// class of call may fill, and how waiting calls are served. A class may be
// admitted only while fewer permits (for a pool, workers and queue slots)
// are taken than its ceiling, ceil(share × limit) and at least 1; the
// capacity above that is reserved for higher classes, so with non-decreasing
// shares a class is refused only when every lower one is. Waiting calls are
// served highest class first, first in, first out within a class.
// CriticalPlus may always fill the whole limit. A zero share means the
// default; the zero Priorities is Sheddable 0.5, SheddablePlus 0.8 and
// Critical 1, so traffic without a priority (Critical) keeps the whole
// limit and turning priorities on costs it nothing.
type Priorities struct {
	// Sheddable, SheddablePlus and Critical are the shares of the limit,
	// in (0, 1], that calls of those classes may fill; 0 means 0.5, 0.8
	// and 1. They must not decrease with the class: reserve headroom for
	// CriticalPlus with a Critical share below 1.
	Sheddable     float64 `yaml:"sheddable" json:"sheddable"`
	SheddablePlus float64 `yaml:"sheddablePlus" json:"sheddablePlus"`
	Critical      float64 `yaml:"critical" json:"critical"`
	// Aging, if positive, raises a waiting call's class by one for every
	// Aging it has waited, so that a lower class is served after at most
	// three Agings even under a steady stream of CriticalPlus calls. 0
	// means strict priority: a lower class may wait for ever, by choice.
	Aging time.Duration `yaml:"aging" json:"aging"`
}

// The default shares of a zero Priorities.
const (
	defaultSheddable     = 0.5
	defaultSheddablePlus = 0.8
)

// shares returns the four classes' shares, Sheddable first, defaults filled
// in.
func (c *Priorities) shares() [4]float64 {
	s := [4]float64{c.Sheddable, c.SheddablePlus, c.Critical, 1}
	for i, d := range [3]float64{defaultSheddable, defaultSheddablePlus, 1} {
		if s[i] == 0 {
			s[i] = d
		}
	}
	return s
}

// Validate reports the first invalid field of c, naming it and its value: a
// share outside (0, 1], shares that decrease with the class, a negative
// Aging.
func (c *Priorities) Validate() error {
	given := [3]float64{c.Sheddable, c.SheddablePlus, c.Critical}
	for i, v := range given {
		if v != 0 && !(v > 0 && v <= 1) { // NaN fails both
			return fmt.Errorf("priorities: %s must be in (0, 1] (or 0 for the default), got %v", priorityNames[i], v)
		}
	}
	s := c.shares()
	for i := range 2 {
		if s[i] > s[i+1] {
			return fmt.Errorf("priorities: %s (%v) must not exceed %s (%v%s)",
				priorityNames[i], s[i], priorityNames[i+1], s[i+1], defaultNote(given[i+1]))
		}
	}
	if c.Aging < 0 {
		return fmt.Errorf("priorities: aging must be >= 0, got %v", c.Aging)
	}
	return nil
}

func defaultNote(given float64) string {
	if given == 0 {
		return ", the default"
	}
	return ""
}

// Ceiling returns how many of limit's permits calls of class p may hold:
// ceil(share × limit), at least 1 and at most limit (limit itself for
// CriticalPlus and for a p outside the four classes above it; Sheddable's
// for one below). c must be valid.
func (c *Priorities) Ceiling(p Priority, limit int) int {
	if p >= CriticalPlus || limit <= 0 {
		return max(limit, 0)
	}
	i := max(int(p-Sheddable), 0)
	// The epsilon keeps a product such as 0.7 × 10 = 7.000000000000001
	// from rounding up to 8.
	n := int(math.Ceil(c.shares()[i]*float64(limit) - 1e-9))
	return min(max(n, 1), limit)
}

// ShadowStats counts what a shadow limit (a tighter limit evaluated on live
// traffic and never enforced) would have done, or, for a bulkhead that only
// observes, what its own limit would have done. A semaphore simulates its
// shadow exactly for calls that hold a permit for their duration (Do,
// Execute, a Permit); bare Acquire and TryAcquire calls carry no shadow
// permit and are judged by calls in flight, which over-counts. A pool's
// shadow is a smaller pool whose figures are an estimate (see the pool
// package's Shadow).
type ShadowStats struct {
	// Limit is the shadow's limit of concurrent calls (a pool's: MaxWorkers).
	Limit int `json:"limit"`
	// InUse is the number of shadow permits held now: the calls that the
	// shadow would have let run and that are still running.
	InUse int `json:"inUse"`
	// QueueDepth is the number of shadow queue slots held now (pool): the
	// tasks the shadow would have kept queued; 0 for a semaphore.
	QueueDepth int `json:"queueDepth,omitempty"`
	// QueueCapacity is the shadow's queue capacity (pool); 0 for a
	// semaphore.
	QueueCapacity int `json:"queueCapacity,omitempty"`
	// WouldReject counts the calls that found the shadow full and could not
	// have waited for it (its MaxWaitDuration is 0).
	WouldReject uint64 `json:"wouldReject"`
	// WouldWait counts the calls that found the shadow full and would have
	// had to wait for it; how long is not simulated.
	WouldWait uint64 `json:"wouldWait"`
	// WouldTimeOut counts the calls that waited for their permit longer
	// than the shadow's MaxWaitDuration (a pool's: QueueTimeout).
	WouldTimeOut uint64 `json:"wouldTimeOut"`
	// Observe is true when the bulkhead enforces nothing and its own limit
	// is the shadow.
	Observe bool `json:"observe,omitempty"`
}
