package registry

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const every = time.Second

func limits(n int) string {
	return "resilience4j.bulkhead.instances:\n  payment: {maxConcurrentCalls: " + itoa(n) + ", maxWaitDuration: 0}\n"
}

func itoa(n int) string { return strconv.Itoa(n) }

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// following starts Follow on a registry made from path's file, in a
// synctest bubble, and returns the registry, a function that advances the
// fake clock by one interval and waits until Follow is idle again, and a
// function that stops Follow and returns its error.
func following(t *testing.T, path string) (*Registry, func(), func() error) {
	t.Helper()
	c, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Follow(ctx, path, every) }()
	synctest.Wait()
	tick := func() { time.Sleep(every); synctest.Wait() }
	stop := func() error {
		cancel()
		err := <-done
		_ = r.Close(context.Background())
		return err
	}
	return r, tick, stop
}

func limitOf(t *testing.T, r *Registry) int {
	t.Helper()
	b, err := r.Semaphore("payment")
	if err != nil {
		t.Fatal(err)
	}
	return b.Config().MaxConcurrentCalls
}

func reloadCount(t *testing.T, r *Registry, result string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	unregister, err := r.RegisterMetrics(reg, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "bulkhead_config_reloads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

func TestFollowAppliesChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "application.yml")
		write(t, path, limits(2))
		r, tick, stop := following(t, path)
		write(t, path, limits(5))
		if limitOf(t, r) != 2 {
			t.Fatal("applied before the interval passed")
		}
		tick()
		if got := limitOf(t, r); got != 5 {
			t.Fatalf("limit %d after the change, want 5", got)
		}
		tick() // unchanged content: not counted again
		if got := reloadCount(t, r, "applied"); got != 2 {
			t.Errorf("applied %v, want 2 (the first read and the change)", got)
		}
		rec := httptest.NewRecorder()
		r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		var st struct{ Reload reloads }
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || st.Reload.LastApplied.IsZero() || st.Reload.Path != path || st.Reload.Applied != 2 {
			t.Errorf("status %s (%v)", rec.Body, err)
		}
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Errorf("Follow returned %v, want context.Canceled", err)
		}
	})
}

// TestFollowConfigMapSwap: the kubelet's atomic writer swaps the ..data
// symlink; the file's own path never changes.
func TestFollowConfigMapSwap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		mk := func(version string, n int) {
			if err := os.Mkdir(filepath.Join(dir, version), 0o700); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, version, "application.yml"), limits(n))
		}
		mk("..2026_01_01_v1", 2)
		if err := os.Symlink("..2026_01_01_v1", filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "application.yml")
		if err := os.Symlink(filepath.Join("..data", "application.yml"), path); err != nil {
			t.Fatal(err)
		}
		r, tick, stop := following(t, path)
		mk("..2026_01_02_v2", 7)
		if err := os.Symlink("..2026_01_02_v2", filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(dir, "..2026_01_01_v1")); err != nil {
			t.Fatal(err)
		}
		tick()
		if got := limitOf(t, r); got != 7 {
			t.Fatalf("limit %d after the swap, want 7", got)
		}
		_ = stop()
	})
}

// TestFollowRefuses: a broken, empty or missing file, or one that drops an
// instance in use, keeps the running configuration, whose limits keep
// working; each is counted once, and the next good content applies.
func TestFollowRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "application.yml")
		write(t, path, limits(2))
		r, tick, stop := following(t, path)
		b, _ := r.Semaphore("payment")
		refused := 0.0
		for _, bad := range []struct{ name, content, want string }{
			{"broken", "resilience4j:\n\tbulkhead: {}\n", "application.yml:2: invalid YAML"},
			{"empty", "", "configures no bulkhead"},
			{"missing", "", "no such file"},
			{"drops payment", "resilience4j.bulkhead.instances.other: {}\n", `no longer lists semaphore instance "payment", which is in use`},
		} {
			if bad.name == "missing" {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else {
				write(t, path, bad.content)
			}
			tick()
			tick() // the same content again: counted once
			refused++
			if got := reloadCount(t, r, "refused"); got != refused {
				t.Errorf("%s: refused %v, want %v", bad.name, got, refused)
			}
			st := r.reloadStatus()
			if !strings.Contains(st.LastError, bad.want) {
				t.Errorf("%s: last error %q, want %q", bad.name, st.LastError, bad.want)
			}
			// The old limits keep working: 2 calls in, the third refused.
			ok1, ok2, ok3 := b.TryAcquire(), b.TryAcquire(), b.TryAcquire()
			if !ok1 || !ok2 || ok3 {
				t.Errorf("%s: TryAcquire %v %v %v, want the old limit of 2", bad.name, ok1, ok2, ok3)
			}
			for _, ok := range []bool{ok1, ok2, ok3} {
				if ok {
					b.Release()
				}
			}
		}
		write(t, path, limits(3))
		tick()
		if got := limitOf(t, r); got != 3 || reloadCount(t, r, "applied") != 2 {
			t.Errorf("after the fix: limit %d, applied %v", got, reloadCount(t, r, "applied"))
		}
		_ = stop()
	})
}

func TestFollowFirstReadFails(t *testing.T) {
	r, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	path := filepath.Join(t.TempDir(), "application.yml")
	if err := r.Follow(t.Context(), path, every); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	write(t, path, "bulkhead: {instances: {a: {maxConcurrentCalls: 0}}}\n")
	if err := r.Follow(t.Context(), path, every); err == nil || !strings.Contains(err.Error(), "application.yml:1:") {
		t.Errorf("invalid file: %v", err)
	}
	if err := r.Follow(t.Context(), path, 0); err == nil || !strings.Contains(err.Error(), "every must be > 0, got 0s") {
		t.Errorf("every 0: %v", err)
	}
	if r.reloadStatus() != nil {
		t.Error("a Follow that never started left a status")
	}
}
