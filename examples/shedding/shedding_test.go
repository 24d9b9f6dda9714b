package shedding_test

import (
	"os"
	"testing"
	"testing/synctest"

	"github.com/bulkhead-go/bulkhead/examples/shedding"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFigures prints the table of docs/shedding.md (with -v) and holds the
// claims the page makes about it.
func TestFigures(t *testing.T) {
	s := shedding.Default()
	res := map[string]shedding.Result{}
	var results []shedding.Result
	for _, l := range shedding.Lines(s) {
		synctest.Test(t, func(t *testing.T) {
			r, err := shedding.Run(s, l)
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, r)
			res[r.Line] = r
		})
	}
	if testing.Verbose() {
		shedding.Print(os.Stdout, s, results)
	}
	const steady, slow, recovered = 0, 1, 2
	capacity := float64(s.Limit) / s.Phases[slow].Service.Seconds() // 200 calls/s while slow
	fifo := res["fifo"]
	// Steady: every line answers every call; nothing is shed.
	for _, r := range results {
		if p := r.Phases[steady]; p.Refused != 0 || p.Late != 0 {
			t.Errorf("%s, steady: %d refused, %d late; want none", r.Line, p.Refused, p.Late)
		}
	}
	// Slow: plain FIFO's goodput collapses below 10% of what the dependency
	// can still serve; adaptive LIFO and CoDel keep 85% of it or more; the
	// bounded line and the deadline slack at least half.
	if g := fifo.Phases[slow].Goodput; g >= 0.1*capacity {
		t.Errorf("fifo, slow: goodput %.0f/s, the page says below 10%% of %.0f/s", g, capacity)
	}
	for name, share := range map[string]float64{"adaptive lifo": 0.85, "codel": 0.85, "bounded fifo": 0.5, "fifo, deadline slack": 0.5} {
		if g := res[name].Phases[slow].Goodput; g < share*capacity {
			t.Errorf("%s, slow: goodput %.0f/s, the page says at least %.0f%% of %.0f/s", name, g, 100*share, capacity)
		}
	}
	// Recovered: FIFO's backlog keeps its p99 high; every other line's p99
	// is below it, adaptive LIFO's and CoDel's below half of it.
	for _, r := range results[1:] {
		p, f := r.Phases[recovered].P99, fifo.Phases[recovered].P99
		if r.Line == "adaptive lifo" || r.Line == "codel" {
			f /= 2
		}
		if p >= f {
			t.Errorf("%s, recovered: p99 %v, the page says below %v", r.Line, p, f)
		}
	}
}
