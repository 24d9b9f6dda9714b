package config

import (
	"strings"
	"testing"
)

// TestKeyedPoolPrioritiesRefused: pool.KeyedConfig.Validate refuses
// priorities, so Load and Validate must too, naming the field (and, from a
// file, its line), rather than New failing without them.
func TestKeyedPoolPrioritiesRefused(t *testing.T) {
	_, err := Load([]byte("resilience4j.thread-pool-bulkhead.instances.k: {maxThreadPoolSize: 4, maxRunningPerKey: 1, priorities: {}}\n"), "f.yml", nil)
	if err == nil || !strings.Contains(err.Error(), "f.yml:1:") || !strings.Contains(err.Error(), "priorities") {
		t.Errorf("Load: %v, want an error at f.yml:1 naming priorities", err)
	}
}

// TestKeyedSemaphoreMaxActiveKeysRange: semaphore.KeyedConfig.Validate
// refuses maxActiveKeys above 2^31-1; Validate must too.
func TestKeyedSemaphoreMaxActiveKeysRange(t *testing.T) {
	c := Config{Semaphores: map[string]SemaphoreSpec{"k": {MaxConcurrentCallsPerKey: new(1), MaxActiveKeys: new(1 << 40)}}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "MaxActiveKeys") || !strings.Contains(err.Error(), "1099511627776") {
		t.Errorf("Validate: %v, want an error naming MaxActiveKeys and 1099511627776", err)
	}
}
