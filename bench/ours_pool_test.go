package bench

// This library's pool bulkhead: tasks run on its own workers behind a
// bounded FIFO queue, and every Submit returns a typed future.

import (
	"context"
	"runtime"
	"testing"

	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

func newPool(b *testing.B, workers, queue int) *pool.Bulkhead {
	p, err := pool.New("bench", pool.Config{MaxWorkers: workers, QueueCapacity: queue})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := p.Close(bg); err != nil {
			b.Error(err)
		}
	})
	return p
}

// poolJoin submits fn and waits for it.
func poolJoin(p *pool.Bulkhead, fn func(context.Context) (int, error)) (int, error) {
	f, err := pool.Submit(bg, p, fn)
	if err != nil {
		return 0, err
	}
	return f.Wait(bg)
}

// watchCtx is a task that looks at its context's Done channel, as any call
// that takes a context does.
func watchCtx(ctx context.Context) (int, error) {
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	default:
		return 42, nil
	}
}

func init() {
	rejectCases = append(rejectCases,
		opCase{oursKind, "pool_Submit", func(b *testing.B) func() {
			// 8 workers busy and a queue of 8 full.
			p := newPool(b, heldLimit, heldLimit)
			occupy(b, heldLimit, func(task func()) {
				if _, err := pool.Submit(bg, p, func(context.Context) (int, error) { task(); return 0, nil }); err != nil {
					b.Fatal(err)
				}
			})
			for range heldLimit {
				if _, err := pool.Submit(bg, p, answer); err != nil {
					b.Fatal(err)
				}
			}
			return func() {
				if _, err := pool.Submit(bg, p, answer); err == nil {
					panic("bench: the pool accepted a task while full")
				}
			}
		}},
	)
	joinCases = append(joinCases,
		opCase{oursKind, "pool_Submit_Wait", func(b *testing.B) func() {
			p := newPool(b, joinWorkers, joinWorkers)
			return func() {
				v, _ := poolJoin(p, answer)
				sink.Store(int64(v))
			}
		}},
		// Issue 25: pool_Submit_Wait on a pool with a shadow of half its
		// workers, which its one task at a time never fills: the shadow's
		// bookkeeping per task (a slot, taken at the start, given back at
		// the end).
		opCase{oursKind, "pool_Submit_Wait_shadow", func(b *testing.B) func() {
			p, err := pool.New("bench", pool.Config{MaxWorkers: joinWorkers, QueueCapacity: joinWorkers,
				Shadow: &pool.Shadow{MaxWorkers: joinWorkers / 2}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = p.Close(bg) })
			return func() {
				v, _ := poolJoin(p, answer)
				sink.Store(int64(v))
			}
		}},
		// Issue 23: the keyed pool's submit-and-wait, keys in turn (target:
		// at most 1.15x pool_Submit_Wait).
		opCase{oursKind, "pool_SubmitKeyed_Wait", func(b *testing.B) func() {
			p, err := pool.NewKeyed[int]("bench", pool.KeyedConfig{Config: pool.Config{MaxWorkers: joinWorkers, QueueCapacity: joinWorkers}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = p.Close(bg) })
			key := 0
			return func() {
				key = (key + 1) % 16
				f, err := pool.SubmitKeyed(bg, p, key, answer)
				if err != nil {
					panic(err)
				}
				v, _ := f.Wait(bg)
				sink.Store(int64(v))
			}
		}},
		// Issue 19's realistic join: submitted under a cancellable parent
		// context, the task selects on ctx.Done(), as a network call does.
		// Compare with ants_Submit_chan_WithCancel (BENCH_REF).
		opCase{oursKind, "pool_Submit_Wait_ctxDone", func(b *testing.B) func() {
			p := newPool(b, joinWorkers, joinWorkers)
			ctx, cancel := context.WithCancel(bg)
			b.Cleanup(cancel)
			return func() {
				f, err := pool.Submit(ctx, p, watchCtx)
				if err != nil {
					panic(err)
				}
				v, _ := f.Wait(ctx)
				sink.Store(int64(v))
			}
		}},
	)
	fanOutCases = append(fanOutCases,
		opCase{oursKind, "pool_Submit_All", func(b *testing.B) func() {
			// Room in the queue for a whole batch from every submitter, so
			// that the batch queues instead of being rejected.
			p := newPool(b, joinWorkers, fanOut*runtime.GOMAXPROCS(0))
			return func() {
				fs := make([]*future.Future[int], fanOut)
				for i := range fs {
					f, err := pool.Submit(bg, p, answer)
					if err != nil {
						panic(err)
					}
					fs[i] = f
				}
				res, _ := future.All(bg, fs...)
				sink.Store(int64(res[fanOut-1]))
			}
		}},
	)
	trapCases = append(trapCases,
		trapCase{oursKind, "pool_Submit_Wait", func(b *testing.B, body func()) func() {
			p := newPool(b, trapLimit, trapLimit)
			fn := func(context.Context) (int, error) { body(); return 0, nil }
			return func() { _, _ = poolJoin(p, fn) }
		}},
	)
	burstCases = append(burstCases,
		burstCase{oursKind, "pool_Submit_Wait", func(b *testing.B, body func()) func() bool {
			p := newPool(b, heldLimit, 0)
			fn := func(context.Context) (int, error) { body(); return 0, nil }
			return func() bool {
				_, err := poolJoin(p, fn)
				return err == nil
			}
		}},
	)
}
