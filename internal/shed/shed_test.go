package shed

import (
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ms = int64(time.Millisecond)

// CoDel as folly's: the verdict comes at an interval's end from the
// shortest wait in it; while overloaded, waits above twice the target are
// shed; an empty line ends the overload at once.
func TestCoDel(t *testing.T) {
	var l Line
	l.Set(bulkhead.FIFO, 0, &bulkhead.CoDel{})
	if !l.Clocked() || l.Serve(0, 50*ms, 50*ms) {
		t.Fatal("the first wait seen is shed")
	}
	// The first interval (0 to 100ms): every wait 20ms, but no verdict yet.
	for now := 10 * ms; now < 100*ms; now += 10 * ms {
		if l.Serve(now, 20*ms, 20*ms) {
			t.Fatalf("shed at %dms, before any interval ended", now/ms)
		}
	}
	// Its end: even the shortest was above 5ms: overloaded; the first of
	// the new interval is spared, then waits above 10ms are shed.
	if l.Serve(100*ms, 20*ms, 20*ms) || !l.Overloaded() {
		t.Fatal("not overloaded after an interval of 20ms waits, or the interval's first shed")
	}
	if !l.Serve(110*ms, 11*ms, 11*ms) || l.Serve(120*ms, 10*ms, 10*ms) {
		t.Fatal("want waits above 10ms shed, and 10ms served")
	}
	// The oldest waiter's wait is what the interval keeps: serving the
	// newest (1ms) with an old head does not hide the standing line.
	l.Serve(130*ms, ms, 30*ms)
	l.Serve(200*ms, ms, 30*ms)
	if !l.Overloaded() {
		t.Fatal("a standing line hidden by LIFO service")
	}
	l.Empty()
	if l.Overloaded() || l.Serve(210*ms, 50*ms, 50*ms) {
		t.Fatal("still overloaded after the line emptied")
	}
	l.Serve(300*ms, 50*ms, 50*ms)
	if l.Overloaded() {
		t.Fatal("an interval in which the line emptied counts as overloaded")
	}
	// The same settings keep the state; new ones start afresh.
	l.Serve(400*ms, 50*ms, 50*ms)
	l.Set(bulkhead.AdaptiveLIFO, 0, &bulkhead.CoDel{Target: 5 * time.Millisecond})
	if !l.Overloaded() || !l.LIFO(1) {
		t.Fatal("Set with the same CoDel settings lost the state")
	}
	l.Set(bulkhead.AdaptiveLIFO, 0, &bulkhead.CoDel{Target: 6 * time.Millisecond})
	if l.Overloaded() || l.LIFO(1) {
		t.Fatal("Set with new CoDel settings kept the old state")
	}
}

func TestLIFO(t *testing.T) {
	for _, c := range []struct {
		order      bulkhead.QueueOrder
		threshold  int
		waiting    int
		overloaded bool
		want       bool
	}{
		{bulkhead.FIFO, 0, 100, true, false},
		{bulkhead.LIFO, 0, 1, false, true},
		{bulkhead.AdaptiveLIFO, 3, 3, false, false},
		{bulkhead.AdaptiveLIFO, 3, 4, false, true},
		{bulkhead.AdaptiveLIFO, 3, 1, true, true},
		{bulkhead.AdaptiveLIFO, 0, 100, false, false},
	} {
		if got := LIFO(c.order, c.threshold, c.waiting, c.overloaded); got != c.want {
			t.Errorf("LIFO(%v, %d, %d, %v) = %v", c.order, c.threshold, c.waiting, c.overloaded, got)
		}
	}
}
