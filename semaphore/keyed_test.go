package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

func mustKeyed(t testing.TB, perKey, total int, wait time.Duration) *semaphore.Keyed[string] {
	t.Helper()
	k, err := semaphore.NewKeyed[string]("tenants", semaphore.KeyedConfig{
		PerKey:             semaphore.Config{MaxConcurrentCalls: perKey, MaxWaitDuration: wait},
		MaxConcurrentCalls: total,
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// hold starts a call of key that runs until release is closed, and returns
// once it runs.
func hold(t *testing.T, k *semaphore.Keyed[string], key string, release <-chan struct{}, wg *sync.WaitGroup) {
	t.Helper()
	started := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := k.Do(context.Background(), key, func(context.Context) error {
			close(started)
			<-release
			return nil
		})
		if err != nil {
			t.Errorf("hold %s: %v", key, err)
			close(started)
		}
	}()
	<-started
}

func wantReason(t *testing.T, err error, reason bulkhead.Reason, waited bool) {
	t.Helper()
	var fe *bulkhead.FullError
	if !errors.As(err, &fe) || fe.Reason != reason || fe.Waited != waited || !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("err = %v (%#v), want a FullError with Reason %v, Waited %v", err, fe, reason, waited)
	}
}

func wantKey(t *testing.T, k *semaphore.Keyed[string], key string, inFlight, waiting int) {
	t.Helper()
	if i, w := k.Key(key); i != inFlight || w != waiting {
		t.Fatalf("Key(%q) = %d in flight, %d waiting; want %d, %d", key, i, w, inFlight, waiting)
	}
}

func TestNewKeyedRejectsBadInput(t *testing.T) {
	ok := semaphore.Config{MaxConcurrentCalls: 1}
	cases := []struct {
		name string
		cfg  semaphore.KeyedConfig
		want string
	}{
		{"", semaphore.KeyedConfig{PerKey: ok}, "name must not be empty"},
		{"x\xff", semaphore.KeyedConfig{PerKey: ok}, "not valid UTF-8"},
		{"x", semaphore.KeyedConfig{}, `semaphore "x": perKey.maxConcurrentCalls must be >= 1, got 0`},
		{"x", semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: -1}}, "perKey.maxWaitDuration must be >= 0, got -1ns"},
		{"x", semaphore.KeyedConfig{PerKey: ok, MaxConcurrentCalls: -1}, "maxConcurrentCalls must be 0 (no total) or from 1 to 1048576, got -1"},
		{"x", semaphore.KeyedConfig{PerKey: ok, MaxConcurrentCalls: semaphore.MaxLimit + 1}, "got 1048577"},
		{"x", semaphore.KeyedConfig{PerKey: ok, MaxActiveKeys: -2}, "maxActiveKeys must be from 0 (meaning 65536) to 2147483647, got -2"},
	}
	for _, c := range cases {
		k, err := semaphore.NewKeyed[int](c.name, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || k != nil {
			t.Errorf("NewKeyed(%q, %+v) = %v, %v; want an error containing %q", c.name, c.cfg, k, err, c.want)
		}
	}
	k := mustKeyed(t, 1, 0, 0)
	if err := k.Reconfigure(semaphore.KeyedConfig{}); err == nil || !strings.Contains(err.Error(), "perKey.maxConcurrentCalls") {
		t.Fatalf("Reconfigure(zero) = %v", err)
	}
}

