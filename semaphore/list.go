package semaphore

import (
	"runtime/debug"

	"github.com/bulkhead-go/bulkhead"
)

// waiter is a caller waiting for a permit. state and the links are guarded
// by the Bulkhead's mutex; ready is closed when state leaves waiting.
type waiter struct {
	ready      chan struct{}
	state      waiterState
	deadline   int64 // in the clock of now
	prev, next *waiter
}

type waiterState uint8

const (
	waiting waiterState = iota
	granted             // handed a permit
	expired             // its deadline passed first
)

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

func (l *list) popFront() *waiter {
	w := l.head
	l.remove(w)
	return w
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
