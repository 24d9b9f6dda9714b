package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// signalWriter collects output and closes each channel of marks once the
// output contains its key.
type signalWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	marks map[string]chan struct{}
}

func (s *signalWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.buf.Write(p)
	for marker, ch := range s.marks {
		if strings.Contains(s.buf.String(), marker) {
			close(ch)
			delete(s.marks, marker)
		}
	}
	return n, err
}

func fetch(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return string(body)
}

// slow makes the scenarios outlast the first scrape comfortably; the
// numbers do not depend on it.
var slow = options{PayDelay: 300 * time.Millisecond}

func TestServeExposesScenarioOneUntilInterrupted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(guarded(t))
	defer cancel()
	serving, seen := make(chan struct{}), make(chan struct{})
	w := &signalWriter{marks: map[string]chan struct{}{"serving http://": serving, "still serving": seen}}
	done := make(chan error, 1)
	go func() { done <- serve(ctx, w, slow, ln) }()
	base := "http://" + ln.Addr().String()

	// From the start: the file's instances are there while the scenarios run.
	<-serving
	if m := fetch(t, base+"/metrics"); !strings.Contains(m, `bulkhead_max_allowed_concurrent_calls{kind="semaphore",name="payment"} 2`) {
		t.Errorf("/metrics before the scenarios end lacks payment:\n%s", m)
	}
	select {
	case <-seen:
	case err := <-done:
		t.Fatalf("serve returned early: %v\n%s", err, w.buf.String())
	}

	metrics := fetch(t, base+"/metrics")
	for _, want := range []string{
		`bulkhead_max_allowed_concurrent_calls{kind="semaphore",name="payment"} 2`,
		`bulkhead_max_allowed_concurrent_calls{kind="semaphore",name="inventory"} 8`,
		`bulkhead_available_concurrent_calls{kind="semaphore",name="payment"} 2`,
		`bulkhead_calls_rejected_total{kind="semaphore",name="payment"} 4`,
		`bulkhead_calls_permitted_total{kind="semaphore",name="inventory"} 8`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// /metrics answers GET and HEAD only.
	for _, method := range []string{http.MethodPost, http.MethodDelete} {
		req, _ := http.NewRequest(method, base+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(resp.Header.Get("Allow"), "GET") {
			t.Errorf("%s /metrics: %d, Allow %q; want 405 allowing GET", method, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	if resp, err := http.Head(base + "/metrics"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /metrics: %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}
	var status any
	if err := json.Unmarshal([]byte(fetch(t, base+"/bulkheads")), &status); err != nil {
		t.Fatalf("/bulkheads is not JSON: %v", err)
	}
	if s := fetch(t, base+"/bulkheads"); !strings.Contains(s, `"payment"`) || !strings.Contains(s, `"inventory"`) {
		t.Errorf("/bulkheads lacks the instances:\n%s", s)
	}

	cancel() // the interrupt
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if lines := resultLines(w.buf.String()); len(lines) != 1 || lines[0] != wantResult {
		t.Errorf("RESULT lines %q", lines)
	}
}
