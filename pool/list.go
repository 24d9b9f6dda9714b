package pool

// queue is a first-in, first-out list of nodes with O(1) removal: the
// queue of tasks waiting for a worker, the line of submitters waiting for
// room, and the running tasks. It is guarded by the Bulkhead's mutex; a
// node is on at most one queue at a time.
type queue struct {
	head, tail *node
	len        int
}

func (q *queue) push(n *node) {
	n.prev, n.next = q.tail, nil
	if q.tail == nil {
		q.head = n
	} else {
		q.tail.next = n
	}
	q.tail = n
	q.len++
}

func (q *queue) remove(n *node) {
	if n.prev == nil {
		q.head = n.next
	} else {
		n.prev.next = n.next
	}
	if n.next == nil {
		q.tail = n.prev
	} else {
		n.next.prev = n.prev
	}
	n.prev, n.next = nil, nil
	q.len--
}
