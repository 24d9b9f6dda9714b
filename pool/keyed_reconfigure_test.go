package pool_test

import (
	"strings"
	"testing"

	"github.com/bulkhead-go/bulkhead/pool"
)

// ReconfigureFunc passes the configuration in force, changes nothing when
// f returns false, refuses an invalid one naming the field, and applies a
// valid one.
func TestKeyedReconfigureFunc(t *testing.T) {
	cfg := pool.KeyedConfig{Config: pool.Config{MaxWorkers: 4, QueueCapacity: 8}, MaxRunningPerKey: 1, QueueCapacityPerKey: 2}
	k := newKeyedPool(t, cfg)
	var seen pool.KeyedConfig
	if err := k.ReconfigureFunc(func(c pool.KeyedConfig) (pool.KeyedConfig, bool) { seen = c; return pool.KeyedConfig{}, false }); err != nil {
		t.Fatal(err)
	}
	if seen != cfg || k.Config() != cfg {
		t.Fatalf("f saw %+v, config %+v; want %+v both", seen, k.Config(), cfg)
	}
	bad := cfg
	bad.MaxRunningPerKey = 5
	if err := k.ReconfigureFunc(func(pool.KeyedConfig) (pool.KeyedConfig, bool) { return bad, true }); err == nil || !strings.Contains(err.Error(), "maxRunningPerKey must be from 0 to maxWorkers (4), got 5") {
		t.Fatalf("invalid config: %v", err)
	}
	if k.Config() != cfg {
		t.Fatalf("an invalid config changed it: %+v", k.Config())
	}
	good := cfg
	good.MaxRunningPerKey, good.QueueCapacityPerKey, good.MaxWorkers = 2, 3, 6
	if err := k.ReconfigureFunc(func(pool.KeyedConfig) (pool.KeyedConfig, bool) { return good, true }); err != nil || k.Config() != good {
		t.Fatalf("Reconfigure: %v, config %+v, want %+v", err, k.Config(), good)
	}
}
