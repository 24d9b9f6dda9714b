package registry

import (
	"bytes"
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
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Load(bytes.NewReader(data))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
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
