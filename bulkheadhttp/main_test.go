package bulkheadhttp_test

import (
	"log"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustNew(t testing.TB, max int, wait time.Duration) *semaphore.Bulkhead {
	t.Helper()
	b, err := semaphore.New("test", semaphore.Config{MaxConcurrentCalls: max, MaxWaitDuration: wait})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitFor polls cond; the deadline only guards against a hang.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// events records the events of b.
type events struct {
	mu   sync.Mutex
	list []bulkhead.Event
}

func record(t testing.TB, b *semaphore.Bulkhead) *events {
	e := &events{}
	t.Cleanup(b.Subscribe(func(ev bulkhead.Event) {
		e.mu.Lock()
		e.list = append(e.list, ev)
		e.mu.Unlock()
	}))
	return e
}

// finished returns the errors of the EventFinished events so far.
func (e *events) finished() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, ev := range e.list {
		if ev.Type == bulkhead.EventFinished {
			errs = append(errs, ev.Err)
		}
	}
	return errs
}

// newLogger returns a logger writing to w, safe for concurrent use.
func newLogger(w *strings.Builder) *log.Logger {
	return log.New(&lockedWriter{w: w}, "", 0)
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
