package semaphore_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// Wrong Releases that race each other must each panic and leave the state
// exactly as it was.
func TestConcurrentWrongReleasesLeaveStateIntact(t *testing.T) {
	b := mustNew(t, 3, 0)
	for range 2000 {
		start := make(chan struct{})
		var wg sync.WaitGroup
		panics := make(chan any, 2)
		for range 2 {
			wg.Go(func() {
				defer func() { panics <- recover() }()
				<-start
				b.Release()
			})
		}
		close(start)
		wg.Wait()
		for range 2 {
			if r := <-panics; r == nil {
				t.Fatal("a Release without a permit did not panic")
			}
		}
		if s := b.Stats(); s.InFlight != 0 || s.MaxConcurrentCalls != 3 || s.AvailableConcurrentCalls != 3 {
			t.Fatalf("state changed by wrong Releases: %+v", s)
		}
	}
	if !b.TryAcquire() {
		t.Fatal("bulkhead unusable after wrong Releases")
	}
	b.Release()
	checkRest(t, b, 1, 0, 0, 0)
}

// A listener may call back into the bulkhead: no lock is held while it runs.
func TestListenerMayCallBackIntoBulkhead(t *testing.T) {
	b := mustNew(t, 2, time.Hour)
	var seen []bulkhead.EventType
	b.Subscribe(func(e bulkhead.Event) {
		seen = append(seen, e.Type)
		_ = b.Stats()
		if e.Type == bulkhead.EventPermitted && len(seen) == 1 {
			if err := b.Reconfigure(semaphore.Config{MaxConcurrentCalls: 3, MaxWaitDuration: time.Hour}); err != nil {
				t.Error(err)
			}
			if b.TryAcquire() { // publishes again, re-entrantly
				b.Release()
			}
		}
	})
	if err := b.Do(context.Background(), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	want := []bulkhead.EventType{bulkhead.EventPermitted, bulkhead.EventLimitChanged,
		bulkhead.EventPermitted, bulkhead.EventFinished, bulkhead.EventFinished}
	if len(seen) != len(want) {
		t.Fatalf("events %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("events %v, want %v", seen, want)
		}
	}
	checkRest(t, b, 2, 0, 0, 0)
}

// A listener that ends its goroutine while Do reports the permit must not
// strand the permit.
func TestListenerGoexitDoesNotStrandPermit(t *testing.T) {
	b := mustNew(t, 1, 0)
	cancel := b.Subscribe(func(e bulkhead.Event) {
		if e.Type == bulkhead.EventPermitted {
			runtime.Goexit()
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Do(context.Background(), func(context.Context) error {
			t.Error("fn ran after the goroutine ended")
			return nil
		})
	}()
	<-done
	cancel()
	checkRest(t, b, 1, 0, 0, 0)
}

func TestEventsCarryWaitAndRunTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, 1, time.Hour)
		var mu sync.Mutex
		var events []bulkhead.Event
		b.Subscribe(func(e bulkhead.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		})
		b.Acquire(context.Background())
		done := make(chan error)
		go func() {
			done <- b.Do(context.Background(), func(context.Context) error {
				time.Sleep(30 * time.Millisecond) // the call's own work, on the fake clock
				return nil
			})
		}()
		time.Sleep(20 * time.Millisecond) // the first holder keeps the permit for 20ms
		b.Release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		want := []struct {
			typ       bulkhead.EventType
			wait, run time.Duration
		}{
			{bulkhead.EventPermitted, 0, 0},
			{bulkhead.EventFinished, 0, 0},
			{bulkhead.EventPermitted, 20 * time.Millisecond, 0},
			{bulkhead.EventFinished, 0, 30 * time.Millisecond},
		}
		if len(events) != len(want) {
			t.Fatalf("events %v", events)
		}
		for i, w := range want {
			if e := events[i]; e.Type != w.typ || e.Wait != w.wait || e.Run != w.run {
				t.Errorf("event %d: %v wait %v run %v; want %v wait %v run %v", i, e.Type, e.Wait, e.Run, w.typ, w.wait, w.run)
			}
		}
	})
}
