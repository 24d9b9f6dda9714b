package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

type stressCounts struct {
	ok, full, cancelled, notAttempted, other         atomic.Int64
	holders, peak                                    atomic.Int64
	evPermitted, evRejected, evCancelled, evFinished atomic.Int64
}

func (c *stressCounts) hold(limit int64, t *testing.T) {
	n := c.holders.Add(1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if limit > 0 && n > limit {
		t.Errorf("%d holders, limit %d", n, limit)
	}
}

func stressSem(t *testing.T, cfg semaphore.Config, reconf []semaphore.Config, fixedLimit int64) {
	b, err := semaphore.New("stress", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var c stressCounts
	b.Subscribe(func(e bulkhead.Event) {
		switch e.Type {
		case bulkhead.EventPermitted:
			c.evPermitted.Add(1)
		case bulkhead.EventRejected:
			c.evRejected.Add(1)
		case bulkhead.EventCancelled:
			c.evCancelled.Add(1)
		case bulkhead.EventFinished:
			c.evFinished.Add(1)
		}
	})
	classify := func(err error, ctx context.Context) bool {
		switch {
		case err == nil:
			c.ok.Add(1)
			return true
		case errors.Is(err, bulkhead.ErrBulkheadFull):
			c.full.Add(1)
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			c.cancelled.Add(1)
		default:
			c.other.Add(1)
			t.Errorf("unexpected error %v", err)
		}
		return false
	}
	const G, M = 8, 300
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	if len(reconf) > 0 {
		rwg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					if err := b.Reconfigure(cfg); err != nil {
						t.Error(err)
					}
					return
				default:
				}
				if err := b.Reconfigure(reconf[i%len(reconf)]); err != nil {
					t.Error(err)
					return
				}
				runtime.Gosched()
			}
		})
	}
	for g := range G {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for range M {
				ctx, cancel := context.WithCancel(context.Background())
				if r.IntN(3) == 0 {
					ctx = bulkhead.WithPriority(ctx, bulkhead.Priority(r.IntN(4))+bulkhead.Sheddable)
				}
				if r.IntN(4) == 0 {
					d := time.Duration(r.IntN(300)) * time.Microsecond
					go func() { time.Sleep(d); cancel() }()
				}
				switch r.IntN(5) {
				case 0, 1:
					how := r.IntN(4)
					func() {
						defer func() { recover() }()
						done := make(chan struct{})
						go func() {
							defer close(done)
							func() {
								defer func() {
									if p := recover(); p != nil && p != "boom" {
										panic(p)
									}
								}()
								err := b.Do(ctx, func(context.Context) error {
									c.hold(fixedLimit, t)
									defer c.holders.Add(-1)
									runtime.Gosched()
									switch how {
									case 1:
										return errors.New("x")
									case 2:
										panic("boom")
									case 3:
										runtime.Goexit()
									}
									return nil
								})
								// Goexit never returns here; panic neither.
								if err == nil || err.Error() == "x" {
									c.ok.Add(1)
								} else {
									classify(err, ctx)
								}
							}()
						}()
						<-done
					}()
					// For panic/Goexit we cannot see the result; count them via events.
				case 2:
					if err := b.Acquire(ctx); classify(err, ctx) {
						c.hold(fixedLimit, t)
						runtime.Gosched()
						c.holders.Add(-1)
						b.Release()
					}
				case 3:
					if b.TryAcquire() {
						c.ok.Add(1)
						c.hold(fixedLimit, t)
						c.holders.Add(-1)
						b.Release()
					} else {
						c.full.Add(1)
					}
				case 4:
					p, err := b.AcquirePermit(ctx)
					if classify(err, ctx) {
						c.hold(fixedLimit, t)
						runtime.Gosched()
						c.holders.Add(-1)
						p.Release(nil)
					}
				}
				cancel()
			}
		})
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	s := b.Stats()
	if s.InFlight != 0 || s.Waiting != 0 || s.Permitted != s.Finished {
		t.Fatalf("not at rest: %+v", s)
	}
	if got, want := int64(s.Permitted), c.evPermitted.Load(); got != want {
		t.Errorf("Permitted %d, EventPermitted %d", got, want)
	}
	if got, want := int64(s.Finished), c.evFinished.Load(); got != want {
		t.Errorf("Finished %d, EventFinished %d", got, want)
	}
	if got, want := int64(s.Rejected), c.evRejected.Load(); got != want {
		t.Errorf("Rejected %d, EventRejected %d", got, want)
	}
	if got, want := int64(s.Cancelled), c.evCancelled.Load(); got != want {
		t.Errorf("Cancelled %d, EventCancelled %d", got, want)
	}
	if got, want := int64(s.Rejected), c.full.Load(); got != want {
		t.Errorf("Rejected %d, callers saw %d FullErrors", got, want)
	}
	// every permit is there
	lim := b.Config().MaxConcurrentCalls
	for i := range lim {
		if !b.TryAcquire() {
			t.Fatalf("TryAcquire %d of %d failed at rest: %+v", i, lim, b.Stats())
		}
	}
	if !b.Config().Observe && b.TryAcquire() {
		t.Fatalf("TryAcquire above the limit succeeded: %+v", b.Stats())
	}
	for range lim {
		b.Release()
	}
	t.Logf("stats %+v peak %d", b.Stats(), c.peak.Load())
}

