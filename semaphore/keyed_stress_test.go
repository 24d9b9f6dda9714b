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

func keyedStress(t *testing.T, cfg semaphore.KeyedConfig, nkeys int, reconf []semaphore.KeyedConfig) {
	k, err := semaphore.NewKeyed[int]("stress", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var evP, evR, evC, evF atomic.Int64
	k.Subscribe(func(e bulkhead.Event) {
		switch e.Type {
		case bulkhead.EventPermitted:
			evP.Add(1)
		case bulkhead.EventRejected:
			evR.Add(1)
		case bulkhead.EventCancelled:
			evC.Add(1)
		case bulkhead.EventFinished:
			evF.Add(1)
		}
	})
	perKey := make([]atomic.Int64, nkeys)
	var total atomic.Int64
	var full, ok atomic.Int64
	fixed := len(reconf) == 0
	hold := func(key int) {
		n := perKey[key].Add(1)
		tt := total.Add(1)
		if fixed && n > int64(cfg.PerKey.MaxConcurrentCalls) {
			t.Errorf("key %d: %d holders > %d", key, n, cfg.PerKey.MaxConcurrentCalls)
		}
		if fixed && cfg.MaxConcurrentCalls > 0 && tt > int64(cfg.MaxConcurrentCalls) {
			t.Errorf("total %d > %d", tt, cfg.MaxConcurrentCalls)
		}
	}
	unhold := func(key int) { perKey[key].Add(-1); total.Add(-1) }
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	if len(reconf) > 0 {
		rwg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					if err := k.Reconfigure(cfg); err != nil {
						t.Error(err)
					}
					return
				default:
				}
				if err := k.Reconfigure(reconf[i%len(reconf)]); err != nil {
					t.Error(err)
					return
				}
				runtime.Gosched()
			}
		})
	}
	const G, M = 8, 400
	var wg sync.WaitGroup
	for g := range G {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 11))
			for range M {
				key := r.IntN(nkeys)
				if r.IntN(2) == 0 {
					key = r.IntN(3) // hot keys
				}
				ctx, cancel := context.WithCancel(context.Background())
				if r.IntN(4) == 0 {
					d := time.Duration(r.IntN(300)) * time.Microsecond
					go func() { time.Sleep(d); cancel() }()
				}
				classify := func(err error) {
					switch {
					case err == nil:
						ok.Add(1)
					case errors.Is(err, bulkhead.ErrBulkheadFull):
						full.Add(1)
					case errors.Is(err, context.Canceled):
					default:
						t.Errorf("unexpected %v", err)
					}
				}
				switch r.IntN(4) {
				case 0, 1:
					how := r.IntN(4)
					done := make(chan struct{})
					go func() {
						defer close(done)
						defer func() {
							if p := recover(); p != nil && p != "boom" {
								panic(p)
							}
						}()
						err := k.Do(ctx, key, func(context.Context) error {
							hold(key)
							defer unhold(key)
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
						if err != nil && err.Error() == "x" {
							err = nil
						}
						classify(err)
					}()
					<-done
				case 2:
					p, err := k.AcquirePermit(ctx, key)
					classify(err)
					if err == nil {
						hold(key)
						runtime.Gosched()
						unhold(key)
						p.Release(nil)
					}
				case 3:
					p, good := k.TryAcquire(key)
					if good {
						ok.Add(1)
						hold(key)
						unhold(key)
						p.Release(nil)
					} else {
						full.Add(1)
					}
				}
				cancel()
			}
		})
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	s := k.Stats()
	ks := k.KeyStats()
	if s.InFlight != 0 || s.Waiting != 0 || s.Permitted != s.Finished || ks.ActiveKeys != 0 {
		t.Fatalf("not at rest: %+v %+v", s, ks)
	}
	if int64(s.Permitted) != evP.Load() || int64(s.Finished) != evF.Load() || int64(s.Rejected) != evR.Load() || int64(s.Cancelled) != evC.Load() {
		t.Errorf("stats %+v vs events P%d R%d C%d F%d", s, evP.Load(), evR.Load(), evC.Load(), evF.Load())
	}
	if int64(s.Rejected) != full.Load() {
		t.Errorf("Rejected %d, callers saw %d", s.Rejected, full.Load())
	}
	// Every key has all its permits, and the total too.
	lim := cfg.PerKey.MaxConcurrentCalls
	if cfg.MaxConcurrentCalls > 0 {
		lim = min(lim, cfg.MaxConcurrentCalls)
	}
	for key := range nkeys {
		var ps []semaphore.KeyedPermit[int]
		for i := range lim {
			p, good := k.TryAcquire(key)
			if !good {
				t.Fatalf("key %d: TryAcquire %d of %d failed at rest: %+v %+v", key, i, lim, k.Stats(), k.KeyStats())
			}
			ps = append(ps, p)
		}
		if _, good := k.TryAcquire(key); good && lim == cfg.PerKey.MaxConcurrentCalls {
			t.Fatalf("key %d: over its limit", key)
		}
		for _, p := range ps {
			p.Release(nil)
		}
	}
	t.Logf("%+v %+v", k.Stats(), k.KeyStats())
}

func TestKeyedStressRandomCallsKeepLimitsAndCounts(t *testing.T) {
	cases := []semaphore.KeyedConfig{
		{PerKey: semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: 300 * time.Microsecond}, MaxConcurrentCalls: 2},
		{PerKey: semaphore.Config{MaxConcurrentCalls: 2, MaxWaitDuration: 300 * time.Microsecond}, MaxConcurrentCalls: 3, MaxActiveKeys: 3},
		{PerKey: semaphore.Config{MaxConcurrentCalls: 2}, MaxConcurrentCalls: 3},
		{PerKey: semaphore.Config{MaxConcurrentCalls: 2, MaxWaitDuration: 300 * time.Microsecond}},
	}
	for i, cfg := range cases {
		for _, nk := range []int{4, 150} {
			t.Run(fmt.Sprint(i, "/", nk), func(t *testing.T) { keyedStress(t, cfg, nk, nil) })
		}
	}
}

func TestKeyedStressRandomCallsUnderReconfigure(t *testing.T) {
	base := semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: 2, MaxWaitDuration: 300 * time.Microsecond}, MaxConcurrentCalls: 3}
	re := []semaphore.KeyedConfig{
		{PerKey: semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: 300 * time.Microsecond}, MaxConcurrentCalls: 1},
		{PerKey: semaphore.Config{MaxConcurrentCalls: 3, MaxWaitDuration: 100 * time.Microsecond}},
		{PerKey: semaphore.Config{MaxConcurrentCalls: 2}, MaxConcurrentCalls: 2, MaxActiveKeys: 2},
	}
	for _, nk := range []int{4, 150} {
		t.Run(fmt.Sprint(nk), func(t *testing.T) { keyedStress(t, base, nk, re) })
	}
}
