package registry

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Inputs that made the loader quadratic (issue 11): each builds a file of
// about n bytes.
var adversarial = map[string]func(n int) string{
	// One anchor used by many instances: plain alias fan-out.
	"alias fan-out": func(n int) string {
		var b strings.Builder
		b.WriteString("x: &x {maxConcurrentCalls: 2, maxWaitDuration: 10ms, eventConsumerBufferSize: 5, writableStackTraceEnabled: true}\n")
		b.WriteString("bulkhead:\n  instances:\n")
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "    i%d: *x\n", i)
		}
		return b.String()
	},
	// One adaptive block, with a nested alias, used by many instances.
	"adaptive block fan-out": func(n int) string {
		var b strings.Builder
		b.WriteString("v: &v {alpha: 2.5, beta: 6, noLoadWindow: PT1S, backoff: 0.8}\n")
		b.WriteString("a: &a {algorithm: vegas, minLimit: 2, maxLimit: 50, window: 250, minSamples: 5, vegas: *v, aimd: {increase: 1.5}}\n")
		b.WriteString("bulkhead:\n  instances:\n")
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "    i%d: {adaptive: *a}\n", i)
		}
		return b.String()
	},
	// Mappings of instances merged into one another, nested: each level
	// doubles what the one below brings in.
	"nested merge fan-out": func(n int) string {
		var b strings.Builder
		b.WriteString("m0: &m0 {")
		for i := 0; i < 100; i++ {
			fmt.Fprintf(&b, "i%d: {}, ", i)
		}
		b.WriteString("}\n")
		for l := 1; l < 30; l++ {
			fmt.Fprintf(&b, "m%d: &m%d {<<: [*m%d, *m%d]}\n", l, l, l-1, l-1)
		}
		b.WriteString("bulkhead:\n  instances: *m29\n")
		b.WriteString(strings.Repeat("#", max(0, n-b.Len())) + "\n")
		return b.String()
	},
	// Merge keys over empty mappings, nested.
	"merge over empty mappings": func(n int) string {
		var b strings.Builder
		b.WriteString("e0: &e0 {}\n")
		level := 0
		for level < 20 {
			level++
			fmt.Fprintf(&b, "e%d: &e%d {<<: [", level, level)
			for i := 0; i < 50; i++ {
				fmt.Fprintf(&b, "*e%d, ", level-1)
			}
			b.WriteString("]}\n")
		}
		b.WriteString("bulkhead:\n  instances:\n")
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "    i%d: {<<: *e%d}\n", i, level)
		}
		return b.String()
	},
	// A long baseConfig chain, with instances at its end.
	"long baseConfig chain": func(n int) string {
		var b strings.Builder
		b.WriteString("bulkhead:\n  configs:\n")
		i := 0
		for ; b.Len() < n/2; i++ {
			fmt.Fprintf(&b, "    c%d: {baseConfig: c%d}\n", i, i+1)
		}
		fmt.Fprintf(&b, "    c%d: {maxConcurrentCalls: 3}\n  instances:\n", i)
		for j := 0; b.Len() < n; j++ {
			fmt.Fprintf(&b, "    i%d: {baseConfig: c0}\n", j)
		}
		return b.String()
	},
	// The same chain closed into a cycle.
	"cyclic baseConfig chain": func(n int) string {
		var b strings.Builder
		b.WriteString("bulkhead:\n  configs:\n")
		i := 0
		for ; b.Len() < n/2; i++ {
			fmt.Fprintf(&b, "    c%d: {baseConfig: c%d}\n", i, i+1)
		}
		fmt.Fprintf(&b, "    c%d: {baseConfig: c0}\n  instances:\n", i)
		for j := 0; b.Len() < n; j++ {
			fmt.Fprintf(&b, "    i%d: {baseConfig: c%d}\n", j, j%i)
		}
		return b.String()
	},
}

// fastest is the shortest of a few Loads of y: the least noisy measure on a
// shared machine.
func fastest(y string) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range 5 {
		start := time.Now()
		_, _ = Load(strings.NewReader(y))
		best = min(best, time.Since(start))
	}
	return best
}

// TestLoadIsLinear: loading eight times the input takes about eight times
// as long (the bound, 24 times, leaves room for a noisy machine; a quadratic
// loader takes 64 times), for each input that used to be quadratic; and what
// aliases and merge keys would expand too far is refused with a clear error.
func TestLoadIsLinear(t *testing.T) {
	const n = 16 << 10
	for name, gen := range adversarial {
		t.Run(name, func(t *testing.T) {
			small, large := gen(n), gen(8*n)
			_, err := Load(strings.NewReader(large))
			if strings.Contains(name, "merge") {
				if err == nil || !strings.Contains(err.Error(), "aliases and merge keys expand the file beyond what it may hold") {
					t.Fatalf("error %v, want the expansion bound", err)
				}
			}
			if raceEnabled {
				return
			}
			ts, tl := fastest(small), fastest(large)
			if tl > 24*ts+20*time.Millisecond {
				t.Errorf("%d bytes load in %v, %d bytes in %v: not linear", len(small), ts, len(large), tl)
			}
			t.Logf("%d bytes: %v; %d bytes: %v", len(small), ts, len(large), tl)
		})
	}
}

// TestLoadWithinBoundAccepted: a file that reuses anchors moderately (one
// config for every instance) is under the bound and loads.
func TestLoadWithinBoundAccepted(t *testing.T) {
	var b strings.Builder
	b.WriteString("x: &x {maxConcurrentCalls: 2, maxWaitDuration: 10ms, eventConsumerBufferSize: 5}\nbulkhead:\n  instances:\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "    i%d: *x\n", i)
	}
	c := mustLoad(t, b.String())
	if len(c.Semaphores) != 2000 || !ptrEq(c.Semaphores["i1999"].MaxConcurrentCalls, 2) {
		t.Fatalf("got %d instances", len(c.Semaphores))
	}
}

// TestLoadManyBrokenReferencesIsLinear: many entries naming unknown
// configs are reported (up to the cap) without listing the known configs
// again for each.
func TestLoadManyBrokenReferencesIsLinear(t *testing.T) {
	gen := func(n int) string {
		var b strings.Builder
		b.WriteString("bulkhead:\n  configs:\n")
		for i := 0; b.Len() < n/2; i++ {
			fmt.Fprintf(&b, "    c%d: {baseConfig: missing%d}\n", i, i)
		}
		b.WriteString("  instances:\n")
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "    i%d: {baseConfig: missing%d}\n", i, i)
		}
		return b.String()
	}
	if raceEnabled {
		t.Skip("timing under the race detector says nothing")
	}
	small, large := gen(16<<10), gen(128<<10)
	ts, tl := fastest(small), fastest(large)
	if tl > 24*ts+20*time.Millisecond {
		t.Errorf("%d bytes load in %v, %d bytes in %v: not linear", len(small), ts, len(large), tl)
	}
}
