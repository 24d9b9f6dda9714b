package config

import (
	"fmt"
	"strings"
	"testing"
)

// deepNestAt is a file nested d deep with keys below, about size bytes.
func deepNestAt(d, size int) string {
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

// A path shared with its children is grown once for all of them, not by
// each child when it is full (found by a re-review: at depths where it was
// full, 1024, 1638 ... 5324, every child copied the whole path again).
func TestDeepNestingAtTheArraysCapacityIsLinear(t *testing.T) {
	below, at := []byte(deepNestAt(5322, 128<<10)), []byte(deepNestAt(5323, 128<<10)) // path 5323 / 5324 long
	for _, src := range [][]byte{below, at} {
		if _, err := Load(src, "f.yml", nil); err != nil {
			t.Fatalf("Load: %v", err)
		}
	}
	bb := allocBytes(func() { _, _ = Load(below, "f.yml", nil) })
	ba := allocBytes(func() { _, _ = Load(at, "f.yml", nil) })
	t.Logf("depth 5322: %d MB; depth 5323: %d MB (%.1fx), %d-byte files", bb>>20, ba>>20, float64(ba)/float64(bb), len(at))
	if ba > 4*bb {
		t.Errorf("one more level of nesting allocates %.1fx the bytes: the path is copied for every leaf", float64(ba)/float64(bb))
	}
}
