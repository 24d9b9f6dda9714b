package pool

// list is a doubly linked list of nodes with O(1) removal, used for the
// queue (oldest first) and for the running tasks. It is guarded by the
// Bulkhead's mutex; a node is on at most one list at a time.
type list struct{ head, tail *node }

func (l *list) pushBack(n *node) {
	n.prev, n.next = l.tail, nil
	if l.tail == nil {
		l.head = n
	} else {
		l.tail.next = n
	}
	l.tail = n
}

func (l *list) remove(n *node) {
	if n.prev == nil {
		l.head = n.next
	} else {
		n.prev.next = n.next
	}
	if n.next == nil {
		l.tail = n.prev
	} else {
		n.next.prev = n.prev
	}
	n.prev, n.next = nil, nil
}
