package registry

import (
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// The line's shedding keys (this library's extensions) on both sections,
// inherited from a shared configuration key by key (codel as a block).
func TestLoadShedKeys(t *testing.T) {
	r := newTestRegistry(t, `
resilience4j:
  bulkhead:
    configs:
      default: {maxWaitDuration: 1s, minDeadlineSlack: 20ms, codel: {targetDelay: 10ms}}
    instances:
      payment:
        maxConcurrentCalls: 4
        maxWaitingCalls: 8
        queueOrder: adaptiveLifo
        lifoThreshold: 3
      search:
        queue-order: LIFO
        codel: {interval: 200ms}
  thread-pool-bulkhead:
    instances:
      reports:
        maxThreadPoolSize: 2
        queueCapacity: 10
        maxWaitDuration: 5s
        maxWaitingCalls: 4
        minDeadlineSlack: 1s
        queueOrder: lifo
        codel: {targetDelay: 5ms, interval: 50ms}
`)
	pay, err := r.Semaphore("payment")
	if err != nil {
		t.Fatal(err)
	}
	want := semaphore.Config{MaxConcurrentCalls: 4, MaxWaitDuration: time.Second, MaxWaitingCalls: 8,
		MinDeadlineSlack: 20 * time.Millisecond, QueueOrder: bulkhead.AdaptiveLIFO, LIFOThreshold: 3}
	got := pay.Config()
	if got.CoDel == nil || *got.CoDel != (bulkhead.CoDel{Target: 10 * time.Millisecond}) {
		t.Fatalf("payment's codel %v, want the default's block", got.CoDel)
	}
	got.CoDel = nil
	if got != want {
		t.Fatalf("payment:\n got %+v\nwant %+v", got, want)
	}
	search, _ := r.Semaphore("search")
	if c := search.Config(); c.QueueOrder != bulkhead.LIFO || c.CoDel == nil || *c.CoDel != (bulkhead.CoDel{Interval: 200 * time.Millisecond}) {
		t.Fatalf("search: %+v (codel %v): its own codel block replaces the default's", c, c.CoDel)
	}
	rep, err := r.Pool("reports")
	if err != nil {
		t.Fatal(err)
	}
	pc := rep.Config()
	if pc.MaxWaitingCalls != 4 || pc.MinDeadlineSlack != time.Second || pc.QueueOrder != bulkhead.LIFO ||
		pc.CoDel == nil || *pc.CoDel != (bulkhead.CoDel{Target: 5 * time.Millisecond, Interval: 50 * time.Millisecond}) {
		t.Fatalf("reports: %+v (codel %v)", pc, pc.CoDel)
	}
	var _ pool.Config = pc
	_, body := getStatus(t, r.Handler(), "/bulkheads?name=reports")
	for _, w := range []string{`"maxWaitingCalls": 4`, `"minDeadlineSlack": "1s"`, `"queueOrder": "lifo"`,
		`"codel": {`, `"targetDelay": "5ms"`, `"interval": "50ms"`} {
		if !strings.Contains(body, w) {
			t.Errorf("the status page does not show %s:\n%s", w, body)
		}
	}
}

func TestLoadShedKeysErrors(t *testing.T) {
	wantLoadErr(t, "bulkhead:\n  instances:\n    a: {maxWaitDuration: 1s, queueOrder: newest}\n",
		"queueOrder", "must be fifo, lifo or adaptiveLifo", `"newest"`)
	wantLoadErr(t, "bulkhead:\n  instances:\n    a: {queueOrder: lifo}\n",
		"queueOrder lifo needs maxWaitDuration > 0")
	wantLoadErr(t, "bulkhead:\n  instances:\n    a: {maxWaitDuration: 1s, codel: {targetDelay: 1s}}\n",
		"codel.target must be shorter than codel.interval")
	wantLoadErr(t, "bulkhead:\n  instances:\n    a: {maxWaitDuration: 1s, codel: {target: 1ms}}\n", "codel.target")
	wantLoadErr(t, "thread-pool-bulkhead:\n  instances:\n    p: {queueCapacity: 5, queueOrder: lifo}\n",
		"queueOrder lifo needs queueTimeout > 0")
	wantLoadErr(t, "thread-pool-bulkhead:\n  instances:\n    p: {maxWaitingCalls: many}\n", "maxWaitingCalls", "integer")
}

// An instance whose own fields are wrong is reported once, for that field,
// not again for the line's keys.
func TestLoadShedKeysReportedOnce(t *testing.T) {
	msg := loadErr(t, "bulkhead:\n  instances:\n    a: {maxConcurrentCalls: 0, maxWaitDuration: 1s, maxWaitingCalls: -1}\n")
	if strings.Count(msg, "semaphore instance \"a\"") != 2 || !strings.Contains(msg, "maxWaitingCalls must be >= 0, got -1") ||
		!strings.Contains(msg, "maxConcurrentCalls must be >= 1") {
		t.Fatalf("errors: %s", msg)
	}
}
