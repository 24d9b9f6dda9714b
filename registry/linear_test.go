package registry

import (
	"fmt"
	"strings"
	"testing"
)

// Inputs that made the loader quadratic (issue 11), or would make a careless
// one: each builds a file of about n bytes.
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
	// Many entries naming unknown configs: each error must not list the
	// known configs again.
	"many broken references": func(n int) string {
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
	},
	// Many keys in one mapping: each is checked against those before it
	// through a map, not pairwise.
	"many keys": func(n int) string {
		var b strings.Builder
		b.WriteString("bulkhead:\n  instances:\n")
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "    i%d: {}\n", i)
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

// TestLoadIsLinear: for each input that used to make the loader quadratic,
// loading eight times the input allocates at most about eight times as
// often (a quadratic loader allocates 64 times as often); and what aliases
// and merge keys would expand too far is refused with a clear error. The
// allocations are counted from outside, so the test is exact enough to run
// under -race too.
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
			as := testing.AllocsPerRun(2, func() { _, _ = Load(strings.NewReader(small)) })
			al := testing.AllocsPerRun(2, func() { _, _ = Load(strings.NewReader(large)) })
			t.Logf("%d bytes: %.0f allocations; %d bytes: %.0f (%.2fx)", len(small), as, len(large), al, al/as)
			if al > 10*as {
				t.Errorf("%d bytes take %.0f allocations, %d bytes %.0f: not linear", len(small), as, len(large), al)
			}
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
