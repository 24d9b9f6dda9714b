package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// held runs a call through Do that holds its permit until the returned
// function is called, which waits for the call to end and returns its
// error. It returns once the call has been admitted or refused.
func held(t *testing.T, b *semaphore.Bulkhead) (end func() error) {
	t.Helper()
	in, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- b.Do(context.Background(), func(context.Context) error {
			close(in)
			<-release
			return nil
		})
	}()
	select {
	case <-in:
		return func() error { close(release); return <-done }
	case err := <-done:
		return func() error { return err }
	case <-time.After(10 * time.Second):
		t.Fatal("the call neither ran nor was refused")
		return nil
	}
}

func shadowStats(t *testing.T, b *semaphore.Bulkhead) bulkhead.ShadowStats {
	t.Helper()
	ss, ok := b.ShadowStats()
	if !ok {
		t.Fatal("ShadowStats reports no shadow")
	}
	return ss
}

// The shadow is simulated with a permit carried by each call, not guessed
// from the calls in flight. Shadow limit 1: A runs; B finds the shadow full
// (would be refused) but runs; A ends; C comes while B still runs. The
// naive rule "in flight >= shadow limit" refuses C too (B is running);
// under the shadow B would never have run, so C would have been admitted.
func TestShadowIsExactNotNaive(t *testing.T) {
	b, err := semaphore.New("exact", semaphore.Config{MaxConcurrentCalls: 10, Shadow: &semaphore.Shadow{MaxConcurrentCalls: 1}})
	if err != nil {
		t.Fatal(err)
	}
	naive := 0
	call := func() func() error {
		if b.Stats().InFlight >= 1 {
			naive++
		}
		return held(t, b)
	}
	endA := call()
	endB := call()
	if ss := shadowStats(t, b); ss.WouldReject != 1 || ss.InUse != 1 {
		t.Fatalf("after A and B: %+v, want WouldReject 1, InUse 1", ss)
	}
	endA()
	endC := call()
	ss := shadowStats(t, b)
	if ss.WouldReject != 1 || ss.InUse != 1 || ss.Limit != 1 || ss.Observe {
		t.Fatalf("after C: %+v, want WouldReject 1 (the naive rule counts %d), InUse 1, Limit 1", ss, naive)
	}
	if naive != 2 {
		t.Fatalf("the naive rule counted %d, want 2: the schedule does not show the difference", naive)
	}
	for _, end := range []func() error{endB, endC} {
		if err := end(); err != nil {
			t.Fatal(err)
		}
	}
	if ss := shadowStats(t, b); ss.InUse != 0 {
		t.Fatalf("InUse %d after every call ended, want 0", ss.InUse)
	}
	if st := b.Stats(); st.Rejected != 0 || st.Finished != 3 {
		t.Fatalf("enforced: %+v, want 3 finished, none rejected", st)
	}
}

