package event

import (
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/bulkhead-go/bulkhead"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHubSubscribePublishCancel(t *testing.T) {
	var h Hub[bulkhead.Event]
	if h.Active() {
		t.Fatal("zero Hub is active")
	}
	h.Publish(bulkhead.Event{}) // no subscriber: nothing happens
	var a, b atomic.Int32
	cancelA := h.Subscribe(func(bulkhead.Event) { a.Add(1) })
	cancelB := h.Subscribe(func(bulkhead.Event) { b.Add(1) })
	if !h.Active() {
		t.Fatal("subscribe")
	}
	h.Publish(bulkhead.Event{})
	cancelA()
	cancelA()
	h.Publish(bulkhead.Event{})
	cancelB()
	if h.Active() {
		t.Fatal("hub active after every subscriber cancelled")
	}
	h.Publish(bulkhead.Event{})
	if a.Load() != 1 || b.Load() != 2 {
		t.Fatalf("a saw %d, b saw %d; want 1 and 2", a.Load(), b.Load())
	}
}

// A panicking subscriber's panic reaches the publisher (it is not hidden);
// the subscribers before it saw the event, those after it miss that one.
func TestHubPanicGoesUpAndConcurrentUse(t *testing.T) {
	var h Hub[bulkhead.Event]
	var before, after atomic.Int64
	h.Subscribe(func(bulkhead.Event) { before.Add(1) })
	cancelBad := h.Subscribe(func(bulkhead.Event) { panic("bad listener") })
	h.Subscribe(func(bulkhead.Event) { after.Add(1) })
	func() {
		defer func() {
			if r := recover(); r != "bad listener" {
				t.Errorf("recover() = %v, want the subscriber's panic", r)
			}
		}()
		h.Publish(bulkhead.Event{})
	}()
	if before.Load() != 1 || after.Load() != 0 {
		t.Fatalf("before saw %d, after saw %d; want 1 and 0", before.Load(), after.Load())
	}
	cancelBad()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 500 {
				h.Publish(bulkhead.Event{})
			}
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				h.Subscribe(func(bulkhead.Event) {})()
			}
		}()
	}
	wg.Wait()
	if after.Load() != 2000 {
		t.Fatalf("subscriber saw %d events, want 2000", after.Load())
	}
}
