package semaphore_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/bulkhead-go/bulkhead/semaphore"
)

// The full comparison with the peers lives in the bench module; these keep
// an eye on the fast paths, beside the floor they are measured against.

func BenchmarkFloorCAS(b *testing.B) {
	var n atomic.Int64
	acquire := func() bool {
		for {
			c := n.Load()
			if c >= 1<<20 {
				return false
			}
			if n.CompareAndSwap(c, c+1) {
				return true
			}
		}
	}
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if acquire() {
				n.Add(-1)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if acquire() {
					n.Add(-1)
				}
			}
		})
	})
}

func benchBoth(b *testing.B, max int, op func(*semaphore.Bulkhead)) {
	b.Run("serial", func(b *testing.B) {
		s := mustNew(b, max, 0)
		b.ReportAllocs()
		for b.Loop() {
			op(s)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		s := mustNew(b, max, 0)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				op(s)
			}
		})
	})
}

func BenchmarkTryAcquireRelease(b *testing.B) {
	benchBoth(b, 1<<20, func(s *semaphore.Bulkhead) {
		if s.TryAcquire() {
			s.Release()
		}
	})
}

func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	benchBoth(b, 1<<20, func(s *semaphore.Bulkhead) { s.Do(ctx, fn) })
}

func BenchmarkExecute(b *testing.B) {
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	benchBoth(b, 1<<20, func(s *semaphore.Bulkhead) { semaphore.Execute(ctx, s, fn) })
}

func BenchmarkReject(b *testing.B) {
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.Run("serial", func(b *testing.B) {
		s := mustNew(b, 1, 0)
		s.TryAcquire()
		b.ReportAllocs()
		for b.Loop() {
			s.Do(ctx, fn)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		s := mustNew(b, 1, 0)
		s.TryAcquire()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				s.TryAcquire()
			}
		})
	})
}
