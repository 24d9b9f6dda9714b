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
// The loader must never panic (TestLoadIsLinear checks that its work is in
// proportion to its input), and what it accepts must validate and build a
// registry.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(seedYAML))
	f.Add([]byte("bulkhead:\n  configs:\n    a: {baseConfig: b}\n    b: {baseConfig: a}\n"))
	f.Add([]byte("thread-pool-bulkhead:\n  instances:\n    p: {maxWorkers: 2, queueCapacity: 0, keepAlive: PT1S}\n"))
	f.Add([]byte("resilience4j.bulkhead:\n  instances:\n    payment: {<<: *x}\n"))
	f.Add([]byte("x: &x {maxConcurentCalls: 3}\nbulkhead:\n  instances:\n    a: {<<: *x}\n    b: {maxWaitDuration: 9999999999h}\n"))
	f.Add([]byte("e: &e {}\nm: &m {<<: [*e, *e, *e, *e]}\nn: &n {<<: [*m, *m, *m, *m]}\nbulkhead: {instances: {a: *n, b: *n}}\n"))
	f.Add([]byte("v: &v {alpha: 2.5, noLoadWindow: PT1S}\nbulkhead:\n  configs:\n    default: {adaptive: {algorithm: aimd, window: 1ns, minSamples: 1, vegas: *v}}\n  instances:\n    a: {}\n    b: {adaptive: {minLimt: 3, aimd: {backoff: 1.5}}}\n"))
	f.Add([]byte("bulkhead:\n  configs:\n    default: {maxConcurrentCallsPerKey: 2, maxActiveKeys: 9}\n  instances:\n    a: {maxConcurrentCalls: 4}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Load(bytes.NewReader(data))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			if strings.Contains(err.Error(), "runtime error") {
				t.Fatalf("the loader panicked: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Load accepted a config that Validate refuses: %v", err)
		}
		if len(c.Semaphores)+len(c.Pools) > 100 {
			return // creating them all would only be slow
		}
		r, err := New(c)
		if err != nil {
			t.Fatalf("Load accepted a config that New refuses: %v", err)
		}
		if _, err := r.Semaphore("unlisted"); err != nil {
			if _, err2 := r.KeyedSemaphore("unlisted"); err2 != nil { // "default" may be keyed
				t.Fatal(err, err2)
			}
		}
		if err := r.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
