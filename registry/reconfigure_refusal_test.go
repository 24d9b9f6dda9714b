package registry

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/pool"
)

// A pool refuses Priorities switched on or off by Reconfigure; the plan
// step refuses it first, so the refused Reconfigure changes nothing: not
// the configuration, not the other bulkheads' limits.
func TestReconfigureRefusesPoolPrioritiesSwitchBeforeChangingAnything(t *testing.T) {
	r, err := New(Config{Pools: map[string]PoolSpec{"mail": {MaxWorkers: new(2)}},
		Semaphores: map[string]SemaphoreSpec{"payment": {MaxConcurrentCalls: new(2)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	err = r.Reconfigure(Config{Pools: map[string]PoolSpec{"mail": {MaxWorkers: new(3), Priorities: &bulkhead.Priorities{}}},
		Semaphores: map[string]SemaphoreSpec{"payment": {MaxConcurrentCalls: new(5)}}})
	if err == nil || !strings.Contains(err.Error(), `pool "mail" plain with priorities`) {
		t.Errorf("Reconfigure switching mail's priorities on = %v, want a refusal naming them", err)
	}
	s, _ := r.Semaphore("payment")
	p, _ := r.Pool("mail")
	if got := s.Config().MaxConcurrentCalls; got != 2 {
		t.Errorf("the refused Reconfigure changed payment's limit to %d: half-applied", got)
	}
	if got := p.Config().MaxWorkers; got != 2 {
		t.Errorf("the refused Reconfigure changed mail's maxWorkers to %d", got)
	}
	if _, _, ok := r.res.Pool("mail"); !ok {
		t.Error("the refused configuration was installed")
	}
}

// A keyed pool refuses Priorities (pool.KeyedConfig.Validate); Reconfigure
// of a live keyed pool checks it before changing anything.
func TestReconfigureRefusesKeyedPoolPrioritiesBeforeChangingAnything(t *testing.T) {
	r, err := New(Config{Pools: map[string]PoolSpec{"k": {MaxWorkers: new(4), MaxRunningPerKey: new(1)}},
		Semaphores: map[string]SemaphoreSpec{"s": {MaxConcurrentCalls: new(2)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	err = r.Reconfigure(Config{Pools: map[string]PoolSpec{"k": {MaxWorkers: new(4), MaxRunningPerKey: new(1), Priorities: &bulkhead.Priorities{}}},
		Semaphores: map[string]SemaphoreSpec{"s": {MaxConcurrentCalls: new(7)}}})
	if err == nil {
		t.Error("Reconfigure gave a keyed pool priorities")
	}
	if s, _ := r.Semaphore("s"); s.Config().MaxConcurrentCalls != 2 {
		t.Errorf("Reconfigure failed (%v) after giving s the new limit %d", err, s.Config().MaxConcurrentCalls)
	}
}

// Through Follow: the file that switches a pool's priorities on is refused
// and changes nothing, so putting the old file back leaves every limit as
// that file says.
func TestFollowRefusedPrioritiesSwitchLeavesOldFileInForce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const v1 = "resilience4j:\n  bulkhead.instances.payment: {maxConcurrentCalls: 2, maxWaitDuration: 0}\n" +
			"  thread-pool-bulkhead.instances.mail: {maxThreadPoolSize: 2}\n"
		const v2 = "resilience4j:\n  bulkhead.instances.payment: {maxConcurrentCalls: 5, maxWaitDuration: 0}\n" +
			"  thread-pool-bulkhead.instances.mail: {maxThreadPoolSize: 2, priorities: {}}\n"
		path := filepath.Join(t.TempDir(), "application.yml")
		write(t, path, v1)
		r, tick, stop := following(t, path)
		defer stop()
		write(t, path, v2)
		tick()
		if st := r.reloadStatus(); st.Refused != 1 || limitOf(t, r) != 2 {
			t.Errorf("after v2: payment %d, refused %d (%q), want 2 and 1", limitOf(t, r), st.Refused, st.LastError)
		}
		write(t, path, v1)
		tick()
		tick()
		if got := limitOf(t, r); got != 2 {
			t.Errorf("the file is back to maxConcurrentCalls 2 and Follow reports no error (%q), but payment's limit is %d", r.reloadStatus().LastError, got)
		}
	})
}

// keepAliveRefusing is a pool whose ReconfigureFunc refuses a new
// KeepAlive, as a pool does when it cannot start its new ants pool: the
// one refusal that only applying can find.
type keepAliveRefusing struct{ *pool.Bulkhead }

func (p keepAliveRefusing) ReconfigureFunc(f func(pool.Config) (pool.Config, bool)) error {
	var refused bool
	err := p.Bulkhead.ReconfigureFunc(func(cur pool.Config) (pool.Config, bool) {
		next, ok := f(cur)
		if refused = ok && next.KeepAlive != cur.KeepAlive; refused {
			return cur, false
		}
		return next, ok
	})
	if refused {
		return errors.New("cannot start workers with the new keepAlive")
	}
	return err
}

// A file that Reconfigure applies only in part (a pool refusing its new
// keepAlive after the other bulkheads got their limits) is counted refused,
// and Follow applies the next content in full, even the file in force
// before it: restoring the old file restores its limits.
func TestFollowReappliesOldFileAfterPartialApply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const v1 = "resilience4j:\n  bulkhead.instances.payment: {maxConcurrentCalls: 2, maxWaitDuration: 0}\n" +
			"  thread-pool-bulkhead.instances.mail: {maxThreadPoolSize: 2}\n"
		const v2 = "resilience4j:\n  bulkhead.instances.payment: {maxConcurrentCalls: 5, maxWaitDuration: 0}\n" +
			"  thread-pool-bulkhead.instances.mail: {maxThreadPoolSize: 2, keepAliveDuration: 1m}\n"
		path := filepath.Join(t.TempDir(), "application.yml")
		write(t, path, v1)
		r, tick, stop := following(t, path)
		defer stop()
		r.mu.Lock()
		e := r.entries[key{bulkhead.Pool, "mail"}]
		e.b = keepAliveRefusing{e.b.(*pool.Bulkhead)}
		r.mu.Unlock()
		write(t, path, v2)
		tick()
		st := r.reloadStatus()
		if st.Refused != 1 || !strings.Contains(st.LastError, "new keepAlive") || limitOf(t, r) != 5 {
			t.Fatalf("after v2: payment %d, refused %d, last error %q; want 5 (applied in part), 1 and the pool's refusal", limitOf(t, r), st.Refused, st.LastError)
		}
		tick() // v2 again: counted once
		write(t, path, v1)
		tick()
		if got := limitOf(t, r); got != 2 {
			t.Errorf("the file is back to maxConcurrentCalls 2, but payment's limit is %d (Follow took v1 for the content in force)", got)
		}
		if st := r.reloadStatus(); st.Applied != 2 || st.Refused != 1 {
			t.Errorf("applied %d, refused %d; want 2 (v1 twice) and 1", st.Applied, st.Refused)
		}
	})
}