// The enforced outcome never depends on the shadow: one scripted schedule
// of starts, releases, waits and timeouts gives the same events, in the
// same order, with and without a shadow.
func TestShadowDoesNotChangeEnforcement(t *testing.T) {
	run := func(shadow *semaphore.Shadow) (log []string, ss bulkhead.ShadowStats) {
		synctest.Test(t, func(t *testing.T) {
			b, err := semaphore.New("script", semaphore.Config{MaxConcurrentCalls: 2, MaxWaitDuration: 50 * time.Millisecond,
				MaxWaitingCalls: 2, Shadow: shadow})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			t0 := time.Now()
			b.Subscribe(func(e bulkhead.Event) {
				mu.Lock()
				defer mu.Unlock()
				log = append(log, fmt.Sprintf("%8v %v %v %v %v", e.Time.Sub(t0), e.Type, reason(e.Err), e.Wait, e.Run))
			})
			release := map[string]chan struct{}{}
			start := func(name string) {
				release[name] = make(chan struct{})
				go b.Do(context.Background(), func(context.Context) error { <-release[name]; return nil })
				synctest.Wait()
			}
			end := func(name string) { close(release[name]); synctest.Wait() }
			start("a")
			start("b")
			start("c") // waits
			start("d") // waits
			start("e") // refused: two wait
			time.Sleep(20 * time.Millisecond)
			end("a") // c runs
			time.Sleep(40 * time.Millisecond)
			synctest.Wait() // d timed out
			var p semaphore.Permit
			if b.TryAcquire() { // refused: full
				b.Release()
			}
			end("b")
			p, err = b.AcquirePermit(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			start("f") // refused or waits, then times out
			time.Sleep(60 * time.Millisecond)
			p.Release(nil)
			end("c")
			synctest.Wait()
			if sh, ok := b.ShadowStats(); ok {
				ss = sh
			}
		})
		return log, ss
	}
	// Events of one instant come from several goroutines (a release and
	// the waiter it grants), so each run's are compared as a set of
	// stamped lines.
	plain, _ := run(nil)
	slices.Sort(plain)
	for _, sh := range []*semaphore.Shadow{{MaxConcurrentCalls: 1}, {MaxWaitDuration: 10 * time.Millisecond}, {MaxConcurrentCalls: 1, MaxWaitDuration: time.Millisecond}} {
		got, ss := run(sh)
		slices.Sort(got)
		if strings.Join(got, "\n") != strings.Join(plain, "\n") {
			t.Fatalf("shadow %+v changed the enforced events:\n%s\nwithout a shadow:\n%s", *sh, strings.Join(got, "\n"), strings.Join(plain, "\n"))
		}
		if ss.WouldWait+ss.WouldTimeOut+ss.WouldReject == 0 || ss.InUse != 0 {
			t.Fatalf("shadow %+v: %+v, want some verdicts and nothing in use at the end", *sh, ss)
		}
	}
	if len(plain) < 12 {
		t.Fatalf("the schedule made only %d events:\n%s", len(plain), strings.Join(plain, "\n"))
	}
}

// A shadow with a shorter wait counts the calls that waited longer than it
// (exact: the wait is observed at the grant); a shadow limit with waiting
// counts a call that finds it full as one that would have waited.
func TestShadowWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := semaphore.New("wait", semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Second,
			Shadow: &semaphore.Shadow{MaxWaitDuration: 10 * time.Millisecond}})
		release := make(chan struct{})
		go b.Do(context.Background(), func(context.Context) error { <-release; return nil })
		synctest.Wait()
		done := make(chan error, 2)
		go func() { done <- b.Do(context.Background(), func(context.Context) error { return nil }) }()
		time.Sleep(5 * time.Millisecond)
		go func() { done <- b.Do(context.Background(), func(context.Context) error { return nil }) }()
		time.Sleep(50 * time.Millisecond) // the first waiter has waited 55ms, the second 50ms
		close(release)
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if ss := shadowStats(t, b); ss.WouldTimeOut != 2 || ss.WouldReject != 0 || ss.Limit != 1 {
			t.Fatalf("%+v, want WouldTimeOut 2 and the limit 1", ss)
		}
	})
	b, _ := semaphore.New("wouldwait", semaphore.Config{MaxConcurrentCalls: 3, MaxWaitDuration: time.Second,
		Shadow: &semaphore.Shadow{MaxConcurrentCalls: 1}})
	endA, endB := held(t, b), held(t, b)
	if ss := shadowStats(t, b); ss.WouldWait != 1 || ss.WouldReject != 0 || ss.WouldTimeOut != 0 {
		t.Fatalf("%+v, want WouldWait 1", ss)
	}
	endA()
	endB()
}

