package bulkheadgrpc

import (
	"math"
	"testing"
	"time"
)

// The pushback sent is d within ±20%, in whole milliseconds, and never a
// value that a client's conversion back to a time.Duration overflows, nor 0
// (retry at once) for a positive d.
func TestPushbackMillis(t *testing.T) {
	for _, c := range []struct {
		d        time.Duration
		min, max int64 // over r in [0, 1)
	}{
		{time.Nanosecond, 1, 1},
		{500 * time.Microsecond, 1, 1},
		{DefaultPushback, 160, 240},
		{time.Second, 800, 1200},
		{math.MaxInt64, 7378697629483, maxPushbackMs},
	} {
		for _, r := range []float64{0, 0.5, math.Nextafter(1, 0)} {
			ms := pushbackMillis(c.d, r)
			if ms < c.min || ms > c.max {
				t.Errorf("pushbackMillis(%v, %v) = %d, want within [%d, %d]", c.d, r, ms, c.min, c.max)
			}
			if back := time.Duration(ms) * time.Millisecond; back <= 0 {
				t.Errorf("pushbackMillis(%v, %v) = %d ms, which a client turns into %v", c.d, r, ms, back)
			}
		}
	}
}
