package adaptive

import (
	"math"
	"time"
)

// Algorithm decides the next limit from one window of observations. The
// controller calls Update from one goroutine at a time, once per window, and
// brings the result within MinLimit and MaxLimit; the limit is a float so that
// an algorithm can move by less than one call per window.
type Algorithm interface {
	Update(limit float64, w Window) Decision
}

// Window is what a controller saw during one window: the calls that finished
// in it and the pressure on the limit.
type Window struct {
	// End is the time of the event that closed the window, and Duration how
	// long the window lasted.
	End      time.Time
	Duration time.Duration
	// Limit is the limit in force at the end of the window.
	Limit int
	// Successes counts the calls that finished without error; MeanRun is
	// their mean run time (0 when there were none).
	Successes int
	MeanRun   time.Duration
	// Drops counts the calls that failed with an error matching
	// bulkhead.ErrOverloaded: the dependency pushed back. Timeouts counts
	// those that failed with context.DeadlineExceeded: the dependency was
	// too slow for the caller. Other failures are not counted anywhere:
	// they say nothing about capacity.
	Drops    int
	Timeouts int
	// Rejected counts the calls the bulkhead refused for lack of a permit.
	Rejected int
	// MaxInFlight is the most calls seen running at once.
	MaxInFlight int
}

// Overloaded reports whether w shows the dependency overloaded: a drop, or
// more than 1% of the calls timed out (one slow call in a hundred is the
// tail of a healthy dependency, not a sign of overload).
func (w Window) Overloaded() bool { return w.Drops > 0 || 100*w.Timeouts > w.Successes+w.Timeouts }

// Limited reports whether the limit, not the offered load, bounded the calls
// in w: without that, a good latency says nothing about a higher limit.
func (w Window) Limited() bool { return w.Rejected > 0 || 2*w.MaxInFlight >= w.Limit }

// Decision is an algorithm's answer for one window.
type Decision struct {
	// Limit is the new limit, before the controller bounds it.
	Limit float64
	// Reason says in a few words why, for the controller's State.
	Reason string
	// NoLoad is the algorithm's estimate of the dependency's latency without
	// queueing, or 0 if it keeps none.
	NoLoad time.Duration
}

// log10 is log10(x), at least 1: the step of the Vegas family of rules.
func log10(x float64) float64 { return max(1, math.Log10(max(x, 1))) }

// vegas is the Vegas algorithm; see [Vegas].
type vegas struct {
	p        Vegas
	noLoad   time.Duration // 0 until probed
	noLoadAt time.Time     // when noLoad was last measured
	probe    int           // 0, or the probe's step: probeDrain, probeMeasure
	before   time.Duration // the latency before the probe's last step
	resume   float64       // the limit before the probe; 0 once a step found a queue
	queueing int           // consecutive windows that shrank the limit for queueing
}

const (
	probeDrain = iota + 1
	probeMeasure
)

// probeStep is the factor by which a probe lowers the limit at each step.
const probeStep = 0.85

