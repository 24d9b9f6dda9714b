package semaphore_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/bulkhead-go/bulkhead/semaphore"
)

// BenchmarkKeyedDo measures a keyed call beside the plain Do (the issue's
// target: at most 3x, and 0 allocations after a key's first call).
// hot-key calls one key; permit takes and releases a KeyedPermit of one
// key; 1k-keys calls 1,000 keys that each hold a permit
// all along; churn calls a new key each time, out of 100,000, beside the
// 1,000 held, and reports the heap after the churn less the heap before
// (heap-delta-B, after a GC on both sides).
func BenchmarkKeyedDo(b *testing.B) {
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.Run("plain", func(b *testing.B) {
		s := mustNew(b, 1<<20, 0)
		b.ReportAllocs()
		for b.Loop() {
			s.Do(ctx, fn)
		}
	})
	b.Run("hot-key", func(b *testing.B) {
		k := mustKeyed(b, 1<<20, 1<<20, 0)
		b.ReportAllocs()
		for b.Loop() {
			k.Do(ctx, "tenant-1", fn)
		}
	})
	b.Run("permit", func(b *testing.B) { // TryAcquire and Release, one key
		k := mustKeyed(b, 1<<20, 1<<20, 0)
		b.ReportAllocs()
		for b.Loop() {
			p, _ := k.TryAcquire("tenant-1")
			p.Release(nil)
		}
	})
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = fmt.Sprint("tenant-", i)
	}
	held := func(b *testing.B, k *semaphore.Keyed[string]) {
		for _, key := range keys[:1000] {
			if _, ok := k.TryAcquire(key); !ok {
				b.Fatal(key)
			}
		}
	}
	b.Run("1k-keys", func(b *testing.B) {
		k := mustKeyed(b, 2, 1<<20, 0)
		held(b, k)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			k.Do(ctx, keys[i%1000], fn)
			i++
		}
	})
	b.Run("churn", func(b *testing.B) {
		k := mustKeyed(b, 2, 1<<20, 0)
		held(b, k)
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		before := heap()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			k.Do(ctx, keys[1000+i%99_000], fn)
			i++
		}
		b.StopTimer()
		b.ReportMetric(float64(int64(heap())-int64(before)), "heap-delta-B")
	})
	b.Run("parallel-plain", func(b *testing.B) {
		s := mustNew(b, 1<<20, 0)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				s.Do(ctx, fn)
			}
		})
	})
	b.Run("parallel-8-keys", func(b *testing.B) {
		k := mustKeyed(b, 1<<20, 1<<20, 0)
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				k.Do(ctx, keys[i%8], fn)
				i++
			}
		})
	})
}
