package bench

// The floors and the stdlib idioms: a direct call, a bare atomic counter
// (compare-and-swap, and add-then-undo), a buffered-channel semaphore, and
// `go` + channel for a hand-off.

import (
	"sync/atomic"
	"testing"
)

// casSem is the floor: a counter taken with one compare-and-swap and given
// back with one add. A full counter is rejected with a plain load.
type casSem struct {
	n     atomic.Int64
	limit int64
}

func (s *casSem) tryAcquire() bool {
	for {
		c := s.n.Load()
		if c >= s.limit {
			return false
		}
		if s.n.CompareAndSwap(c, c+1) {
			return true
		}
	}
}

func (s *casSem) release() { s.n.Add(-1) }

// addSem takes a permit with one add and undoes it when over the limit, so
// even a rejection writes twice.
type addSem struct {
	n     atomic.Int64
	limit int64
}

func (s *addSem) tryAcquire() bool {
	if s.n.Add(1) > s.limit {
		s.n.Add(-1)
		return false
	}
	return true
}

func (s *addSem) release() { s.n.Add(-1) }

// chanSem is the Go idiom: a buffered channel of permits.
type chanSem chan struct{}

func (s chanSem) tryAcquire() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s chanSem) release() { <-s }

type trySem interface {
	tryAcquire() bool
	release()
}

// guarded returns an operation that runs fn if s grants a permit.
func guarded[S trySem](s S, fn func()) func() {
	return func() {
		if s.tryAcquire() {
			fn()
			s.release()
		}
	}
}

func callNoop() { _ = noop(bg) }

// held returns s with limit permits taken.
func held[S trySem](s S, n int) S {
	for range n {
		if !s.tryAcquire() {
			panic("bench: could not take a permit while filling the limit")
		}
	}
	return s
}

// goChan runs fn on a new goroutine and waits for its result on a channel.
func goChan(fn func()) {
	done := make(chan struct{}, 1)
	go func() {
		fn()
		done <- struct{}{}
	}()
	<-done
}

func init() {
	guardCases = append(guardCases,
		opCase{baseKind, "direct", func(*testing.B) func() { return callNoop }},
		opCase{floorKind, "atomicCAS", func(*testing.B) func() { return guarded(&casSem{limit: bigLimit}, callNoop) }},
		opCase{baseKind, "atomicAdd", func(*testing.B) func() { return guarded(&addSem{limit: bigLimit}, callNoop) }},
		opCase{peerKind, "chan", func(*testing.B) func() { return guarded(make(chanSem, bigLimit), callNoop) }},
	)
	rejectCases = append(rejectCases,
		opCase{floorKind, "atomicCAS", func(*testing.B) func() {
			return guarded(held(&casSem{limit: heldLimit}, heldLimit), callNoop)
		}},
		opCase{baseKind, "atomicAdd", func(*testing.B) func() {
			return guarded(held(&addSem{limit: heldLimit}, heldLimit), callNoop)
		}},
		opCase{peerKind, "chan", func(*testing.B) func() {
			return guarded(held(make(chanSem, heldLimit), heldLimit), callNoop)
		}},
	)
	joinCases = append(joinCases,
		opCase{baseKind, "direct", func(*testing.B) func() {
			return func() {
				v, _ := answer(bg)
				sink.Store(int64(v))
			}
		}},
		opCase{floorKind, "go_chan", func(*testing.B) func() {
			return func() {
				ch := make(chan int, 1)
				go func() {
					v, _ := answer(bg)
					ch <- v
				}()
				sink.Store(int64(<-ch))
			}
		}},
	)
	fanOutCases = append(fanOutCases,
		opCase{floorKind, "go_chan", func(*testing.B) func() {
			return func() {
				ch := make(chan int, fanOut)
				for range fanOut {
					go func() {
						v, _ := answer(bg)
						ch <- v
					}()
				}
				var sum int
				for range fanOut {
					sum += <-ch
				}
				sink.Store(int64(sum))
			}
		}},
	)
	trapCases = append(trapCases,
		trapCase{floorKind, "atomicCAS_direct", func(_ *testing.B, body func()) func() {
			return guarded(&casSem{limit: trapLimit}, body)
		}},
		trapCase{baseKind, "go_chan", func(_ *testing.B, body func()) func() {
			return func() { goChan(body) }
		}},
	)
	burstCases = append(burstCases,
		burstCase{floorKind, "atomicCAS_direct", func(_ *testing.B, body func()) func() bool {
			s := &casSem{limit: heldLimit}
			return func() bool {
				if !s.tryAcquire() {
					return false
				}
				body()
				s.release()
				return true
			}
		}},
		burstCase{peerKind, "chan_direct", func(_ *testing.B, body func()) func() bool {
			s := make(chanSem, heldLimit)
			return func() bool {
				if !s.tryAcquire() {
					return false
				}
				body()
				s.release()
				return true
			}
		}},
		burstCase{baseKind, "go_chan_unlimited", func(_ *testing.B, body func()) func() bool {
			return func() bool {
				goChan(body)
				return true
			}
		}},
	)
}
