package config

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// placeholderChain is a file of about 20*n bytes: x0 is empty, each x_i is
// ${x_(i-1)}${x_(i-1)}, and one bulkhead value uses x_n.
func placeholderChain(n int) string {
	var b strings.Builder
	b.WriteString("x0: \"\"\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "x%d: ${x%d}${x%d}\n", i, i-1, i-1)
	}
	fmt.Fprintf(&b, "bulkhead.instances.a.maxConcurrentCalls: ${x%d}3\n", n)
	return b.String()
}

// TestPlaceholderChainIsLinear: the placeholder budget counts
// bytes produced, so placeholders that expand to nothing cost nothing and a
// doubling chain resolves each level twice: 2^n lookups for a file of 20n
// bytes (n=16, 315 bytes: 1.5s; n=40, 750 bytes: never returns). docs say
// the loader's work is linear in its input.
func TestPlaceholderChainIsLinear(t *testing.T) {
	small, large := placeholderChain(6), placeholderChain(12) // about 2x the bytes
	for _, src := range []string{small, large} {
		if c, err := Load([]byte(src), "f.yml", nil); err != nil || *c.Semaphores["a"].MaxConcurrentCalls != 3 {
			t.Fatalf("Load: %v", err)
		}
	}
	as := testing.AllocsPerRun(1, func() { _, _ = Load([]byte(small), "f.yml", nil) })
	al := testing.AllocsPerRun(1, func() { _, _ = Load([]byte(large), "f.yml", nil) })
	t.Logf("%d bytes: %.0f allocations; %d bytes: %.0f (%.1fx)", len(small), as, len(large), al, al/as)
	if al > 10*as {
		t.Errorf("twice the input allocates %.1fx as often: placeholder resolution is exponential", al/as)
	}
}

// deepNest is a file of about size bytes: one mapping nested size/20 deep
// (flow style, 5 bytes a level) holding as many leaves as the rest allows.
func deepNest(size int) string {
	d := size / 20
	var b strings.Builder
	b.WriteString("bulkhead.instances.a.maxConcurrentCalls: 3\nx: ")
	b.WriteString(strings.Repeat("{a: ", d))
	b.WriteString("{")
	for i := 0; b.Len() < size-d-2; i++ {
		fmt.Fprintf(&b, "k%d: 1,", i)
	}
	b.WriteString("}" + strings.Repeat("}", d) + "\n")
	return b.String()
}

func allocBytes(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// TestDeepNestingIsLinearInBytes: every leaf's flattened key is a fresh copy
// of the whole path (splitKey(..., path[:len:len])), and normSegs/joinSegs
// walk it again, so D levels over N leaves cost D*N: quadratic in bytes
// (not in allocation counts, which TestLoadIsLinear measures). A 400 KB
// file takes 34s and allocates 9.5 GB; 4 MiB are accepted.
func TestDeepNestingIsLinearInBytes(t *testing.T) {
	small, large := deepNest(4<<10), deepNest(32<<10)
	for _, src := range []string{small, large} {
		if _, err := Load([]byte(src), "f.yml", nil); err != nil {
			t.Fatalf("Load: %v", err)
		}
	}
	bs := allocBytes(func() { _, _ = Load([]byte(small), "f.yml", nil) })
	bl := allocBytes(func() { _, _ = Load([]byte(large), "f.yml", nil) })
	t.Logf("%d bytes: %d KB allocated; %d bytes: %d KB (%.1fx)", len(small), bs>>10, len(large), bl>>10, float64(bl)/float64(bs))
	if bl > 16*bs {
		t.Errorf("8x the input allocates %.1fx the bytes: not linear", float64(bl)/float64(bs))
	}
}
