package bench

// github.com/panjf2000/ants/v2 used raw: Submit plus a channel or a
// WaitGroup for the result, non-blocking Submit for rejection.

import (
	"context"
	"sync"
	"testing"

	"github.com/panjf2000/ants/v2"
)

func newAnts(b *testing.B, size int, opts ...ants.Option) *ants.Pool {
	p, err := ants.NewPool(size, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Release)
	return p
}

// antsJoin submits fn and waits for it on a channel.
func antsJoin(p *ants.Pool, fn func()) error {
	done := make(chan struct{}, 1)
	if err := p.Submit(func() { fn(); done <- struct{}{} }); err != nil {
		return err
	}
	<-done
	return nil
}

func init() {
	rejectCases = append(rejectCases,
		opCase{peerKind, "ants_Submit_nonblocking", func(b *testing.B) func() {
			p := newAnts(b, heldLimit, ants.WithNonblocking(true))
			occupy(b, heldLimit, func(task func()) {
				if err := p.Submit(task); err != nil {
					b.Fatal(err)
				}
			})
			return func() {
				if p.Submit(callNoop) == nil {
					panic("bench: ants accepted a task while full")
				}
			}
		}},
	)
	joinCases = append(joinCases,
		opCase{peerKind, "ants_Submit_chan", func(b *testing.B) func() {
			p := newAnts(b, joinWorkers)
			return func() {
				ch := make(chan int, 1)
				_ = p.Submit(func() {
					v, _ := answer(bg)
					ch <- v
				})
				sink.Store(int64(<-ch))
			}
		}},
		// The same with what a task context costs: a context.WithCancel of
		// a cancellable parent per task, whose Done the task selects on.
		opCase{peerKind, "ants_Submit_chan_WithCancel", func(b *testing.B) func() {
			p := newAnts(b, joinWorkers)
			parent, stop := context.WithCancel(bg)
			b.Cleanup(stop)
			return func() {
				ch := make(chan int, 1)
				ctx, cancel := context.WithCancel(parent)
				_ = p.Submit(func() {
					select {
					case <-ctx.Done():
						ch <- 0
					default:
						ch <- 42
					}
					cancel()
				})
				sink.Store(int64(<-ch))
			}
		}},
	)
	fanOutCases = append(fanOutCases,
		opCase{peerKind, "ants_Submit_blocking", func(b *testing.B) func() {
			p := newAnts(b, joinWorkers)
			return func() {
				res := make([]int, fanOut)
				var wg sync.WaitGroup
				wg.Add(fanOut)
				for i := range res {
					_ = p.Submit(func() {
						res[i], _ = answer(bg)
						wg.Done()
					})
				}
				wg.Wait()
				sink.Store(int64(res[fanOut-1]))
			}
		}},
	)
	trapCases = append(trapCases,
		trapCase{peerKind, "ants_Submit_wait", func(b *testing.B, body func()) func() {
			p := newAnts(b, trapLimit)
			return func() { _ = antsJoin(p, body) }
		}},
	)
	burstCases = append(burstCases,
		burstCase{peerKind, "ants_Submit_nonblocking_wait", func(b *testing.B, body func()) func() bool {
			p := newAnts(b, heldLimit, ants.WithNonblocking(true))
			return func() bool { return antsJoin(p, body) == nil }
		}},
	)
}
