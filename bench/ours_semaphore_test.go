package bench

// This library's semaphore bulkhead: the call runs on the caller's goroutine.

import (
	"context"
	"testing"

	"github.com/bulkhead-go/bulkhead/semaphore"
)

func newSemaphore(b *testing.B, limit int) *semaphore.Bulkhead {
	s, err := semaphore.New("bench", semaphore.Config{MaxConcurrentCalls: limit})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

type oursTry struct{ *semaphore.Bulkhead }

func (s oursTry) tryAcquire() bool { return s.TryAcquire() }
func (s oursTry) release()         { s.Release() }

func semDo(s *semaphore.Bulkhead) func() {
	return func() { _ = s.Do(bg, noop) }
}

func init() {
	guardCases = append(guardCases,
		opCase{oursKind, "semaphore_Do", func(b *testing.B) func() { return semDo(newSemaphore(b, bigLimit)) }},
		opCase{oursKind, "semaphore_Execute", func(b *testing.B) func() {
			s := newSemaphore(b, bigLimit)
			return func() {
				v, _ := semaphore.Execute(bg, s, answer)
				sink.Store(int64(v))
			}
		}},
		opCase{oursKind, "semaphore_TryAcquire", func(b *testing.B) func() {
			return guarded(oursTry{newSemaphore(b, bigLimit)}, callNoop)
		}},
		opCase{oursKind, "semaphore_Acquire", func(b *testing.B) func() {
			s := newSemaphore(b, bigLimit)
			return func() {
				if s.Acquire(bg) == nil {
					callNoop()
					s.Release()
				}
			}
		}},
	)
	rejectCases = append(rejectCases,
		opCase{oursKind, "semaphore_TryAcquire", func(b *testing.B) func() {
			return guarded(held(oursTry{newSemaphore(b, heldLimit)}, heldLimit), callNoop)
		}},
		opCase{oursKind, "semaphore_Do", func(b *testing.B) func() {
			return semDo(held(oursTry{newSemaphore(b, heldLimit)}, heldLimit).Bulkhead)
		}},
	)
	trapCases = append(trapCases,
		trapCase{oursKind, "semaphore_Do", func(b *testing.B, body func()) func() {
			s := newSemaphore(b, trapLimit)
			fn := func(context.Context) error { body(); return nil }
			return func() { _ = s.Do(bg, fn) }
		}},
	)
	burstCases = append(burstCases,
		burstCase{oursKind, "semaphore_Do", func(b *testing.B, body func()) func() bool {
			s := newSemaphore(b, heldLimit)
			fn := func(context.Context) error { body(); return nil }
			return func() bool { return s.Do(bg, fn) == nil }
		}},
	)
}
