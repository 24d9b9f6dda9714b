package registry

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the loader. The default `go test` run
// replays the seeds in testdata/fuzz/FuzzLoad; explore with
//
//	go test -run '^$' -fuzz FuzzLoad -fuzztime 60s ./registry
//
// The loader must never panic, and what it accepts must validate and
// resolve for every instance.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(seedYAML))
	f.Add([]byte("bulkhead:\n  configs:\n    a: {baseConfig: b}\n    b: {baseConfig: a}\n"))
	f.Add([]byte("thread-pool-bulkhead:\n  instances:\n    p: {maxWorkers: 2, queueCapacity: 0, keepAlive: PT1S}\n"))
	f.Add([]byte("resilience4j.bulkhead.instances.payment.maxConcurrentCalls: 2\nresilience4j:\n  bulkhead.instances[a.b]: {maxWaitDuration: 2S}\n  bulkhead:\n    instances.payment: {<<: *x}\n"))
	f.Add([]byte("x: &x {maxConcurentCalls: 3}\nbulkhead:\n  instances:\n    a: {<<: *x}\n    b.maxWaitDuration: 9999999999h\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Load(bytes.NewReader(data))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			// Load turns a panic into an error; the fuzzer must see it.
			if strings.Contains(err.Error(), "runtime error") {
				t.Fatalf("the loader panicked: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Load accepted a config that Validate refuses: %v", err)
		}
		for name := range c.Semaphores {
			if _, err := c.resolveSemaphore(name); err != nil {
				t.Fatalf("resolve %q: %v", name, err)
			}
		}
		for name := range c.Pools {
			if _, err := c.resolvePool(name); err != nil {
				t.Fatalf("resolve %q: %v", name, err)
			}
		}
	})
}