func (v *vegas) Update(limit float64, w Window) Decision {
	if w.Overloaded() {
		v.probe, v.resume = 0, 0
		return Decision{limit * v.p.Backoff, "drops", v.noLoad}
	}
	if w.Successes == 0 {
		return Decision{limit, "no samples", v.noLoad}
	}
	rtt := w.MeanRun
	switch v.probe {
	case probeDrain:
		// The window's calls began under the old limit; the next one's
		// did not. This one tells the latency before the step as well as
		// the window before it (better, just after a start).
		v.probe, v.before = probeMeasure, max(v.before, rtt)
		return Decision{limit, "probing no-load latency", v.noLoad}
	case probeMeasure:
		if float64(rtt) < 0.93*float64(v.before) && limit > 1 {
			// Latency fell with the limit: there was a queue, and may
			// still be one. Lower the limit again.
			v.before, v.probe, v.resume = rtt, probeDrain, 0
			return Decision{limit * probeStep, "probing no-load latency", v.noLoad}
		}
		v.probe, v.queueing = 0, 0
		v.noLoad, v.noLoadAt = rtt, w.End
		// If the first step found no queue, the limit was right: go back
		// to it. Otherwise grow from here.
		return Decision{max(limit, v.resume), "no-load latency probed", v.noLoad}
	}
	stale := v.noLoad == 0 || w.End.Sub(v.noLoadAt) > v.p.NoLoadWindow
	if !w.Limited() {
		// The limit is not what holds the calls back, so it adds no queue
		// at the dependency: the latency is as good a no-load estimate as
		// a probe would give.
		if stale || rtt < v.noLoad {
			v.noLoad, v.noLoadAt = rtt, w.End
		}
		v.queueing = 0
		return Decision{limit, "limit not reached", v.noLoad}
	}
	// The no-load latency can only be seen with no queue at the
	// dependency: probe it by lowering the limit by 15%, for two
	// windows, until latency stops falling. Do so at first, when the
	// estimate is older than NoLoadWindow (the dependency may have become
	// slower for good), and when five windows in a row found a queue (the
	// estimate may be wrong).
	if stale || v.queueing >= 5 {
		v.before, v.probe, v.resume = rtt, probeDrain, limit
		return Decision{min(limit, float64(max(1, w.MaxInFlight))) * probeStep, "probing no-load latency", v.noLoad}
	}
	if rtt < v.noLoad {
		v.noLoad, v.noLoadAt = rtt, w.End
	}
	alpha, beta := v.p.Alpha, v.p.Beta
	if alpha == 0 {
		alpha = 3 * log10(limit)
	}
	if beta == 0 {
		beta = max(alpha+2, 6*log10(limit))
	}
	// Calls queued at the dependency: limit − throughput × noLoad.
	queue := limit * (1 - float64(v.noLoad)/float64(rtt))
	if queue > beta {
		// Shed half the excess at once, so that a dependency that lost
		// half its capacity is matched in a few windows.
		v.queueing++
		return Decision{limit - max(log10(limit), (queue-alpha)/2), "queueing", v.noLoad}
	}
	v.queueing = 0
	switch {
	case queue <= alpha/2:
		return Decision{limit + beta, "no queue", v.noLoad}
	case queue < alpha:
		return Decision{limit + log10(limit), "short queue", v.noLoad}
	}
	return Decision{limit, "queue in range", v.noLoad}
}

// gradient2 is the Gradient2 algorithm; see [Gradient2].
type gradient2 struct {
	p     Gradient2
	long  float64 // the long-term mean latency, ns
	count int     // windows seen, for the warm-up average
}

func (g *gradient2) Update(limit float64, w Window) Decision {
	if w.Successes > 0 {
		short := float64(w.MeanRun)
		const warmup = 10
		g.count++
		if g.count <= warmup {
			g.long += (short - g.long) / float64(g.count)
		} else {
			g.long += (short - g.long) * 2 / float64(g.p.LongWindow+1)
		}
		// After a long overload the average lags far above the present:
		// pull it down faster than the smoothing would.
		if g.long > 2*short {
			g.long *= 0.9
		}
	}
	noLoad := time.Duration(g.long)
	if w.Overloaded() {
		return Decision{limit * g.p.Backoff, "drops", noLoad}
	}
	if w.Successes == 0 {
		return Decision{limit, "no samples", noLoad}
	}
	if !w.Limited() {
		return Decision{limit, "limit not reached", noLoad}
	}
	gradient := max(0.5, min(1, g.p.Tolerance*g.long/float64(w.MeanRun)))
	next := limit * gradient
	reason := "latency rising"
	if gradient == 1 {
		// Grow only while latency holds. Netflix's Gradient2 adds the
		// headroom always, so under a steady moderate overload the limit
		// climbs for ever (concurrency-limits PR #134).
		headroom := g.p.Headroom
		if headroom == 0 {
			headroom = max(1, math.Sqrt(limit))
		}
		next += headroom
		reason = "latency steady"
	}
	return Decision{limit*(1-g.p.Smoothing) + next*g.p.Smoothing, reason, noLoad}
}

// aimd is additive increase, multiplicative decrease; see [AIMD].
type aimd struct{ p AIMD }

func (a *aimd) Update(limit float64, w Window) Decision {
	switch {
	case w.Overloaded():
		return Decision{Limit: limit * a.p.Backoff, Reason: "drops"}
	case a.p.SlowCall > 0 && w.MeanRun > a.p.SlowCall:
		return Decision{Limit: limit * a.p.Backoff, Reason: "slow calls"}
	case w.Successes == 0:
		return Decision{Limit: limit, Reason: "no samples"}
	case !w.Limited():
		return Decision{Limit: limit, Reason: "limit not reached"}
	}
	return Decision{Limit: limit + a.p.Increase, Reason: "no drops"}
}