// Per-key and total high-water marks under 64 goroutines over 8 keys: no
// key ever runs more than its limit and all keys together never more than
// the total, and every count is exact afterwards.
func TestKeyedNeverExceeds(t *testing.T) {
	const perKey, total, keys, goroutines = 3, 10, 8, 64
	calls := 300
	if testing.Short() {
		calls = 50
	}
	k := mustKeyed(t, perKey, total, time.Hour)
	var all atomic.Int64
	var per [keys]atomic.Int64
	var highAll atomic.Int64
	var highPer [keys]atomic.Int64
	raise := func(c, high *atomic.Int64) {
		n := c.Add(1)
		for h := high.Load(); n > h && !high.CompareAndSwap(h, n); h = high.Load() {
		}
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				key := (g + i) % keys
				err := k.Do(context.Background(), fmt.Sprint(key), func(context.Context) error {
					raise(&all, &highAll)
					raise(&per[key], &highPer[key])
					runtime.Gosched()
					per[key].Add(-1)
					all.Add(-1)
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if h := highAll.Load(); h > total {
		t.Errorf("all keys together ran %d at once, total is %d", h, total)
	}
	for i := range keys {
		if h := highPer[i].Load(); h > perKey {
			t.Errorf("key %d ran %d at once, limit is %d", i, h, perKey)
		}
	}
	s, ks := k.Stats(), k.KeyStats()
	want := uint64(goroutines * calls)
	if s.Permitted != want || s.Finished != want || s.InFlight != 0 || s.Waiting != 0 || s.Rejected != 0 || ks.ActiveKeys != 0 {
		t.Fatalf("after the run: %+v %+v", s, ks)
	}
}

// A caller that holds its key's permit and waits for the total holds only
// that permit, and a caller waiting for its key holds nothing.
func TestKeyedWaitForTotalHoldsOnlyKey(t *testing.T) {
	k := mustKeyed(t, 2, 3, time.Hour)
	release := make(chan struct{})
	var wg sync.WaitGroup
	hold(t, k, "A", release, &wg)
	hold(t, k, "A", release, &wg)
	// A third call of A waits for A's permit and takes none of the total.
	aDone := make(chan error, 1)
	go func() { aDone <- k.Do(context.Background(), "A", func(context.Context) error { return nil }) }()
	waitFor(t, "A's third call to wait", func() bool { return k.Stats().Waiting == 1 })
	wantKey(t, k, "A", 2, 1)
	// B takes the total's last permit: A's waiter did not hold it.
	bRelease := make(chan struct{})
	hold(t, k, "B", bRelease, &wg)
	// Now the total is full: another B takes B's permit and waits for the total.
	bDone := make(chan error, 1)
	go func() { bDone <- k.Do(context.Background(), "B", func(context.Context) error { return nil }) }()
	waitFor(t, "B's second call to wait", func() bool { return k.Stats().Waiting == 2 })
	wantKey(t, k, "B", 1, 1)
	if s := k.Stats(); s.InFlight != 3 || s.AvailableConcurrentCalls != 0 {
		t.Fatalf("stats: %+v", s)
	}
	// B's key permit is held by the waiter: a third B call finds B full.
	if _, ok := k.TryAcquire("B"); ok {
		t.Fatal("TryAcquire(B) succeeded with B's two permits held")
	}
	close(bRelease) // B's first call ends: the total's permit goes to B's waiter
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if ks := k.KeyStats(); ks.ActiveKeys != 0 || ks.RejectedKey != 1 {
		t.Fatalf("key stats: %+v", ks)
	}
}

// Callers waiting for the total are served round-robin across keys, first
// in, first out within a key.
func TestKeyedTotalRoundRobin(t *testing.T) {
	k := mustKeyed(t, 4, 1, time.Hour)
	c, ok := k.TryAcquire("C")
	if !ok {
		t.Fatal("TryAcquire(C) failed")
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i, name := range []string{"A1", "A2", "A3", "B1"} {
		wg.Go(func() {
			err := k.Do(context.Background(), name[:1], func(context.Context) error {
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
		waitFor(t, name+" to wait", func() bool { return k.Stats().Waiting == i+1 })
	}
	wantKey(t, k, "A", 0, 3)
	c.Release(nil)
	wg.Wait()
	if want := []string{"A1", "B1", "A2", "A3"}; !slices.Equal(order, want) {
		t.Fatalf("grant order %v, want %v", order, want)
	}
}

// Waiters for a key's permit are served first in, first out, and a
// newcomer does not pass them.
func TestKeyedFIFOWithinKey(t *testing.T) {
	k := mustKeyed(t, 1, 0, time.Hour)
	p, _ := k.TryAcquire("A")
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			k.Do(context.Background(), "A", func(context.Context) error {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				return nil
			})
		})
		waitFor(t, "a waiter", func() bool { return k.Stats().Waiting == i+1 })
	}
	if _, ok := k.TryAcquire("A"); ok {
		t.Fatal("TryAcquire passed the waiters")
	}
	p.Release(nil)
	wg.Wait()
	if !slices.Equal(order, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("order %v", order)
	}
}

// An entry goes away exactly when nothing holds or waits for its key, with
// no decrement lost, whatever mix of success, refusal, cancellation and
// waits churns through the keys.
func TestKeyedEvictionIsExact(t *testing.T) {
	k := mustKeyed(t, 2, 0, 0)
	held := []semaphore.KeyedPermit[string]{}
	for _, key := range []string{"x", "y", "z"} {
		p, ok := k.TryAcquire(key)
		if !ok {
			t.Fatal(key)
		}
		held = append(held, p)
	}
	for i := range 10_000 {
		key := fmt.Sprint("churn-", i)
		if err := k.Do(context.Background(), key, func(context.Context) error {
			if n := k.KeyStats().ActiveKeys; n != 4 {
				t.Fatalf("inside call %d: %d active keys, want 4", i, n)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n := k.KeyStats().ActiveKeys; n != 3 {
			t.Fatalf("after call %d: %d active keys, want 3", i, n)
		}
	}
	wantKey(t, k, "churn-5", 0, 0)
	wantKey(t, k, "x", 1, 0)
	for _, p := range held {
		p.Release(nil)
	}
	if ks := k.KeyStats(); ks.ActiveKeys != 0 || ks.IdleKeys != 64 || ks.Evicted != 10_003-64 {
		t.Fatalf("key stats: %+v", ks)
	}

	// Many goroutines on few keys with short waits, cancellations and
	// refusals: afterwards no key is stuck, every key admits its limit.
	k = mustKeyed(t, 2, 3, time.Hour)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 300 {
				key := fmt.Sprint((g * i) % 5)
				ctx, cancel := context.WithCancel(context.Background())
				if i%3 == 0 {
					cancel()
				}
				switch i % 4 {
				case 0:
					if p, ok := k.TryAcquire(key); ok {
						p.Release(nil)
					}
				case 1:
					p, err := k.AcquirePermit(ctx, key)
					if err == nil {
						p.Release(errors.New("x"))
					}
				default:
					go cancel() // may end the wait at any point
					k.Do(ctx, key, func(context.Context) error { runtime.Gosched(); return nil })
				}
				cancel()
			}
		})
	}
	wg.Wait()
	s, ks := k.Stats(), k.KeyStats()
	if s.InFlight != 0 || s.Waiting != 0 || ks.ActiveKeys != 0 || s.Permitted != s.Finished {
		t.Fatalf("after the churn: %+v %+v", s, ks)
	}
	for key := range 5 {
		p1, ok1 := k.TryAcquire(fmt.Sprint(key))
		p2, ok2 := k.TryAcquire(fmt.Sprint(key))
		if !ok1 || !ok2 {
			t.Fatalf("key %d does not admit its limit of 2", key)
		}
		p1.Release(nil)
		p2.Release(nil)
	}
}

func TestKeyedMaxActiveKeys(t *testing.T) {
	k, err := semaphore.NewKeyed[string]("tenants", semaphore.KeyedConfig{
		PerKey: semaphore.Config{MaxConcurrentCalls: 2, MaxWaitDuration: time.Hour}, MaxActiveKeys: 3})
	if err != nil {
		t.Fatal(err)
	}
	var ps []semaphore.KeyedPermit[string]
	for _, key := range []string{"a", "b", "c"} {
		p, ok := k.TryAcquire(key)
		if !ok {
			t.Fatal(key)
		}
		ps = append(ps, p)
	}
	// A new key is refused at once, even by a caller that may wait.
	err = k.Do(context.Background(), "d", func(context.Context) error { return nil })
	wantReason(t, err, bulkhead.ReasonKeys, false)
	if got := err.Error(); got != `bulkhead "tenants" (semaphore) is full: too many active keys (maxActiveKeys 3)` {
		t.Fatalf("error text %q", got)
	}
	wantKey(t, k, "d", 0, 0)
	// The active keys are not disturbed.
	if err := k.Do(context.Background(), "a", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ps[2].Release(nil) // c goes away: d fits
	if err := k.Do(context.Background(), "d", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ps[0].Release(nil)
	ps[1].Release(nil)
	if ks := k.KeyStats(); ks.RejectedKeys != 1 || ks.ActiveKeys != 0 || k.Stats().Rejected != 1 {
		t.Fatalf("key stats %+v, stats %+v", ks, k.Stats())
	}
}

func TestKeyedRejectionReasons(t *testing.T) {
	k := mustKeyed(t, 1, 2, 0)
	a, _ := k.TryAcquire("A")
	_, err := k.AcquirePermit(context.Background(), "A")
	wantReason(t, err, bulkhead.ReasonKey, false)
	if got := err.Error(); got != `bulkhead "tenants" (semaphore) is full (maxConcurrentCalls 1) for this key` {
		t.Fatalf("error text %q", got)
	}
	b, _ := k.TryAcquire("B")
	err = k.Do(context.Background(), "C", func(context.Context) error { return nil })
	wantReason(t, err, bulkhead.ReasonTotal, false)
	if got := err.Error(); got != `bulkhead "tenants" (semaphore) is full (maxConcurrentCalls 2) in total` {
		t.Fatalf("error text %q", got)
	}
	// The refused key is not active: its entry went to the idle cache for
	// reuse (refused at once, it holds and waits for nothing).
	if ks := k.KeyStats(); ks.ActiveKeys != 2 || ks.IdleKeys != 1 || ks.Evicted != 0 {
		t.Fatalf("after refusing C: key stats %+v, want A and B active and C's entry idle", ks)
	}
	a.Release(nil)
	b.Release(nil)
	ks := k.KeyStats()
	if ks.RejectedKey != 1 || ks.RejectedTotal != 1 || ks.ActiveKeys != 0 || k.Stats().Rejected != 2 {
		t.Fatalf("key stats %+v", ks)
	}
	// A rejection allocates nothing.
	a, _ = k.TryAcquire("A")
	fn := func(context.Context) error { return nil }
	if n := testing.AllocsPerRun(100, func() { k.Do(context.Background(), "A", fn) }); n != 0 {
		t.Fatalf("a rejection allocates %v times", n)
	}
	a.Release(nil)
}

// MaxWaitDuration bounds the whole wait; the reason says which permit did
// not come.
func TestKeyedWaitTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := mustKeyed(t, 1, 1, 10*time.Millisecond)
		a, _ := k.TryAcquire("A")
		start := time.Now()
		err := k.Do(context.Background(), "A", func(context.Context) error { return nil })
		wantReason(t, err, bulkhead.ReasonKey, true)
		if d := time.Since(start); d != 10*time.Millisecond {
			t.Fatalf("waited %v", d)
		}
		_, err = k.AcquirePermit(context.Background(), "B")
		wantReason(t, err, bulkhead.ReasonTotal, true)
		if got := err.Error(); got != `bulkhead "tenants" (semaphore) is full (maxConcurrentCalls 1) in total: no permit within 10ms` {
			t.Fatalf("error text %q", got)
		}
		wantKey(t, k, "B", 0, 0) // the key permit it held while waiting went back
		a.Release(nil)
		if ks := k.KeyStats(); ks.ActiveKeys != 0 || ks.RejectedKey != 1 || ks.RejectedTotal != 1 {
			t.Fatalf("key stats %+v", ks)
		}
	})
}

// A caller whose context ends while it waits for the total gets ctx.Err(),
// and its key permit goes to the next caller of its key.
func TestKeyedCancelWhileWaitingForTotal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := mustKeyed(t, 1, 1, time.Hour)
		x, _ := k.TryAcquire("X")
		ctx, cancel := context.WithCancel(context.Background())
		first := make(chan error, 1)
		go func() { first <- k.Do(ctx, "A", func(context.Context) error { return nil }) }()
		synctest.Wait()
		second := make(chan error, 1)
		go func() { second <- k.Do(context.Background(), "A", func(context.Context) error { return nil }) }()
		synctest.Wait()
		wantKey(t, k, "A", 0, 2)
		cancel()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Fatalf("first: %v", err)
		}
		synctest.Wait()
		wantKey(t, k, "A", 0, 1) // the second now holds A's permit, waiting for the total
		x.Release(nil)
		if err := <-second; err != nil {
			t.Fatal(err)
		}
		if s := k.Stats(); s.Cancelled != 1 || s.Permitted != 2 || s.Finished != 2 || k.KeyStats().ActiveKeys != 0 {
			t.Fatalf("stats %+v", s)
		}
		if _, err := k.AcquirePermit(ctx, "A"); !errors.Is(err, context.Canceled) || k.Stats().Cancelled != 1 {
			t.Fatalf("an ended context: %v, counted %d", err, k.Stats().Cancelled)
		}
	})
}

