package bench

// github.com/failsafe-go/failsafe-go: the bulkhead policy's permit API, and
// the executor with a bulkhead (failsafe.Get, GetAsync).

import (
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/bulkhead"
)

type fsPermit struct{ bulkhead.Bulkhead[int] }

func (p fsPermit) tryAcquire() bool { return p.TryAcquirePermit() }
func (p fsPermit) release()         { p.ReleasePermit() }

func fsGet(exec failsafe.Executor[int]) func() {
	return func() {
		v, _ := exec.Get(func() (int, error) { return answer(bg) })
		sink.Store(int64(v))
	}
}

func init() {
	guardCases = append(guardCases,
		opCase{peerKind, "failsafe_TryAcquirePermit", func(*testing.B) func() {
			return guarded(fsPermit{bulkhead.New[int](bigLimit)}, callNoop)
		}},
		opCase{peerKind, "failsafe_AcquirePermitMaxWait0", func(*testing.B) func() {
			bh := bulkhead.New[int](bigLimit)
			return func() {
				if bh.AcquirePermitWithMaxWait(bg, 0) == nil {
					callNoop()
					bh.ReleasePermit()
				}
			}
		}},
		opCase{peerKind, "failsafe_Get", func(*testing.B) func() {
			return fsGet(failsafe.With[int](bulkhead.New[int](bigLimit)))
		}},
	)
	rejectCases = append(rejectCases,
		opCase{peerKind, "failsafe_TryAcquirePermit", func(*testing.B) func() {
			return guarded(held(fsPermit{bulkhead.New[int](heldLimit)}, heldLimit), callNoop)
		}},
		opCase{peerKind, "failsafe_Get", func(*testing.B) func() {
			return fsGet(failsafe.With[int](held(fsPermit{bulkhead.New[int](heldLimit)}, heldLimit).Bulkhead))
		}},
	)
	joinCases = append(joinCases,
		opCase{peerKind, "failsafe_GetAsync", func(*testing.B) func() {
			exec := failsafe.With[int](bulkhead.New[int](joinWorkers))
			return func() {
				v, _ := exec.GetAsync(func() (int, error) { return answer(bg) }).Get()
				sink.Store(int64(v))
			}
		}},
	)
	fanOutCases = append(fanOutCases,
		opCase{peerKind, "failsafe_GetAsync", func(*testing.B) func() {
			// A bulkhead of 64 that queues (waits up to an hour) instead of
			// rejecting most of the batch.
			exec := failsafe.With[int](bulkhead.NewBuilder[int](joinWorkers).WithMaxWaitTime(time.Hour).Build())
			return func() {
				rs := make([]failsafe.ExecutionResult[int], fanOut)
				for i := range rs {
					rs[i] = exec.GetAsync(func() (int, error) { return answer(bg) })
				}
				var sum int
				for _, r := range rs {
					v, _ := r.Get()
					sum += v
				}
				sink.Store(int64(sum))
			}
		}},
	)
	trapCases = append(trapCases,
		trapCase{peerKind, "failsafe_Get", func(_ *testing.B, body func()) func() {
			exec := failsafe.With[int](bulkhead.New[int](trapLimit))
			fn := func() (int, error) { body(); return 0, nil }
			return func() { _, _ = exec.Get(fn) }
		}},
		trapCase{peerKind, "failsafe_GetAsync_wait", func(_ *testing.B, body func()) func() {
			exec := failsafe.With[int](bulkhead.New[int](trapLimit))
			fn := func() (int, error) { body(); return 0, nil }
			return func() { _, _ = exec.GetAsync(fn).Get() }
		}},
	)
	burstCases = append(burstCases,
		burstCase{peerKind, "failsafe_Get", func(_ *testing.B, body func()) func() bool {
			exec := failsafe.With[int](bulkhead.New[int](heldLimit))
			fn := func() (int, error) { body(); return 0, nil }
			return func() bool {
				_, err := exec.Get(fn)
				return err == nil
			}
		}},
		burstCase{peerKind, "failsafe_GetAsync_wait", func(_ *testing.B, body func()) func() bool {
			exec := failsafe.With[int](bulkhead.New[int](heldLimit))
			fn := func() (int, error) { body(); return 0, nil }
			return func() bool {
				_, err := exec.GetAsync(fn).Get()
				return err == nil
			}
		}},
	)
}
