package sim

import (
	"cmp"
	"fmt"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/adaptive"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// bulkheadLimiter is a semaphore bulkhead, with an adaptive controller fed
// the events the bulkhead would publish, stamped with the virtual time.
type bulkheadLimiter struct {
	b *semaphore.Bulkhead
	c *adaptive.Controller
}

// Static returns a fixed limit of n: a semaphore bulkhead that fails fast.
func Static(n int) Limiter {
	b, err := semaphore.New("static", semaphore.Config{MaxConcurrentCalls: n})
	if err != nil {
		panic(err)
	}
	return &bulkheadLimiter{b: b}
}

// Adaptive returns a semaphore bulkhead whose limit, initially initial, an
// adaptive controller with cfg moves.
func Adaptive(cfg adaptive.Config, initial int) (Limiter, error) {
	b, err := semaphore.New("adaptive", semaphore.Config{MaxConcurrentCalls: initial})
	if err != nil {
		return nil, err
	}
	c, err := adaptive.New(cfg, initial, func(n int) error {
		return b.Reconfigure(semaphore.Config{MaxConcurrentCalls: n})
	})
	if err != nil {
		return nil, err
	}
	return &bulkheadLimiter{b: b, c: c}, nil
}

func (l *bulkheadLimiter) Acquire(now time.Time) func(time.Time, time.Duration, error) {
	ok := l.b.TryAcquire()
	if l.c != nil {
		t := bulkhead.EventRejected
		if ok {
			t = bulkhead.EventPermitted
		}
		l.c.Observe(bulkhead.Event{Type: t, Time: now})
	}
	if !ok {
		return nil
	}
	return l.release
}

func (l *bulkheadLimiter) release(now time.Time, run time.Duration, err error) {
	l.b.Release()
	if l.c != nil {
		l.c.Observe(bulkhead.Event{Type: bulkhead.EventFinished, Time: now, Run: run, Err: err})
	}
}

func (l *bulkheadLimiter) Limit() int { return l.b.Config().MaxConcurrentCalls }

// Statics returns the fixed limits compared in s: too low, right for full
// capacity, too high.
func Statics(s Scenario) []int { return []int{s.Slots / 4, s.Slots, 4 * s.Slots} }

// Algorithms are the adaptive algorithms compared; the first is the default.
var Algorithms = []string{"vegas", "gradient2", "aimd"}

// RunAll runs s with each of Statics, named "static N", then with a
// controller of each of Algorithms (s.Adaptive otherwise, starting at
// s.Initial), named by the algorithm.
func RunAll(s Scenario) ([]Result, error) {
	var results []Result
	for _, n := range Statics(s) {
		results = append(results, Run(s, fmt.Sprintf("static %d", n), Static(n), nil))
	}
	for _, a := range Algorithms {
		cfg := s.Adaptive
		cfg.Algorithm = a
		lim, err := Adaptive(cfg, cmp.Or(s.Initial, 20))
		if err != nil {
			return nil, err
		}
		results = append(results, Run(s, a, lim, nil))
	}
	return results, nil
}
