package bench

// golang.org/x/sync: semaphore.Weighted and errgroup with SetLimit.

import (
	"testing"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

type weighted struct{ *semaphore.Weighted }

func (w weighted) tryAcquire() bool { return w.TryAcquire(1) }
func (w weighted) release()         { w.Release(1) }

// heldGroup returns an errgroup limited to heldLimit with every slot busy.
func heldGroup(b *testing.B) *errgroup.Group {
	g := new(errgroup.Group)
	g.SetLimit(heldLimit)
	b.Cleanup(func() { _ = g.Wait() })
	occupy(b, heldLimit, func(task func()) { g.Go(func() error { task(); return nil }) })
	return g
}

func init() {
	guardCases = append(guardCases,
		opCase{peerKind, "xsync_TryAcquire", func(*testing.B) func() {
			return guarded(weighted{semaphore.NewWeighted(bigLimit)}, callNoop)
		}},
		opCase{peerKind, "xsync_Acquire", func(*testing.B) func() {
			w := semaphore.NewWeighted(bigLimit)
			return func() {
				if w.Acquire(bg, 1) == nil {
					callNoop()
					w.Release(1)
				}
			}
		}},
	)
	rejectCases = append(rejectCases,
		opCase{peerKind, "xsync_TryAcquire", func(*testing.B) func() {
			return guarded(held(weighted{semaphore.NewWeighted(heldLimit)}, heldLimit), callNoop)
		}},
		opCase{peerKind, "errgroup_TryGo", func(b *testing.B) func() {
			g := heldGroup(b)
			return func() {
				if g.TryGo(func() error { return noop(bg) }) {
					panic("bench: errgroup accepted a task while full")
				}
			}
		}},
	)
	joinCases = append(joinCases,
		opCase{peerKind, "errgroup_SetLimit", func(*testing.B) func() {
			return func() {
				var g errgroup.Group
				g.SetLimit(joinWorkers)
				var v int
				g.Go(func() (err error) { v, err = answer(bg); return err })
				_ = g.Wait()
				sink.Store(int64(v))
			}
		}},
	)
	fanOutCases = append(fanOutCases,
		opCase{peerKind, "errgroup_SetLimit", func(*testing.B) func() {
			return func() {
				var g errgroup.Group
				g.SetLimit(joinWorkers)
				res := make([]int, fanOut)
				for i := range res {
					g.Go(func() (err error) { res[i], err = answer(bg); return err })
				}
				_ = g.Wait()
				sink.Store(int64(res[fanOut-1]))
			}
		}},
	)
	burstCases = append(burstCases,
		burstCase{peerKind, "xsync_TryAcquire", func(_ *testing.B, body func()) func() bool {
			w := semaphore.NewWeighted(heldLimit)
			return func() bool {
				if !w.TryAcquire(1) {
					return false
				}
				body()
				w.Release(1)
				return true
			}
		}},
		burstCase{peerKind, "errgroup_TryGo_wait", func(b *testing.B, body func()) func() bool {
			g := new(errgroup.Group)
			g.SetLimit(heldLimit)
			b.Cleanup(func() { _ = g.Wait() })
			return func() bool {
				done := make(chan struct{})
				if !g.TryGo(func() error { body(); close(done); return nil }) {
					return false
				}
				<-done
				return true
			}
		}},
	)
}
