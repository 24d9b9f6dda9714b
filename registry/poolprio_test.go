package registry

import (
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// The pool's priorities keys, inherited from a shared configuration as a
// block, and priorities.displace.
func TestPoolPrioritiesFromYAML(t *testing.T) {
	r := newTestRegistry(t, `
resilience4j:
  thread-pool-bulkhead:
    configs:
      prioritized: {priorities: {ceilings: {sheddable: 0.25, critical: 0.9}, aging: 500ms}}
    instances:
      checkout:
        baseConfig: prioritized
        maxThreadPoolSize: 4
        queueCapacity: 8
      search:
        maxThreadPoolSize: 2
        queueCapacity: 4
        priorities: {displace: true}
`)
	co, err := r.Pool("checkout")
	if err != nil {
		t.Fatal(err)
	}
	if c := co.Config(); c.Priorities == nil || *c.Priorities != (bulkhead.Priorities{Sheddable: 0.25, Critical: 0.9, Aging: 500 * time.Millisecond}) || c.Displace {
		t.Fatalf("checkout: %+v (priorities %v)", c, c.Priorities)
	}
	search, err := r.Pool("search")
	if err != nil {
		t.Fatal(err)
	}
	if c := search.Config(); c.Priorities == nil || *c.Priorities != (bulkhead.Priorities{}) || !c.Displace {
		t.Fatalf("search: %+v (priorities %v)", c, c.Priorities)
	}
	for in, want := range map[string]string{
		"{maxThreadPoolSize: 1, priorities: {ceilings: {sheddable: 2}}}": "sheddable must be in (0, 1]",
		"{maxThreadPoolSize: 1, priorities: {aging: fast}}":              "aging",
	} {
		if _, err := Load(strings.NewReader("resilience4j.thread-pool-bulkhead.instances.p: " + in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}