// Reconfigure never blocks: smaller limits let the calls in flight finish,
// larger ones admit waiters at once.
func TestKeyedReconfigureWhileHeld(t *testing.T) {
	cfg := func(perKey, total int) semaphore.KeyedConfig {
		return semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: perKey, MaxWaitDuration: time.Hour}, MaxConcurrentCalls: total}
	}
	t.Run("smaller key limit", func(t *testing.T) {
		k := mustKeyed(t, 2, 0, 0)
		a1, _ := k.TryAcquire("A")
		a2, _ := k.TryAcquire("A")
		if err := k.Reconfigure(cfg(1, 0)); err != nil {
			t.Fatal(err)
		}
		a1.Release(nil)
		if _, ok := k.TryAcquire("A"); ok {
			t.Fatal("admitted with 1 held at a limit of 1")
		}
		a2.Release(nil)
		p, ok := k.TryAcquire("A")
		if !ok {
			t.Fatal("refused with none held")
		}
		p.Release(nil)
	})
	t.Run("larger limits admit waiters", func(t *testing.T) {
		k := mustKeyed(t, 1, 1, time.Hour)
		a, _ := k.TryAcquire("A")
		var wg sync.WaitGroup
		var ran atomic.Int32
		for _, key := range []string{"A", "B"} {
			wg.Go(func() {
				if err := k.Do(context.Background(), key, func(context.Context) error { ran.Add(1); return nil }); err != nil {
					t.Error(err)
				}
			})
		}
		waitFor(t, "two waiters", func() bool { return k.Stats().Waiting == 2 })
		wantKey(t, k, "A", 1, 1)
		wantKey(t, k, "B", 0, 1)
		if err := k.Reconfigure(cfg(2, 0)); err != nil { // no total any more
			t.Fatal(err)
		}
		wg.Wait() // both ran while A's first permit is still held
		if ran.Load() != 2 || k.Stats().MaxConcurrentCalls != 0 {
			t.Fatalf("ran %d, stats %+v", ran.Load(), k.Stats())
		}
		a.Release(nil)
	})
}

