package registry

import (
	"slices"
	"sync"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// record is what the status page keeps of an event: never its error, so
// that the ring neither shows nor keeps alive an error's text.
type record struct {
	typ       bulkhead.EventType
	outcome   string // a fixed word (see outcome)
	at        time.Time
	wait, run time.Duration
}

// ring keeps the last len(buf) records, in a buffer allocated once: nothing
// is formatted until the status page is read.
type ring struct {
	mu   sync.Mutex
	buf  []record
	next int
	full bool
}

// add records e, with no allocation.
func (r *ring) add(e *bulkhead.Event) {
	r.put(record{typ: e.Type, outcome: outcome(e), at: e.Time, wait: e.Wait, run: e.Run})
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

// records returns the records, oldest first.
func (r *ring) records() []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return slices.Clone(r.buf[:r.next])
	}
	return slices.Concat(r.buf[r.next:], r.buf[:r.next])
}
