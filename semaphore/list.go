package semaphore

import (
	"runtime/debug"
	"sync/atomic"

	"github.com/bulkhead-go/bulkhead"
)

// waiter is a caller waiting for a permit. The links are guarded by the
// Bulkhead's mutex; state changes from waiting under it, and ready is
// signalled after each change, and when the waiter is to watch the timer.
type waiter struct {
	ready      chan struct{} // capacity 1
	state      atomic.Uint32
	watch      bool            // listens to the Bulkhead's timer
	handed     bool            // was handed the timer by unlinkLocked, with a signal of its own
	deadline   int64           // in the clock of now
	joined     int64           // in the clock of now
	byDeadline bool            // the deadline is its context's, less MinDeadlineSlack
	reason     bulkhead.Reason // why it was refused
	line       uint64          // the Bulkhead's line it joined
	lane       uint8           // its priority's lane
	prev, next *waiter
}

// States of a waiter.
const (
	waiting uint32 = iota
	granted        // handed a permit
	refused        // refused (its reason says why): its deadline passed, or the line shed it
)

// signal wakes w if it is not already due to wake.
func (w *waiter) signal() {
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// list is a doubly linked FIFO of waiters with O(1) removal. Deadlines grow
// from head to tail unless unsorted is set: Reconfigure shortened
// MaxWaitDuration while callers waited.
type list struct {
	head, tail *waiter
	unsorted   bool
}

func (l *list) pushBack(w *waiter) {
	w.prev = l.tail
	if l.tail == nil {
		l.head = w
	} else {
		l.tail.next = w
	}
	l.tail = w
}

func (l *list) remove(w *waiter) {
	if w.prev == nil {
		l.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		l.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
}

func newPanicError(r any) error {
	return &bulkhead.PanicError{Value: r, Stack: debug.Stack()}
}
