package semaphore_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
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

func TestTransportPassesCloseIdleConnections(t *testing.T) {
	var mu sync.Mutex
	closed := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			mu.Lock()
			closed++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	b := mustNew(t, 1, 0)
	c := client(b)
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	c.CloseIdleConnections() // must reach the http.Transport under the bulkhead
	waitFor(t, "the server to see the connection closed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return closed == 1
	})
	checkRest(t, b, 1, 0, 0, 0)
}

func TestTransportNilNextUsesDefaultTransport(t *testing.T) {
	srv, _ := stub(t)
	b := mustNew(t, 1, 0)
	c := &http.Client{Transport: semaphore.Transport(b, nil)}
	defer c.CloseIdleConnections()
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(data) != "hello" {
		t.Fatalf("body %q", data)
	}
	checkRest(t, b, 1, 0, 0, 0)
}

// A 101 Switching Protocols response keeps a writable body, and its permit
// until it is closed.
func TestTransportUpgradeBodyStaysWritable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		rw.Flush()
		line, _ := rw.ReadString('\n')
		rw.WriteString("echo " + line)
		rw.Flush()
	}))
	defer srv.Close()
	b := mustNew(t, 1, 0)
	c := client(b)
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	rw, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("upgrade body %T is not writable", resp.Body)
	}
	if _, err := io.WriteString(rw, "hi\n"); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(rw).ReadString('\n')
	if err != nil || !strings.HasPrefix(got, "echo hi") {
		t.Fatalf("read %q, %v", got, err)
	}
	if inFlight(b) != 1 {
		t.Fatal("permit released while the upgraded connection is open")
	}
	rw.Close()
	checkRest(t, b, 1, 0, 0, 0)
}