func TestStressRandomCallsKeepLimitAndCounts(t *testing.T) {
	cfgs := map[string]semaphore.Config{
		"nowait":  {MaxConcurrentCalls: 2},
		"wait":    {MaxConcurrentCalls: 2, MaxWaitDuration: 200 * time.Microsecond},
		"lifo":    {MaxConcurrentCalls: 2, MaxWaitDuration: 200 * time.Microsecond, QueueOrder: bulkhead.LIFO, MaxWaitingCalls: 2},
		"codel":   {MaxConcurrentCalls: 2, MaxWaitDuration: 300 * time.Microsecond, CoDel: &bulkhead.CoDel{Target: 20 * time.Microsecond, Interval: 100 * time.Microsecond}},
		"prio":    {MaxConcurrentCalls: 3, MaxWaitDuration: 200 * time.Microsecond, Priorities: &bulkhead.Priorities{Aging: 50 * time.Microsecond}, MaxWaitingCalls: 3},
		"shadow":  {MaxConcurrentCalls: 3, MaxWaitDuration: 200 * time.Microsecond, Shadow: &semaphore.Shadow{MaxConcurrentCalls: 1}},
		"observe": {MaxConcurrentCalls: 2, MaxWaitDuration: 200 * time.Microsecond, Observe: true},
	}
	for name, cfg := range cfgs {
		t.Run(name, func(t *testing.T) {
			lim := int64(cfg.MaxConcurrentCalls)
			if cfg.Observe {
				lim = 0
			}
			stressSem(t, cfg, nil, lim)
		})
	}
}

func TestStressRandomCallsUnderReconfigure(t *testing.T) {
	base := semaphore.Config{MaxConcurrentCalls: 2, MaxWaitDuration: 300 * time.Microsecond}
	re := []semaphore.Config{
		{MaxConcurrentCalls: 1, MaxWaitDuration: 300 * time.Microsecond},
		{MaxConcurrentCalls: 3, MaxWaitDuration: 100 * time.Microsecond, Priorities: &bulkhead.Priorities{Aging: 30 * time.Microsecond}},
		{MaxConcurrentCalls: 2, MaxWaitDuration: 0},
		{MaxConcurrentCalls: 4, MaxWaitDuration: 300 * time.Microsecond, Shadow: &semaphore.Shadow{MaxConcurrentCalls: 2}},
		{MaxConcurrentCalls: 2, MaxWaitDuration: 300 * time.Microsecond, QueueOrder: bulkhead.LIFO, MaxWaitingCalls: 1},
		{MaxConcurrentCalls: 2, MaxWaitDuration: 300 * time.Microsecond, Observe: true},
		{MaxConcurrentCalls: 1, MaxWaitDuration: 300 * time.Microsecond, MinDeadlineSlack: time.Microsecond},
	}
	for i := range 3 {
		t.Run(fmt.Sprint(i), func(t *testing.T) { stressSem(t, base, re, 0) })
	}
}