func TestKeyedSmallerTotalRefuses(t *testing.T) {
	k := mustKeyed(t, 2, 3, 0)
	ps := []semaphore.KeyedPermit[string]{}
	for _, key := range []string{"A", "B", "C"} {
		p, _ := k.TryAcquire(key)
		ps = append(ps, p)
	}
	if err := k.Reconfigure(semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: 2}, MaxConcurrentCalls: 1}); err != nil {
		t.Fatal(err)
	}
	ps[0].Release(nil)
	ps[1].Release(nil)
	if _, ok := k.TryAcquire("D"); ok {
		t.Fatal("admitted with 1 running at a total of 1")
	}
	ps[2].Release(nil)
	p, ok := k.TryAcquire("D")
	if !ok {
		t.Fatal("refused with none running")
	}
	p.Release(nil)
	if s := k.Stats(); s.MaxConcurrentCalls != 1 || s.Rejected != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestKeyedPanicAndGoexitReleases(t *testing.T) {
	k := mustKeyed(t, 1, 1, 0)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v", r)
			}
		}()
		k.Do(context.Background(), "A", func(context.Context) error { panic("boom") })
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.Do(context.Background(), "A", func(context.Context) error { runtime.Goexit(); return nil })
	}()
	<-done
	if s := k.Stats(); s.InFlight != 0 || s.Failed != 2 || s.Finished != 2 || k.KeyStats().ActiveKeys != 0 {
		t.Fatalf("stats %+v", s)
	}
	v, err := semaphore.ExecuteKeyed(context.Background(), k, "A", func(context.Context) (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Fatalf("ExecuteKeyed = %v, %v", v, err)
	}
}

