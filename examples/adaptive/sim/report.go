package sim

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Print writes, for each phase, a table of the results, then the limit of
// each over time as a text chart, one character per second.
func Print(w io.Writer, s Scenario, results []Result) {
	for i, p := range s.Phases {
		fmt.Fprintf(w, "phase %q: %v, %d slots of %v, %.0f calls/s offered\n", p.Name, p.Duration,
			max(1, int(float64(s.Slots)*p.Capacity+0.5)), s.Service, s.Rate)
		fmt.Fprintf(w, "  %-16s %9s %8s %8s %9s %6s %9s %7s %9s\n",
			"limiter", "goodput/s", "p50", "p99", "rejected", "503s", "timeouts", "limit", "settled")
		for _, r := range results {
			ph := r.Phases[i]
			fmt.Fprintf(w, "  %-16s %9.0f %8v %8v %9d %6d %9d %7d %9v\n", r.Name, ph.Goodput,
				ph.P50.Round(100*time.Microsecond), ph.P99.Round(100*time.Microsecond),
				ph.Rejected, ph.Overloaded, ph.TimedOut, ph.Settled, ph.Converged)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "limit over time (one character a second, | between phases; scale 0 to the max shown):")
	for _, r := range results {
		fmt.Fprintf(w, "  %-16s %s\n", r.Name, Chart(s, r.Limits))
	}
}

// Chart draws limits as one block character a second, scaled to their
// maximum, with | between phases, and the maximum at the end.
func Chart(s Scenario, limits []int) string {
	const blocks = "▁▂▃▄▅▆▇█"
	levels := []rune(blocks)
	per := int(time.Second / s.Sample)
	peak := 1
	for _, l := range limits {
		peak = max(peak, l)
	}
	var b strings.Builder
	var at time.Duration
	var bound time.Duration
	next := 0
	for i := 0; i+per <= len(limits); i += per {
		if next < len(s.Phases) && at >= bound {
			if next > 0 {
				b.WriteByte('|')
			}
			bound += s.Phases[next].Duration
			next++
		}
		sum := 0
		for _, l := range limits[i : i+per] {
			sum += l
		}
		avg := float64(sum) / float64(per)
		b.WriteRune(levels[min(len(levels)-1, int(avg/float64(peak)*float64(len(levels)-1)+0.5))])
		at += time.Second
	}
	fmt.Fprintf(&b, " max %d", peak)
	return b.String()
}
