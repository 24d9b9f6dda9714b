package bulkheadtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/bulkhead-go/bulkhead/bulkheadtest"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// The proof tells a keyed bulkhead from a shared one: with one plain
// bulkhead for every tenant, the noisy tenant takes the quiet one's
// capacity and Check says so; with a keyed one it passes.
func TestKeyedIsolation(t *testing.T) {
	bursts := func(do func(ctx context.Context, key string, g *bulkheadtest.Gate) error) []bulkheadtest.Burst {
		var noisy, quiet bulkheadtest.Gate
		return []bulkheadtest.Burst{
			{Name: "noisy", Workers: 8, Limit: 2, Gate: &noisy, Call: func(ctx context.Context) error { return do(ctx, "noisy", &noisy) }},
			{Name: "quiet", Workers: 2, Limit: 2, Gate: &quiet, Call: func(ctx context.Context) error { return do(ctx, "quiet", &quiet) }},
		}
	}
	shared, _ := semaphore.New("shared", semaphore.Config{MaxConcurrentCalls: 4})
	res, err := bulkheadtest.RunInOrder(context.Background(), bursts(func(ctx context.Context, _ string, g *bulkheadtest.Gate) error {
		return shared.Do(ctx, g.Wait)
	})...)
	if err != nil {
		t.Fatal(err)
	}
	if err := bulkheadtest.Check(res); err == nil || !strings.Contains(err.Error(), "quiet") {
		t.Fatalf("a shared bulkhead passed the per-key proof: %v %v", res, err)
	}
	keyed, _ := semaphore.NewKeyed[string]("tenants", semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: 2}, MaxConcurrentCalls: 4})
	bulkheadtest.AssertIsolated(t, bursts(func(ctx context.Context, key string, g *bulkheadtest.Gate) error {
		return keyed.Do(ctx, key, g.Wait)
	})...)
	if s := keyed.Stats(); s.InFlight != 0 || s.Permitted != 4 || keyed.KeyStats().ActiveKeys != 0 {
		t.Fatalf("stats %+v", s)
	}
}
