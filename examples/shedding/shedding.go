// Package shedding simulates a dependency that slows down tenfold for a
// while under a steady arrival rate, called through a semaphore bulkhead
// whose line of waiters is configured four ways (FIFO, bounded FIFO,
// adaptive LIFO, CoDel), and measures goodput (calls answered within their
// deadline) and the p99 latency of those answered, phase by phase.
//
// It drives the real semaphore.Bulkhead on the virtual clock of a
// testing/synctest bubble, which only a test can start, so the command that
// prints the figures of docs/shedding.md is a test:
//
//	go test ./examples/shedding -run TestFigures -v
package shedding

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// Scenario is the load and the dependency.
type Scenario struct {
	// Limit is the bulkhead's MaxConcurrentCalls: the dependency's
	// concurrency.
	Limit int
	// Gap is the mean time between two arrivals (a steady rate of 1/Gap);
	// each gap is drawn from Gap ±50% (uniform), so that no two events of
	// the run fall on the same instant and the run repeats exactly.
	Gap time.Duration
	// Deadline is every caller's context deadline.
	Deadline time.Duration
	// Phases run one after the other.
	Phases []Phase
	// Seed makes the service times repeatable.
	Seed uint64
}

// Phase is a stretch of time with a given service time; each call takes
// it ±20% (uniform).
type Phase struct {
	Name     string
	Duration time.Duration
	Service  time.Duration
}

// Default is the scenario of docs/shedding.md: 10 permits, an arrival every
// 2ms on average (500/s), a 100ms deadline; 5ms calls (capacity 2000/s) for 1s, 50ms
// calls (200/s: the dependency 10x slower, 2.5x overloaded) for 3s, then
// 5ms again for 2s.
func Default() Scenario {
	return Scenario{Limit: 10, Gap: 2 * time.Millisecond, Deadline: 100 * time.Millisecond, Seed: 1,
		Phases: []Phase{
			{"steady", time.Second, 5 * time.Millisecond},
			{"slow", 3 * time.Second, 50 * time.Millisecond},
			{"recovered", 2 * time.Second, 5 * time.Millisecond},
		}}
}

// Line is one configuration of the bulkhead's line under comparison.
type Line struct {
	Name   string
	Config semaphore.Config
}

// Lines returns the lines compared, for a scenario's limit: FIFO (waiting
// up to the caller's deadline), FIFO bounded to Limit waiters, adaptive LIFO
// (newest first above Limit waiters), CoDel (5ms/100ms, FIFO), and FIFO
// with a deadline slack of the slowest phase's service time.
func Lines(s Scenario) []Line {
	base := semaphore.Config{MaxConcurrentCalls: s.Limit, MaxWaitDuration: time.Second}
	bounded, lifo, codel, slack := base, base, base, base
	bounded.MaxWaitingCalls = s.Limit
	lifo.QueueOrder, lifo.LIFOThreshold = bulkhead.AdaptiveLIFO, s.Limit
	codel.CoDel = &bulkhead.CoDel{}
	for _, ph := range s.Phases {
		slack.MinDeadlineSlack = max(slack.MinDeadlineSlack, ph.Service)
	}
	return []Line{{"fifo", base}, {"bounded fifo", bounded}, {"adaptive lifo", lifo}, {"codel", codel},
		{"fifo, deadline slack", slack}}
}

// PhaseResult is what happened to the calls that arrived in one phase.
type PhaseResult struct {
	Name string
	// Goodput is the calls answered within their deadline, per second.
	Goodput float64
	// P50 and P99 are percentiles of their latency (arrival to answer).
	P50, P99 time.Duration
	// Answered, Refused (by the bulkhead, any reason) and Late (the
	// deadline came first, waiting or running) add up to the arrivals.
	Answered, Refused, Late int
}

// Result is one line's run.
type Result struct {
	Line   string
	Phases []PhaseResult
}

type outcome struct {
	phase   int
	latency time.Duration
	err     error
}

// Run runs s through a bulkhead with cfg. It must run inside a
// testing/synctest bubble: it sleeps through the whole scenario.
func Run(s Scenario, l Line) (Result, error) {
	b, err := semaphore.New("dependency", l.Config)
	if err != nil {
		return Result{}, err
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0))
	var outs []outcome
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p, ph := range s.Phases {
		for at := time.Duration(0); at < ph.Duration; {
			svc := time.Duration(float64(ph.Service) * (0.8 + 0.4*rng.Float64()))
			gap := time.Duration(float64(s.Gap) * (0.5 + rng.Float64()))
			at += gap
			wg.Go(func() {
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), s.Deadline)
				defer cancel()
				err := b.Do(ctx, func(ctx context.Context) error {
					t := time.NewTimer(svc)
					defer t.Stop()
					select {
					case <-t.C:
						return nil
					case <-ctx.Done():
						return ctx.Err() // the caller gave up: its answer is of no use
					}
				})
				mu.Lock()
				outs = append(outs, outcome{p, time.Since(start), err})
				mu.Unlock()
			})
			time.Sleep(gap)
		}
	}
	wg.Wait()
	r := Result{Line: l.Name}
	for p, ph := range s.Phases {
		pr := PhaseResult{Name: ph.Name}
		var lat []time.Duration
		for _, o := range outs {
			switch {
			case o.phase != p:
			case o.err == nil:
				pr.Answered++
				lat = append(lat, o.latency)
			case isFull(o.err):
				pr.Refused++
			default:
				pr.Late++
			}
		}
		pr.Goodput = float64(pr.Answered) / ph.Duration.Seconds()
		if len(lat) > 0 {
			slices.Sort(lat)
			pr.P50, pr.P99 = lat[(len(lat)+1)/2-1], lat[(len(lat)*99+99)/100-1]
		}
		r.Phases = append(r.Phases, pr)
	}
	return r, nil
}

func isFull(err error) bool {
	_, ok := err.(*bulkhead.FullError)
	return ok
}

// Print writes results as a table, one row per line and phase.
func Print(w io.Writer, s Scenario, results []Result) {
	fmt.Fprintf(w, "%d permits, an arrival every %v, a %v deadline; service times:", s.Limit, s.Gap, s.Deadline)
	for _, ph := range s.Phases {
		fmt.Fprintf(w, " %s %v for %v;", ph.Name, ph.Service, ph.Duration)
	}
	fmt.Fprintf(w, "\n\n| line | phase | goodput (calls/s) | p50 / p99 of answered | answered | refused | late |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		for _, p := range r.Phases {
			fmt.Fprintf(w, "| %s | %s | %.0f | %v / %v | %d | %d | %d |\n", r.Line, p.Name, p.Goodput,
				p.P50.Round(time.Millisecond), p.P99.Round(time.Millisecond), p.Answered, p.Refused, p.Late)
		}
	}
}
