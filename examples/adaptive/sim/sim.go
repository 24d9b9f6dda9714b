// Package sim simulates a client calling a dependency through a concurrency
// limit, on a virtual clock: the dependency has a number of service slots and
// a bounded queue in front of them, so its latency grows with queueing, and
// its capacity changes from phase to phase. The simulation is a
// discrete-event loop on one goroutine: the same Scenario and Limiter give
// the same Result every time.
package sim

import (
	"container/heap"
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/adaptive"
)

// Scenario describes the dependency, the load and the phases.
type Scenario struct {
	// Slots is how many calls the dependency serves at once at full
	// capacity; each takes a log-normal service time with mean Service and
	// shape Spread.
	Slots   int
	Service time.Duration
	Spread  float64
	// Queue is how many calls wait at the dependency for a slot; a call
	// that finds it full is answered at once with bulkhead.ErrOverloaded
	// (a 503). A queued call whose client gave up is still served: the
	// dependency does not know.
	Queue int
	// Timeout is the client's deadline: a call not answered within it ends
	// with context.DeadlineExceeded.
	Timeout time.Duration
	// Rate is the offered load in calls per second (Poisson arrivals).
	Rate float64
	// Phases run one after the other.
	Phases []Phase
	// Sample is how often the limit is recorded for the chart.
	Sample time.Duration
	// Seed makes the random arrivals and service times repeatable.
	Seed uint64
	// Initial is the limit every adaptive controller starts at; 0 means
	// 20. Adaptive is their configuration, whose Algorithm RunAll sets
	// (the zero Config is adaptive.DefaultConfig).
	Initial  int
	Adaptive adaptive.Config
}

// Phase is a stretch of time with a given share of the dependency's slots.
type Phase struct {
	Name     string
	Duration time.Duration
	Capacity float64 // the share of Slots in service, 0 to 1
}

// Default returns the scenario of `go run ./examples/adaptive`: 40 slots of
// 20ms (2000 calls/s), a queue of 200, a 100ms client deadline, 2400 calls/s
// offered, and three 20s phases: steady, half the slots, recovered.
func Default() Scenario {
	return Scenario{
		Slots: 40, Service: 20 * time.Millisecond, Spread: 0.5, Queue: 200,
		Timeout: 100 * time.Millisecond, Rate: 2400,
		Phases: []Phase{
			{"steady", 20 * time.Second, 1},
			{"halved", 20 * time.Second, 0.5},
			{"recovered", 20 * time.Second, 1},
		},
		Sample: 250 * time.Millisecond, Seed: 1,
	}
}

// Limiter is the client's concurrency limit under test. Its methods are
// called with the virtual time.
type Limiter interface {
	// Acquire admits a call and returns the function that ends it, or
	// returns nil: a rejection. The call ran for run and ended with err:
	// nil, bulkhead.ErrOverloaded or context.DeadlineExceeded.
	Acquire(now time.Time) (release func(now time.Time, run time.Duration, err error))
	// Limit is the limit in force, for the chart.
	Limit() int
}

// Result is one limiter's run.
type Result struct {
	Name   string
	Phases []PhaseResult
	// Limits holds the limit every Scenario.Sample.
	Limits []int
}

// PhaseResult is what happened to the calls that arrived in one phase.
type PhaseResult struct {
	Name string
	// Goodput is successful calls per second.
	Goodput float64
	// P50 and P99 are percentiles of the successful calls' latency.
	P50, P99 time.Duration
	// Rejected counts calls the limiter refused, Overloaded the 503s and
	// TimedOut the calls past the deadline.
	Rejected, Overloaded, TimedOut int
	// Settled is the median limit over the phase's second half, and
	// Converged how long after the phase began the limit, averaged over a
	// second, came within 20% (at least 2) of it and stayed there for 5s
	// (or to the phase's end); the phase's duration if it never did.
	Settled   int
	Converged time.Duration
}

type kind uint8

