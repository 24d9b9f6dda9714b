package semaphore_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
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

// BenchmarkPermit is AcquirePermit and Permit.Release, the path of
// bulkheadhttp.Transport and bulkheadgrpc.
func BenchmarkPermit(b *testing.B) {
	ctx := context.Background()
	benchBoth(b, 1<<20, func(s *semaphore.Bulkhead) {
		if p, err := s.AcquirePermit(ctx); err == nil {
			p.Release(nil)
		}
	})
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

// BenchmarkLine is a line of waiters (16 callers per P on 2 permits, each
// call yielding once) under each configured form of the line's rules, beside
// the plain FIFO line; the rules cost only here, on the slow path.
func BenchmarkLine(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	fn := func(context.Context) error {
		runtime.Gosched()
		return nil
	}
	base := semaphore.Config{MaxConcurrentCalls: 2, MaxWaitDuration: time.Minute}
	for _, c := range []struct {
		name string
		mod  func(*semaphore.Config)
	}{
		{"fifo", func(*semaphore.Config) {}},
		{"maxWaiting", func(c *semaphore.Config) { c.MaxWaitingCalls = 8 }},
		{"maxWaitingLIFO", func(c *semaphore.Config) { c.MaxWaitingCalls, c.QueueOrder = 8, bulkhead.LIFO }},
		{"deadlineSlack", func(c *semaphore.Config) { c.MinDeadlineSlack = time.Millisecond }},
		{"lifo", func(c *semaphore.Config) { c.QueueOrder = bulkhead.LIFO }},
		{"adaptiveLIFO", func(c *semaphore.Config) { c.QueueOrder, c.LIFOThreshold = bulkhead.AdaptiveLIFO, 4 }},
		{"codel", func(c *semaphore.Config) { c.CoDel = &bulkhead.CoDel{} }},
		{"adaptiveCoDel", func(c *semaphore.Config) { c.QueueOrder, c.CoDel = bulkhead.AdaptiveLIFO, &bulkhead.CoDel{} }},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := base
			c.mod(&cfg)
			s, err := semaphore.New("bench", cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					s.Do(ctx, fn) // a refusal (waiters, codel) is a result like any other here
				}
			})
		})
	}
}

// BenchmarkRejectReason is a refusal at once for each reason the line's
// rules add, beside a plain one (BenchmarkReject/serial).
func BenchmarkRejectReason(b *testing.B) {
	fn := func(context.Context) error { return nil }
	near, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, c := range []struct {
		name string
		cfg  semaphore.Config
		ctx  context.Context
	}{
		{"waiters", semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour, MaxWaitingCalls: 1}, context.Background()},
		{"deadline", semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour, MinDeadlineSlack: 2 * time.Hour}, near},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, err := semaphore.New("bench", c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			s.TryAcquire()
			if c.name == "waiters" { // one waiter fills the line
				go s.Acquire(context.Background())
				for s.Stats().Waiting == 0 {
					runtime.Gosched()
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				s.Do(c.ctx, fn)
			}
			b.StopTimer()
			s.Release()
			if c.name == "waiters" {
				for s.Stats().InFlight == 0 {
					runtime.Gosched()
				}
				s.Release()
			}
		})
	}
}
