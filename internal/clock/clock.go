// Package clock stamps the bulkheads' events with the time of day at the
// cost of one read of the monotonic clock.
//
// time.Now reads two clocks, the wall clock and the monotonic clock; on
// some virtual machines each read is a slow call (two of them cost 55–90
// ns where one costs about 30 ns). [Now] reads only the monotonic clock
// and adds the time elapsed to an anchor, a time.Now taken at most about a
// second earlier. The result carries the exact monotonic reading, so
// durations between stamps are exact; its wall time lags a step of the wall
// clock (a manual or NTP step) by at most about a second.
package clock

import (
	"sync/atomic"
	"time"
)

// maxAge is how long an anchor serves before Now takes a new one.
const maxAge = time.Second

// anchor is the last time.Now that Now took; nil until the first call.
var anchor atomic.Pointer[time.Time]

// Now returns the current time like time.Now, from one read of the
// monotonic clock while the anchor is less than a second old. Inside a
// testing/synctest bubble it returns the bubble's time.Now exactly: a
// bubble's times carry no monotonic reading, so there the anchor is a
// bubble time and the elapsed time is the bubble's, and an anchor from
// outside the bubble (or from another bubble) is found out of range
// (negative or over a second) and replaced.
func Now() time.Time {
	if a := anchor.Load(); a != nil {
		if d := time.Since(*a); d >= 0 && d <= maxAge {
			return a.Add(d)
		}
	}
	return reanchor()
}

// reanchor takes a new anchor with time.Now and returns it.
//
//go:noinline
func reanchor() time.Time {
	t := time.Now()
	anchor.Store(&t)
	return t
}