func TestKeyedMisusePanics(t *testing.T) {
	k := mustKeyed(t, 1, 0, 0)
	var zero semaphore.Keyed[string]
	cases := map[string]func(){
		"semaphore: Keyed.Do called with a nil function":              func() { k.Do(context.Background(), "a", nil) },
		"semaphore: Keyed.Do called with a nil Context":               func() { k.Do(nil, "a", func(context.Context) error { return nil }) },
		"semaphore: ExecuteKeyed called with a nil function":          func() { semaphore.ExecuteKeyed[string, int](context.Background(), k, "a", nil) },
		"semaphore: Keyed.AcquirePermit called with a nil Context":    func() { k.AcquirePermit(nil, "a") },
		"semaphore: Keyed.Subscribe called with a nil function":       func() { k.Subscribe(nil) },
		"semaphore: KeyedPermit.Release called on a zero KeyedPermit": func() { semaphore.KeyedPermit[string]{}.Release(nil) },
		"semaphore: Keyed used without NewKeyed":                      func() { zero.TryAcquire("a") },
		"semaphore: KeyedPermit.Release called twice": func() {
			p, _ := k.TryAcquire("a")
			p.Release(nil)
			p.Release(nil)
		},
	}
	for want, f := range cases {
		func() {
			defer func() {
				if r := recover(); r != want {
					t.Errorf("panic %v, want %q", r, want)
				}
			}()
			f()
		}()
	}
	if _, ok := k.TryAcquire("a"); !ok { // the bulkhead still works
		t.Fatal("TryAcquire after the panics failed")
	}
}

