package pool_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/panjf2000/ants/v2"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

// Run with: go test -run='^$' -bench=. -benchmem ./pool/
// The raw ants rows are the floor the pool bulkhead is measured against:
// the same pool of goroutines with no queue, futures, context or accounting.

func benchPool(b *testing.B, cfg pool.Config) *pool.Bulkhead {
	p, err := pool.New("bench", cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close(context.Background()) })
	return p
}

func benchAnts(b *testing.B, size int) *ants.Pool {
	p, err := ants.NewPool(size)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.ReleaseTimeout(guard) })
	return p
}

func answer(context.Context) (int, error) { return 42, nil }

// BenchmarkSubmitWait is one task, submitted and waited for at once: the
// join. "direct" is the same function called on the caller's goroutine, the
// price the join trap is compared with.
func BenchmarkSubmitWait(b *testing.B) {
	ctx := context.Background()
	const workers = 8
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if v, _ := answer(ctx); v != 42 {
				b.Fatal(v)
			}
		}
	})
	b.Run("pool", func(b *testing.B) {
		p := benchPool(b, pool.Config{MaxWorkers: workers, QueueCapacity: 1024})
		b.ReportAllocs()
		for b.Loop() {
			f, err := pool.Submit(ctx, p, answer)
			if err != nil {
				b.Fatal(err)
			}
			if v, _ := f.Wait(ctx); v != 42 {
				b.Fatal(v)
			}
		}
	})
	b.Run("pool_cancelable_ctx", func(b *testing.B) {
		p := benchPool(b, pool.Config{MaxWorkers: workers, QueueCapacity: 1024})
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			f, err := pool.Submit(cctx, p, answer)
			if err != nil {
				b.Fatal(err)
			}
			if v, _ := f.Wait(cctx); v != 42 {
				b.Fatal(v)
			}
		}
	})
	b.Run("pool_cancelable_ctx_task_watches_ctx", func(b *testing.B) {
		// The task looks at ctx.Done, as one that makes a call with it
		// would: its context starts watching the submitter's.
		p := benchPool(b, pool.Config{MaxWorkers: workers, QueueCapacity: 1024})
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		watch := func(ctx context.Context) (int, error) {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			default:
				return 42, nil
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			f, err := pool.Submit(cctx, p, watch)
			if err != nil {
				b.Fatal(err)
			}
			if v, _ := f.Wait(cctx); v != 42 {
				b.Fatal(v)
			}
		}
	})
	b.Run("ants_Submit_wg", func(b *testing.B) {
		p := benchAnts(b, workers)
		b.ReportAllocs()
		var wg sync.WaitGroup
		for b.Loop() {
			var v int
			wg.Add(1)
			p.Submit(func() { v, _ = answer(ctx); wg.Done() })
			wg.Wait()
			if v != 42 {
				b.Fatal(v)
			}
		}
	})
	b.Run("ants_Submit_chan", func(b *testing.B) {
		p := benchAnts(b, workers)
		b.ReportAllocs()
		for b.Loop() {
			ch := make(chan int, 1)
			p.Submit(func() { v, _ := answer(ctx); ch <- v })
			if v := <-ch; v != 42 {
				b.Fatal(v)
			}
		}
	})
	b.Run("pool_parallel", func(b *testing.B) {
		p := benchPool(b, pool.Config{MaxWorkers: workers, QueueCapacity: 1024})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				f, err := pool.Submit(ctx, p, answer)
				if err != nil {
					b.Error(err)
					return
				}
				f.Wait(ctx)
			}
		})
	})
	b.Run("ants_Submit_chan_parallel", func(b *testing.B) {
		p := benchAnts(b, workers)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ch := make(chan int, 1)
				p.Submit(func() { v, _ := answer(ctx); ch <- v })
				<-ch
			}
		})
	})
}

// BenchmarkFanOut submits 1,000 tasks to 64 workers and waits for all of
// them; ns/op and allocs/op are per batch of 1,000.
func BenchmarkFanOut(b *testing.B) {
	ctx := context.Background()
	const tasks, workers = 1000, 64
	// With a QueueTimeout most of the batch waits in the queue with a
	// deadline; the queue has one timer, not one per task.
	for _, c := range []struct {
		name string
		cfg  pool.Config
	}{
		{"pool", pool.Config{MaxWorkers: workers, QueueCapacity: tasks}},
		{"pool_QueueTimeout", pool.Config{MaxWorkers: workers, QueueCapacity: tasks, QueueTimeout: time.Minute}},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := benchPool(b, c.cfg)
			fs := make([]*future.Future[int], tasks)
			b.ReportAllocs()
			for b.Loop() {
				for i := range fs {
					f, err := pool.Submit(ctx, p, answer)
					if err != nil {
						b.Fatal(err)
					}
					fs[i] = f
				}
				if _, err := future.All(ctx, fs...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("ants_Submit_wg", func(b *testing.B) {
		p := benchAnts(b, workers) // blocking: a submitter waits for a worker
		res := make([]int, tasks)
		b.ReportAllocs()
		for b.Loop() {
			var wg sync.WaitGroup
			wg.Add(tasks)
			for i := range res {
				p.Submit(func() { res[i], _ = answer(ctx); wg.Done() })
			}
			wg.Wait()
		}
	})
}

// BenchmarkReject submits to a full pool.
func BenchmarkReject(b *testing.B) {
	ctx := context.Background()
	p := benchPool(b, pool.Config{MaxWorkers: 1, QueueCapacity: 1})
	release := make(chan struct{})
	hold := func(context.Context) (int, error) { <-release; return 0, nil }
	pool.Submit(ctx, p, hold)
	pool.Submit(ctx, p, hold)
	defer close(release)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pool.Submit(ctx, p, answer); err == nil {
				b.Fatal("accepted")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				pool.Submit(ctx, p, answer)
			}
		})
	})
}

// BenchmarkQueue is a queue that stays long (16 submitters per P on 2
// workers, each task yielding once) under each configured form of the
// queue's rules, beside the plain FIFO queue; the rules cost only here.
func BenchmarkQueue(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	task := func(context.Context) error { runtime.Gosched(); return nil }
	base := pool.Config{MaxWorkers: 2, QueueCapacity: 1024, QueueTimeout: time.Minute}
	for _, c := range []struct {
		name string
		mod  func(*pool.Config)
	}{
		{"fifo", func(*pool.Config) {}},
		{"deadlineSlack", func(c *pool.Config) { c.MinDeadlineSlack = time.Millisecond }},
		{"lifo", func(c *pool.Config) { c.QueueOrder = bulkhead.LIFO }},
		{"adaptiveLIFO", func(c *pool.Config) { c.QueueOrder, c.LIFOThreshold = bulkhead.AdaptiveLIFO, 4 }},
		{"codel", func(c *pool.Config) { c.CoDel = &bulkhead.CoDel{} }},
		{"maxWaitingLIFO", func(c *pool.Config) {
			c.QueueCapacity, c.MaxWaitingCalls, c.QueueOrder = 4, 8, bulkhead.LIFO
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := base
			c.mod(&cfg)
			p := benchPool(b, cfg)
			b.ReportAllocs()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if f, err := p.Go(ctx, task); err == nil {
						f.Wait(ctx) // a refusal (waiters, codel) is a result like any other here
					}
				}
			})
		})
	}
}