const (
	arrival kind = iota
	served
	deadline
	nextPhase
	sample
)

type event struct {
	at   time.Duration
	seq  uint64
	kind kind
	call *call
}

type events []event

func (h events) Len() int { return len(h) }
func (h events) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}
func (h events) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *events) Push(x any)   { *h = append(*h, x.(event)) }
func (h *events) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type call struct {
	arrived time.Duration
	phase   int
	done    bool // the client has its answer or gave up
	release func(time.Time, time.Duration, error)
}

type run struct {
	s       Scenario
	lim     Limiter
	base    time.Time
	now     time.Duration
	advance func(time.Duration)
	rng     *rand.Rand
	q       events
	seq     uint64

	slots   int // in service now allowed
	busy    int
	waiting []*call // the dependency's queue, FIFO

	phases []PhaseResult
	lat    [][]time.Duration
	limits []int
}

// Run runs s with lim and returns what happened. If advance is not nil, Run
// calls it each time the virtual clock moves, with the step: inside a
// testing/synctest bubble, time.Sleep makes the bubble's clock (and so
// time.Now in a limiter that reads it) follow the virtual one.
func Run(s Scenario, name string, lim Limiter, advance func(time.Duration)) Result {
	r := &run{s: s, lim: lim, advance: advance, rng: rand.New(rand.NewPCG(s.Seed, 0x5eed))}
	r.base = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if advance != nil {
		r.base = time.Now()
	}
	r.phases = make([]PhaseResult, len(s.Phases))
	r.lat = make([][]time.Duration, len(s.Phases))
	var total time.Duration
	for i, p := range s.Phases {
		r.phases[i].Name = p.Name
		r.push(total, nextPhase, &call{phase: i})
		total += p.Duration
	}
	r.push(0, sample, nil)
	r.push(r.interarrival(), arrival, nil)
	for r.q.Len() > 0 {
		e := heap.Pop(&r.q).(event)
		if e.at >= total {
			break
		}
		if e.at > r.now {
			if r.advance != nil {
				r.advance(e.at - r.now)
			}
			r.now = e.at
		}
		switch e.kind {
		case nextPhase:
			r.slots = max(1, int(math.Round(float64(s.Slots)*s.Phases[e.call.phase].Capacity)))
			r.startWaiting()
		case sample:
			r.limits = append(r.limits, lim.Limit())
			r.push(r.now+s.Sample, sample, nil)
		case arrival:
			r.arrive()
			r.push(r.now+r.interarrival(), arrival, nil)
		case served:
			r.busy--
			r.answer(e.call, nil)
			r.startWaiting()
		case deadline:
			r.answer(e.call, context.DeadlineExceeded)
		}
	}
	res := Result{Name: name, Phases: r.phases, Limits: r.limits}
	var start time.Duration
	for i, p := range s.Phases {
		ph := &res.Phases[i]
		secs := p.Duration.Seconds()
		ph.Goodput = float64(len(r.lat[i])) / secs
		slices.Sort(r.lat[i])
		ph.P50, ph.P99 = quantile(r.lat[i], 0.5), quantile(r.lat[i], 0.99)
		ph.Settled, ph.Converged = settle(r.limits, s.Sample, start, start+p.Duration)
		start += p.Duration
	}
	return res
}

func (r *run) push(at time.Duration, k kind, c *call) {
	r.seq++
	heap.Push(&r.q, event{at: at, seq: r.seq, kind: k, call: c})
}

func (r *run) t() time.Time { return r.base.Add(r.now) }

func (r *run) interarrival() time.Duration {
	return time.Duration(r.rng.ExpFloat64() / r.s.Rate * float64(time.Second))
}

func (r *run) serviceTime() time.Duration {
	sigma := r.s.Spread
	median := float64(r.s.Service) / math.Exp(sigma*sigma/2)
	return time.Duration(median * math.Exp(sigma*r.rng.NormFloat64()))
}