func TestKeyedEvents(t *testing.T) {
	k := mustKeyed(t, 1, 1, 0)
	var got []string
	cancel := k.Subscribe(func(e bulkhead.Event) {
		if e.Name != "tenants" || e.Kind != bulkhead.Semaphore || e.Time.IsZero() {
			t.Errorf("event %+v", e)
		}
		s := e.Type.String()
		if e.Type == bulkhead.EventLimitChanged {
			s += fmt.Sprint(e.Limit)
		}
		got = append(got, s)
	})
	k.Do(context.Background(), "A", func(context.Context) error {
		k.Do(context.Background(), "A", func(context.Context) error { return nil })
		return errors.New("x")
	})
	k.Reconfigure(semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: 1}, MaxConcurrentCalls: 5})
	cancel()
	k.Do(context.Background(), "A", func(context.Context) error { return nil })
	want := []string{"permitted", "rejected", "finished", "limit changed5"}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if s := k.Stats(); s.Failed != 1 || s.Finished != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// A subscriber that panics on EventPermitted does not strand the permits.
func TestKeyedPanickingSubscriber(t *testing.T) {
	k := mustKeyed(t, 1, 1, 0)
	k.Subscribe(func(e bulkhead.Event) {
		if e.Type == bulkhead.EventPermitted {
			panic("subscriber")
		}
	})
	func() {
		defer func() { recover() }()
		k.Do(context.Background(), "A", func(context.Context) error { t.Fatal("ran"); return nil })
	}()
	if s := k.Stats(); s.InFlight != 0 || k.KeyStats().ActiveKeys != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A key's calls after its first allocate nothing, and a new key reuses a
// spare entry. (That the map of keys shrinks back after a flood is tested
// in keyed_internal_test.go.)
func TestKeyedAllocations(t *testing.T) {
	k := mustKeyed(t, 4, 100, 0)
	fn := func(context.Context) error { return nil }
	ctx := context.Background()
	k.Do(ctx, "hot", fn)
	if n := testing.AllocsPerRun(1000, func() { k.Do(ctx, "hot", fn) }); n != 0 {
		t.Fatalf("Do of a known key allocates %v times", n)
	}
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() { k.Do(ctx, keys[i%len(keys)], fn); i++ }); n != 0 {
		t.Fatalf("Do of a new key allocates %v times", n)
	}
}

