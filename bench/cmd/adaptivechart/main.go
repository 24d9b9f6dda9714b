// Command adaptivechart runs the simulation of examples/adaptive with the
// static limits, each adaptive algorithm and, as the peer, failsafe-go's
// adaptive limiter, prints the tables of docs/adaptive.md and draws the
// limit of each over time into a PNG.
//
//	cd bench && go run ./cmd/adaptivechart -png ../docs/adaptive.png
//
// failsafe-go's limiter reads time.Now, so it runs inside a testing/synctest
// bubble whose clock follows the simulation's: testing.Main gives this
// command the *testing.T that synctest.Test needs.
package main

import (
	"flag"
	"fmt"
	"image/color"
	"io"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/examples/adaptive/sim"
)

func main() {
	png := flag.String("png", "", "write the chart of the limit over time to this PNG file")
	s := sim.Default()
	s.Flags(flag.CommandLine)
	flag.Parse()
	testing.Main(func(string, string) (bool, error) { return true, nil },
		[]testing.InternalTest{{Name: "adaptivechart", F: func(t *testing.T) {
			if err := run(t, os.Stdout, s, *png); err != nil {
				t.Fatal(err)
			}
		}}}, nil, nil)
}

// run simulates, prints and draws.
func run(t *testing.T, w io.Writer, s sim.Scenario, png string) error {
	results, err := sim.RunAll(s)
	if err != nil {
		return err
	}
	results = append(results, runFailsafe(t, s))
	fmt.Fprintf(w, "A dependency with %d slots of %v (log-normal), a queue of %d and a %v client deadline;\n",
		s.Slots, s.Service, s.Queue, s.Timeout)
	fmt.Fprintf(w, "static limits %v, each algorithm (vegas is the default) and failsafe-go %s's adaptive limiter.\n\n",
		sim.Statics(s), failsafeVersion)
	sim.Print(w, s, results)
	fmt.Fprintln(w)
	compare(w, s, results[len(sim.Statics(s))], results[len(results)-1])
	if png != "" {
		if err := chart(s, results, png); err != nil {
			return err
		}
		fmt.Fprintln(w, "wrote", png)
	}
	return nil
}

// failsafeVersion is the version in bench/go.mod.
const failsafeVersion = "v0.9.8"

// failsafeLimiter runs failsafe-go's adaptive limiter as its executor does:
// TryAcquirePermit (no queueing, like our fail-fast semaphore), Record when
// the call returns (a 503 too), Drop when the caller gave up (its context
// ended).
type failsafeLimiter struct {
	l adaptivelimiter.AdaptiveLimiter[any]
}

func (f failsafeLimiter) Acquire(time.Time) func(time.Time, time.Duration, error) {
	p, ok := f.l.TryAcquirePermit()
	if !ok {
		return nil
	}
	return func(_ time.Time, _ time.Duration, err error) {
		if err != nil && err != bulkhead.ErrOverloaded {
			p.Drop()
			return
		}
		p.Record()
	}
}

func (f failsafeLimiter) Limit() int { return f.l.Limit() }

// runFailsafe runs failsafe-go's limiter with its defaults (min 1, max 200,
// initial 20; ours also starts at 20) on s, in a synctest bubble.
func runFailsafe(t *testing.T, s sim.Scenario) sim.Result {
	var r sim.Result
	synctest.Test(t, func(*testing.T) {
		r = sim.Run(s, "failsafe-go", failsafeLimiter{adaptivelimiter.NewWithDefaults[any]()}, time.Sleep)
	})
	return r
}

// behind reports whether ours is behind the peer in a phase: goodput more
// than 1% lower or p99 more than 2% higher.
func behind(ours, peer sim.PhaseResult) bool {
	return ours.Goodput < 0.99*peer.Goodput || float64(ours.P99) > 1.02*float64(peer.P99)
}

// compare prints the default algorithm against the peer, phase by phase.
func compare(w io.Writer, s sim.Scenario, ours, peer sim.Result) {
	fmt.Fprintf(w, "%s against %s (level: goodput within 1%%, p99 within 2%%):\n", ours.Name, peer.Name)
	for i, p := range s.Phases {
		o, f := ours.Phases[i], peer.Phases[i]
		verdict := "level or ahead"
		if behind(o, f) {
			verdict = "behind"
		}
		fmt.Fprintf(w, "  %-10s goodput %+6.1f%%  p99 %+6.1f%%  %s\n", p.Name,
			100*(o.Goodput/f.Goodput-1), 100*(float64(o.P99)/float64(f.P99)-1), verdict)
	}
}

// chart plots the limit over time of every result but the too-low and
// too-high statics, with the dependency's slots, into a PNG.
func chart(s sim.Scenario, results []sim.Result, path string) error {
	p := plot.New()
	p.Title.Text = "Limit over time: the dependency loses half its slots at 20s and gets them back at 40s"
	p.X.Label.Text = "simulated time (s)"
	p.Y.Label.Text = "concurrency limit"
	p.Legend.Top = true

	slots := make(plotter.XYs, 0, 2*len(s.Phases))
	var at time.Duration
	for _, ph := range s.Phases {
		n := float64(s.Slots) * ph.Capacity
		slots = append(slots, plotter.XY{X: at.Seconds(), Y: n})
		at += ph.Duration
		slots = append(slots, plotter.XY{X: at.Seconds(), Y: n})
	}
	l, err := plotter.NewLine(slots)
	if err != nil {
		return err
	}
	l.Color, l.Dashes, l.Width = color.Gray{Y: 120}, []vg.Length{vg.Points(4), vg.Points(3)}, vg.Points(1.5)
	p.Add(l)
	p.Legend.Add("dependency's slots", l)

	palette := []color.Color{
		color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 255, G: 127, B: 14, A: 255},
		color.RGBA{R: 44, G: 160, B: 44, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255},
		color.RGBA{R: 148, G: 103, B: 189, A: 255},
	}
	i := 0
	for _, r := range results {
		if r.Name == fmt.Sprintf("static %d", sim.Statics(s)[0]) || r.Name == fmt.Sprintf("static %d", sim.Statics(s)[2]) {
			continue
		}
		xy := make(plotter.XYs, len(r.Limits))
		for j, v := range r.Limits {
			xy[j] = plotter.XY{X: (time.Duration(j) * s.Sample).Seconds(), Y: float64(v)}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color, l.Width = palette[i%len(palette)], vg.Points(1.2)
		if i == 0 {
			l.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		}
		l.StepStyle = plotter.PostStep
		p.Add(l)
		p.Legend.Add(r.Name, l)
		i++
	}
	p.Y.Min, p.Y.Max = 0, 1.25*p.Y.Max // room for the legend
	p.Add(plotter.NewGrid())
	return p.Save(10*vg.Inch, 4.5*vg.Inch, path)
}