// Observe enforces nothing and counts what the configuration would have
// refused; permits of Permit and of a panicking call come back.
func TestObserve(t *testing.T) {
	b, err := semaphore.New("observe", semaphore.Config{MaxConcurrentCalls: 1, Observe: true})
	if err != nil {
		t.Fatal(err)
	}
	var ends []func() error
	for range 3 {
		ends = append(ends, held(t, b))
	}
	p, err := b.AcquirePermit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !b.TryAcquire() {
		t.Fatal("TryAcquire refused while observing")
	}
	ss := shadowStats(t, b)
	if ss.WouldReject != 4 || ss.InUse != 1 || !ss.Observe || ss.Limit != 1 {
		t.Fatalf("%+v, want WouldReject 4 (3 calls past the first, and the bare TryAcquire), InUse 1, Observe", ss)
	}
	b.Release()
	p.Release(nil)
	for _, end := range ends {
		end()
	}
	func() {
		defer func() { recover() }()
		b.Do(context.Background(), func(context.Context) error { panic("boom") })
	}()
	if ss, st := shadowStats(t, b), b.Stats(); ss.InUse != 0 || st.InFlight != 0 || st.Rejected != 0 || st.MaxConcurrentCalls != 1 {
		t.Fatalf("shadow %+v, stats %+v: want nothing in use, nothing refused, the limit 1", ss, st)
	}
	if _, ok := semaphore.New("plain", semaphore.DefaultConfig()); ok != nil {
		t.Fatal(ok)
	}
	plain, _ := semaphore.New("plain", semaphore.DefaultConfig())
	if _, ok := plain.ShadowStats(); ok {
		t.Fatal("ShadowStats reports a shadow for a plain bulkhead")
	}
}

// Reconfigure can turn a shadow on and off; shadow permits held across the
// change come back, and the enforced limit follows the Config.
func TestShadowReconfigure(t *testing.T) {
	cfg := semaphore.Config{MaxConcurrentCalls: 2}
	b, _ := semaphore.New("re", cfg)
	endA := held(t, b) // holds no shadow permit
	cfg.Shadow = &semaphore.Shadow{MaxConcurrentCalls: 1}
	if err := b.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	endB := held(t, b)
	if err := held(t, b)(); !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("third call: %v, want the enforced limit of 2", err)
	}
	cfg.Shadow = nil
	if err := b.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	endA()
	endB()
	cfg.Shadow = &semaphore.Shadow{MaxConcurrentCalls: 1}
	b.Reconfigure(cfg)
	if ss := shadowStats(t, b); ss.InUse != 0 || ss.WouldReject != 0 {
		t.Fatalf("%+v, want the permit B took given back", ss)
	}
}

func TestShadowConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  semaphore.Config
		want string
	}{
		{semaphore.Config{MaxConcurrentCalls: 2, Shadow: &semaphore.Shadow{MaxConcurrentCalls: 3}}, "shadow.maxConcurrentCalls must be from 0 (maxConcurrentCalls) to maxConcurrentCalls 2, got 3"},
		{semaphore.Config{MaxConcurrentCalls: 2, Shadow: &semaphore.Shadow{MaxConcurrentCalls: -1}}, "got -1"},
		{semaphore.Config{MaxConcurrentCalls: 2, MaxWaitDuration: time.Second, Shadow: &semaphore.Shadow{MaxWaitDuration: 2 * time.Second}}, "shadow.maxWaitDuration must be from 0 (maxWaitDuration) to maxWaitDuration 1s, got 2s"},
		{semaphore.Config{MaxConcurrentCalls: 2, Shadow: &semaphore.Shadow{MaxConcurrentCalls: 2}}, "is the enforced limit itself"},
		{semaphore.Config{MaxConcurrentCalls: 2, Shadow: &semaphore.Shadow{}}, "is the enforced limit itself"},
		{semaphore.Config{MaxConcurrentCalls: 2, Observe: true, Shadow: &semaphore.Shadow{MaxConcurrentCalls: 1}}, "observe and shadow: set one"},
		{semaphore.Config{MaxConcurrentCalls: 2, Observe: true, Priorities: &bulkhead.Priorities{}}, "observe and priorities: set one"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	_, err := semaphore.NewKeyed[string]("k", semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: 2, Observe: true}})
	if err == nil || !strings.Contains(err.Error(), "perKey.shadow, perKey.observe") {
		t.Errorf("keyed with observe: %v", err)
	}
}
