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
	if h.Subscribe(nil) == nil || !h.Active() {
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

func TestHubSurvivesPanickingSubscriberAndConcurrentUse(t *testing.T) {
	var h Hub[bulkhead.Event]
	var got atomic.Int64
	h.Subscribe(func(bulkhead.Event) { panic("bad listener") })
	h.Subscribe(func(bulkhead.Event) { got.Add(1) })
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
	if got.Load() != 2000 {
		t.Fatalf("subscriber saw %d events, want 2000", got.Load())
	}
}
