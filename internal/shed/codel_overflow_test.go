package shed

import (
	"math"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// A CoDel interval near the largest Duration (which CoDel.Validate accepts)
// overflows now+interval: the interval's end lands in the past, so every
// grant starts a new interval and the verdict flips on one sample. In the
// first (never-ending) interval no verdict may be reached at all.
func TestCoDelLargestIntervalNeverEnds(t *testing.T) {
	c := &bulkhead.CoDel{Target: 5 * time.Millisecond, Interval: math.MaxInt64}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate refuses it (that would also be a fix): %v", err)
	}
	var l Line
	l.Set(bulkhead.AdaptiveLIFO, 0, c)
	now := int64(time.Second) // a second after the process's epoch
	l.Serve(now, 50*ms, 50*ms)
	l.Serve(now+ms, 50*ms, 50*ms)
	if l.Overloaded() {
		t.Fatalf("overloaded 1ms into an interval of %v: now+interval overflowed (next=%d)", time.Duration(c.Interval), l.next)
	}
}
