package registry

import (
	"math"
	"sync"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// record is what the status page keeps of an event: its type, time,
// durations and outcome word, never its error, so that an error's text (or
// a panic's stack) can neither be shown nor kept alive by the ring. It
// holds no pointer, so storing one costs a few plain stores.
type record struct {
	typ       bulkhead.EventType
	outcome   uint8 // index in outcomes
	at        int64 // Unix nanoseconds; noTime for the zero time
	wait, run time.Duration
}

const noTime = math.MinInt64

func (rec record) time() time.Time {
	if rec.at == noTime {
		return time.Time{}
	}
	return time.Unix(0, rec.at)
}

// ring keeps the last len(buf) records, in a buffer allocated once. An
// event is stored by value, with its outcome as a number: nothing is
// formatted until the status page is read.
type ring struct {
	mu   sync.Mutex
	buf  []record
	next int
	full bool
}

func newRing(n int) *ring { return &ring{buf: make([]record, n)} }

// add records e, with no allocation.
func (r *ring) add(e *bulkhead.Event) {
	at := int64(noTime)
	if !e.Time.IsZero() {
		at = e.Time.UnixNano()
	}
	r.put(record{typ: e.Type, outcome: outcome(e), at: at, wait: e.Wait, run: e.Run})
}

// put adds rec as it is (when a resized ring takes over the records).
func (r *ring) put(rec record) {
	r.mu.Lock()
	r.buf[r.next] = rec
	if r.next++; r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
	r.mu.Unlock()
}

// records returns the kept records, oldest first.
func (r *ring) records() []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]record(nil), r.buf[:r.next]...)
	}
	return append(append(make([]record, 0, len(r.buf)), r.buf[r.next:]...), r.buf[:r.next]...)
}
