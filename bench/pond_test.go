package bench

// github.com/alitto/pond/v2: a result pool, its TrySubmit and its groups.

import (
	"testing"

	"github.com/alitto/pond/v2"
)

func newPond(b *testing.B, size int, opts ...pond.Option) pond.ResultPool[int] {
	p := pond.NewResultPool[int](size, opts...)
	b.Cleanup(p.StopAndWait)
	return p
}

func init() {
	rejectCases = append(rejectCases,
		opCase{peerKind, "pond_TrySubmit", func(b *testing.B) func() {
			p := newPond(b, heldLimit, pond.WithQueueSize(0), pond.WithNonBlocking(true))
			occupy(b, heldLimit, func(task func()) {
				if _, ok := p.TrySubmit(func() int { task(); return 0 }); !ok {
					b.Fatal("pond rejected a task while filling the pool")
				}
			})
			return func() {
				if _, ok := p.TrySubmit(func() int { return 0 }); ok {
					panic("bench: pond accepted a task while full")
				}
			}
		}},
	)
	joinCases = append(joinCases,
		opCase{peerKind, "pond_Submit_Wait", func(b *testing.B) func() {
			p := newPond(b, joinWorkers)
			return func() {
				v, _ := p.SubmitErr(func() (int, error) { return answer(bg) }).Wait()
				sink.Store(int64(v))
			}
		}},
	)
	fanOutCases = append(fanOutCases,
		opCase{peerKind, "pond_group", func(b *testing.B) func() {
			p := newPond(b, joinWorkers)
			return func() {
				g := p.NewGroup()
				for range fanOut {
					g.SubmitErr(func() (int, error) { return answer(bg) })
				}
				res, _ := g.Wait()
				sink.Store(int64(res[fanOut-1]))
			}
		}},
	)
	trapCases = append(trapCases,
		trapCase{peerKind, "pond_Submit_wait", func(b *testing.B, body func()) func() {
			p := newPond(b, trapLimit)
			fn := func() int { body(); return 0 }
			return func() { _, _ = p.Submit(fn).Wait() }
		}},
	)
	burstCases = append(burstCases,
		burstCase{peerKind, "pond_TrySubmit_wait", func(b *testing.B, body func()) func() bool {
			p := newPond(b, heldLimit, pond.WithQueueSize(0), pond.WithNonBlocking(true))
			fn := func() int { body(); return 0 }
			return func() bool {
				t, ok := p.TrySubmit(fn)
				if !ok {
					return false
				}
				_, err := t.Wait()
				return err == nil
			}
		}},
	)
}