// TestKeyedStressBounds runs callers of hot keys and of a churn of keys
// (more than MaxActiveKeys and than the idle entries kept, so keys are
// refused and entries evicted and recycled) through Do, TryAcquire and
// AcquirePermit, with cancellations and a Reconfigure going back and forth,
// and checks from inside the guarded work that no key ever ran over its
// limit, all keys together over the total, or more keys at once than
// MaxActiveKeys (each bound the larger of the two configurations'). At
// rest every admission and refusal is counted exactly once (a call whose
// context ended before it began is not counted cancelled).
func TestKeyedStressBounds(t *testing.T) {
	const (
		goroutines, hot, churn = 32, 6, 1000
		maxKeys                = 4 // below the total, so that it binds
	)
	calls := 400
	if testing.Short() {
		calls = 100
	}
	cfgA := semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: 2, MaxWaitDuration: time.Millisecond},
		MaxConcurrentCalls: 5, MaxActiveKeys: maxKeys}
	cfgB := semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: 3, MaxWaitDuration: time.Millisecond},
		MaxConcurrentCalls: 4, MaxActiveKeys: maxKeys - 1}
	k, err := semaphore.NewKeyed[string]("stress", cfgA)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu                        sync.Mutex
		per                       = map[string]int{}
		all, keys                 int
		highPer, highAll, highKey int
		ok, full, cancelled       atomic.Uint64
	)
	enter := func(key string) {
		mu.Lock()
		defer mu.Unlock()
		per[key]++
		all++
		if per[key] == 1 {
			keys++
		}
		highPer, highAll, highKey = max(highPer, per[key]), max(highAll, all), max(highKey, keys)
	}
	leave := func(key string) {
		mu.Lock()
		defer mu.Unlock()
		per[key]--
		all--
		if per[key] == 0 {
			keys--
			delete(per, key)
		}
	}
	work := func(key string) { enter(key); runtime.Gosched(); leave(key) }
	count := func(err error) {
		switch {
		case err == nil:
			ok.Add(1)
		case errors.Is(err, bulkhead.ErrBulkheadFull):
			full.Add(1)
		case errors.Is(err, context.Canceled):
			cancelled.Add(1)
		default:
			t.Error(err)
		}
	}
	stop := make(chan struct{})
	var reconf sync.WaitGroup
	reconf.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cfg := cfgA
			if i%2 == 1 {
				cfg = cfgB
			}
			if err := k.Reconfigure(cfg); err != nil {
				t.Error(err)
			}
			time.Sleep(200 * time.Microsecond)
		}
	})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				key := fmt.Sprint("hot-", (g+i)%hot)
				if i%3 != 0 {
					key = fmt.Sprint("churn-", (g*calls+i)%churn)
				}
				ctx, cancel := context.WithCancel(context.Background())
				if i%7 == 0 {
					go cancel() // may end a wait at any point
				}
				switch i % 4 {
				case 0:
					if p, acquired := k.TryAcquire(key); acquired {
						ok.Add(1)
						work(key)
						p.Release(nil)
					} else {
						full.Add(1)
					}
				case 1:
					p, err := k.AcquirePermit(ctx, key)
					if err == nil {
						work(key)
						p.Release(errors.New("x"))
					}
					count(err)
				default:
					count(k.Do(ctx, key, func(context.Context) error { work(key); return nil }))
				}
				cancel()
			}
		})
	}
	wg.Wait()
	close(stop)
	reconf.Wait()
	if highPer > 3 || highAll > 5 || highKey > maxKeys {
		t.Errorf("high-water marks: %d calls of one key (limit 3), %d in all (total 5), %d keys (MaxActiveKeys %d)",
			highPer, highAll, highKey, maxKeys)
	}
	if highAll < 4 || highPer < 2 {
		t.Errorf("too little contention to prove anything: high-water %d in all, %d per key", highAll, highPer)
	}
	s, ks := k.Stats(), k.KeyStats()
	n := uint64(goroutines * calls)
	if s.InFlight != 0 || s.Waiting != 0 || ks.ActiveKeys != 0 || ks.IdleKeys > 64 ||
		s.Permitted != ok.Load() || s.Finished != ok.Load() || s.Rejected != full.Load() || s.Cancelled > cancelled.Load() ||
		ok.Load()+full.Load()+cancelled.Load() != n || ks.RejectedKey+ks.RejectedTotal+ks.RejectedKeys != s.Rejected {
		t.Fatalf("at rest: %+v %+v; counted %d ok, %d full, %d cancelled of %d", s, ks, ok.Load(), full.Load(), cancelled.Load(), n)
	}
	if ks.Evicted == 0 || ks.RejectedKeys == 0 {
		t.Fatalf("no eviction or no refused key: %+v", ks)
	}
	k.Reconfigure(cfgA)
	for i := range hot {
		key := fmt.Sprint("hot-", i)
		p1, ok1 := k.TryAcquire(key)
		p2, ok2 := k.TryAcquire(key)
		if !ok1 || !ok2 {
			t.Fatalf("%s does not admit its limit of 2", key)
		}
		p1.Release(nil)
		p2.Release(nil)
	}
}