func (r *run) phaseAt(t time.Duration) int {
	var end time.Duration
	for i, p := range r.s.Phases {
		end += p.Duration
		if t < end {
			return i
		}
	}
	return len(r.s.Phases) - 1
}

func (r *run) arrive() {
	c := &call{arrived: r.now, phase: r.phaseAt(r.now)}
	if c.release = r.lim.Acquire(r.t()); c.release == nil {
		r.phases[c.phase].Rejected++
		return
	}
	switch {
	case r.busy < r.slots:
		r.busy++
		r.push(r.now+r.serviceTime(), served, c)
	case len(r.waiting) < r.s.Queue:
		r.waiting = append(r.waiting, c)
	default:
		r.answer(c, bulkhead.ErrOverloaded)
		return
	}
	r.push(r.now+r.s.Timeout, deadline, c)
}

// startWaiting moves queued calls into free slots.
func (r *run) startWaiting() {
	for r.busy < r.slots && len(r.waiting) > 0 {
		c := r.waiting[0]
		r.waiting[0] = nil
		r.waiting = r.waiting[1:]
		r.busy++
		r.push(r.now+r.serviceTime(), served, c)
	}
}

// answer ends c for its client, unless the client has already given up.
func (r *run) answer(c *call, err error) {
	if c.done {
		return
	}
	c.done = true
	lat := r.now - c.arrived
	ph := &r.phases[c.phase]
	switch err {
	case nil:
		r.lat[c.phase] = append(r.lat[c.phase], lat)
	case bulkhead.ErrOverloaded:
		ph.Overloaded++
	default:
		ph.TimedOut++
	}
	c.release(r.t(), lat, err)
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// settle returns the median limit of the second half of [from, to) and how
// long after from the limit's mean over the last second came within 20% (at
// least 2) of it and stayed there for 5s or to the end.
func settle(limits []int, every, from, to time.Duration) (int, time.Duration) {
	lo, hi := int(from/every), min(len(limits), int(to/every))
	if lo >= hi {
		return 0, 0
	}
	half := slices.Clone(limits[(lo+hi)/2 : hi])
	slices.Sort(half)
	m := half[len(half)/2]
	band := max(2, float64(m)*0.2)
	per := max(1, int(time.Second/every))
	mean := func(i int) float64 { // over the second that ends with sample i
		sum, n := 0, 0
		for j := max(lo, i-per+1); j <= i; j++ {
			sum += limits[j]
			n++
		}
		return float64(sum) / float64(n)
	}
	hold := int(5 * time.Second / every)
	run := 0 // samples in a row within the band
	for i := lo; i < hi; i++ {
		if math.Abs(mean(i)-float64(m)) > band {
			run = 0
			continue
		}
		run++
		if run == hold || i == hi-1 {
			return m, time.Duration(i-run+1-lo) * every
		}
	}
	return m, to - from
}

// Flags defines, on fs, flags that change s: -slots (the offered load
// follows), -seed, -initial, -vegas.alpha and -vegas.beta.
func (s *Scenario) Flags(fs *flag.FlagSet) {
	fs.Func("slots", "the dependency's slots at full capacity (the offered load scales with them)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("want a number of slots >= 1, got %q", v)
		}
		s.Rate *= float64(n) / float64(s.Slots)
		s.Slots = n
		return nil
	})
	fs.Uint64Var(&s.Seed, "seed", s.Seed, "seed of the random arrivals and service times")
	fs.IntVar(&s.Initial, "initial", s.Initial, "the limit every adaptive controller starts at (0: 20)")
	fs.Float64Var(&s.Adaptive.Vegas.Alpha, "vegas.alpha", s.Adaptive.Vegas.Alpha, "Vegas' alpha (0: 3·log10(limit))")
	fs.Float64Var(&s.Adaptive.Vegas.Beta, "vegas.beta", s.Adaptive.Vegas.Beta, "Vegas' beta (0: 6·log10(limit))")
}
