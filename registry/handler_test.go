package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

func getStatus(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec.Code, rec.Body.String()
}

// newRecording is newTestRegistry with Config.RecordEvents on.
func newRecording(t *testing.T, y string) *Registry {
	t.Helper()
	cfg := mustLoad(t, y)
	cfg.RecordEvents = true
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func TestHandlerJSON(t *testing.T) {
	r := newRecording(t, `
bulkhead:
  instances:
    payment: {maxConcurrentCalls: 2, maxWaitDuration: 0, eventConsumerBufferSize: 20}
thread-pool-bulkhead:
  instances:
    emails: {maxWorkers: 2, queueCapacity: 5, keepAlive: 1s, maxWaitDuration: 2s}
`)
	pay, _ := r.Semaphore("payment")
	h := r.Handler()
	ctx := context.Background()
	_ = pay.Do(ctx, func(context.Context) error { return errors.New("x") })
	pay.TryAcquire()
	pay.TryAcquire()
	pay.TryAcquire() // rejected
	pay.Release()
	pay.Release()

	code, body := getStatus(t, h, "/bulkheads")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	var st status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	if len(st.Instances) != 2 || st.Instances[0].Name != "emails" || st.Instances[1].Name != "payment" {
		t.Fatalf("instances %+v", st.Instances)
	}
	em, p := st.Instances[0], st.Instances[1]
	if em.Kind != "pool" || em.Config.MaxWorkers != 2 || em.Config.QueueCapacity == nil || *em.Config.QueueCapacity != 5 || em.Config.KeepAlive != "1s" || em.Config.QueueTimeout != "2s" {
		t.Errorf("emails %+v", em)
	}
	if p.Kind != "semaphore" || p.Config.MaxConcurrentCalls != 2 || p.Config.MaxWaitDuration != "0s" {
		t.Errorf("payment config %+v", p.Config)
	}
	want := statusStats{Stats: bulkhead.Stats{MaxConcurrentCalls: 2, AvailableConcurrentCalls: 2, Permitted: 3, Rejected: 1,
		Finished: 3, Failed: 1}, RejectedBy: map[string]uint64{"full": 1}}
	if !reflect.DeepEqual(p.Stats, want) {
		t.Errorf("payment stats %+v, want %+v", p.Stats, want)
	}
	var types []string
	for _, e := range p.Events {
		types = append(types, e.Type+"/"+e.Outcome)
		if e.Time.IsZero() {
			t.Error("event without time")
		}
	}
	if want := []string{"permitted/", "finished/error", "permitted/", "permitted/", "rejected/rejected", "finished/success", "finished/success"}; !slices.Equal(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}
	if em.Events == nil || len(em.Events) != 0 {
		t.Errorf("emails events %v, want an empty list", em.Events)
	}

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/bulkheads", nil))
	for k, v := range map[string]string{"Content-Type": "application/json", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"} {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("header %s: %q, want %q", k, got, v)
		}
	}

	code, body = getStatus(t, h, "/bulkheads?name=emails")
	if code != http.StatusOK || strings.Contains(body, "payment") {
		t.Errorf("?name=emails: %d %s", code, body)
	}
	if code, _ = getStatus(t, h, "/bulkheads?name=nope"); code != http.StatusNotFound {
		t.Errorf("unknown name: %d", code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/bulkheads", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", rec.Code)
	}
}

func TestRingKeepsNewest(t *testing.T) {
	rg := &ring{buf: make([]record, 3)}
	for i := range 7 {
		rg.add(&bulkhead.Event{Wait: time.Duration(i)})
	}
	var got []time.Duration
	for _, rec := range rg.records() {
		got = append(got, rec.wait)
	}
	if len(got) != 3 || got[0] != 4 || got[1] != 5 || got[2] != 6 {
		t.Fatalf("ring kept %v, want [4 5 6]", got)
	}
}

func TestOutcomeWords(t *testing.T) {
	tests := []struct {
		e    bulkhead.Event
		want string
	}{
		{bulkhead.Event{Type: bulkhead.EventPermitted}, ""},
		{bulkhead.Event{Type: bulkhead.EventRejected, Err: &bulkhead.FullError{}}, "rejected"},
		{bulkhead.Event{Type: bulkhead.EventCancelled, Err: context.Canceled}, "cancelled"},
		{bulkhead.Event{Type: bulkhead.EventCancelled, Err: context.DeadlineExceeded}, "deadline-exceeded"},
		{bulkhead.Event{Type: bulkhead.EventCancelled, Err: bulkhead.ErrClosed}, "closed"},
		{bulkhead.Event{Type: bulkhead.EventCancelled, Err: errors.New("secret")}, "other"},
		{bulkhead.Event{Type: bulkhead.EventFinished}, "success"},
		{bulkhead.Event{Type: bulkhead.EventFinished, Err: errors.New("secret")}, "error"},
		{bulkhead.Event{Type: bulkhead.EventFinished, Err: &bulkhead.PanicError{Value: "secret"}}, "panic"},
	}
	for _, tt := range tests {
		if got := outcome(&tt.e); got != tt.want {
			t.Errorf("outcome(%v) = %q, want %q", tt.e, got, tt.want)
		}
	}
}

// TestHandlerRevealsNoSecrets loads a Spring file holding a password, tags
// and other sections, makes calls fail with errors that carry a secret, and
// checks that none of it reaches the status page.
func TestHandlerRevealsNoSecrets(t *testing.T) {
	const secret = "hunter2-secret"
	t.Setenv("DB_PASSWORD", secret)
	cfg, err := LoadFile("testdata/application.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.RecordEvents = true
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	h := r.Handler()
	ctx := context.Background()
	pay, _ := r.Semaphore("payment")
	_ = pay.Do(ctx, func(context.Context) error { return errors.New("dial db password=" + secret) })
	func() {
		defer func() { _ = recover() }()
		_ = pay.Do(ctx, func(context.Context) error { panic(secret) })
	}()
	em, _ := r.Pool("emails")
	f, _ := em.TryGo(ctx, func(context.Context) error { return errors.New(secret) })
	_, _ = f.Wait(ctx)
	cctx, cancel := context.WithCancelCause(ctx)
	cancel(errors.New(secret))
	_ = pay.Do(cctx, func(context.Context) error { return nil })

	_, body := getStatus(t, h, "/bulkheads")
	for _, bad := range []string{secret, "hunter2", "jdbc", "postgresql", "checkout", "team", "MdcPropagator", "slidingWindowSize"} {
		if strings.Contains(body, bad) {
			t.Errorf("status page contains %q:\n%s", bad, body)
		}
	}
	if !strings.Contains(body, `"outcome": "error"`) || !strings.Contains(body, `"outcome": "panic"`) {
		t.Errorf("status page lacks the failures' outcomes:\n%s", body)
	}
}

// TestRingKeepsNoError: the ring keeps an event's outcome word, never its
// error, so an error's text (or a panic's stack) can neither be shown nor
// be kept alive by the ring.
func TestRingKeepsNoError(t *testing.T) {
	rg := &ring{buf: make([]record, 4)}
	type secretError struct{ text, stack string }
	e := &secretError{text: "password=hunter2", stack: strings.Repeat("goroutine 1 [running]\n", 100)}
	w := weak.Make(e)
	rg.add(&bulkhead.Event{Type: bulkhead.EventFinished, Err: &bulkhead.PanicError{Value: e}})
	e = nil
	runtime.GC()
	if w.Value() != nil {
		t.Fatal("the ring keeps the event's error alive")
	}
	recs := rg.records()
	if len(recs) != 1 || recs[0].outcome != "panic" || recs[0].typ != bulkhead.EventFinished {
		t.Fatalf("ring kept %+v, want one finished/panic", recs)
	}
}

// TestBufferSizeChangeWhileRecording: Reconfigure resizes a recording
// bulkhead's ring, keeping the newest events, and 0 stops recording.
func TestBufferSizeChangeWhileRecording(t *testing.T) {
	r := newRecording(t, "bulkhead:\n  instances:\n    a: {eventConsumerBufferSize: 2}\n")
	h := r.Handler()
	a, _ := r.Semaphore("a")
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	fail := func(context.Context) error { return errors.New("x") }
	events := func() []string {
		t.Helper()
		_, body := getStatus(t, h, "/?name=a")
		var st status
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range st.Instances[0].Events {
			out = append(out, e.Type+"/"+e.Outcome)
		}
		return out
	}
	reconfigure := func(size int) {
		t.Helper()
		if err := r.Reconfigure(Config{Semaphores: map[string]SemaphoreSpec{"a": {EventBufferSize: new(size)}}, RecordEvents: true}); err != nil {
			t.Fatal(err)
		}
	}
	_ = a.Do(ctx, fail)
	_ = a.Do(ctx, ok)
	if got, want := events(), []string{"permitted/", "finished/success"}; !slices.Equal(got, want) {
		t.Fatalf("size 2: %v, want %v", got, want)
	}
	reconfigure(5) // grows, keeping what it has
	_ = a.Do(ctx, fail)
	if got, want := events(), []string{"permitted/", "finished/success", "permitted/", "finished/error"}; !slices.Equal(got, want) {
		t.Fatalf("size 5: %v, want %v", got, want)
	}
	reconfigure(1) // shrinks to the newest
	if got, want := events(), []string{"finished/error"}; !slices.Equal(got, want) {
		t.Fatalf("size 1: %v, want %v", got, want)
	}
	reconfigure(0) // stops
	_ = a.Do(ctx, ok)
	if got := events(); len(got) != 0 {
		t.Fatalf("size 0: %v, want none", got)
	}
	reconfigure(3) // starts again, from now
	_ = a.Do(ctx, ok)
	if got, want := events(), []string{"permitted/", "finished/success"}; !slices.Equal(got, want) {
		t.Fatalf("size 3 again: %v, want %v", got, want)
	}
}

// TestRecordingIsExplicit: the handler does not switch event recording on;
// Config.RecordEvents does, and Reconfigure can switch it off again.
func TestRecordingIsExplicit(t *testing.T) {
	r := newTestRegistry(t, "bulkhead:\n  instances:\n    a: {}\n")
	h := r.Handler()
	a, _ := r.Semaphore("a")
	listening := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.listeners > 0 || r.entries[key{bulkhead.Semaphore, "a"}].unsub != nil
	}
	if listening() {
		t.Fatal("Handler made the bulkheads build events")
	}
	_ = a.Do(context.Background(), func(context.Context) error { return nil })
	if _, body := getStatus(t, h, "/?name=a"); !strings.Contains(body, `"events": []`) {
		t.Fatalf("events recorded without RecordEvents: %s", body)
	}
	if err := r.Reconfigure(Config{RecordEvents: true}); err != nil {
		t.Fatal(err)
	}
	_ = a.Do(context.Background(), func(context.Context) error { return nil })
	if _, body := getStatus(t, h, "/?name=a"); !strings.Contains(body, `"type": "finished"`) {
		t.Fatalf("no events with RecordEvents: %s", body)
	}
	if err := r.Reconfigure(Config{}); err != nil {
		t.Fatal(err)
	}
	if listening() {
		t.Fatal("still recording after RecordEvents went off")
	}
}

// TestHandlerOneNameBuildsOne: ?name= builds the status of the bulkheads of
// that name only, however many others there are; a name may be a semaphore
// and a pool, and ?kind= picks one.
func TestHandlerOneNameBuildsOne(t *testing.T) {
	cost := func(n int) float64 {
		cfg := Config{RecordEvents: true, Semaphores: map[string]SemaphoreSpec{}, Pools: map[string]PoolSpec{"x": {}}}
		for i := range n {
			cfg.Semaphores[fmt.Sprint("s", i)] = SemaphoreSpec{}
		}
		cfg.Semaphores["x"] = SemaphoreSpec{}
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(context.Background())
		h := r.Handler()
		if _, body := getStatus(t, h, "/?name=x"); strings.Count(body, `"name": "x"`) != 2 {
			t.Fatalf("?name=x: %s", body)
		}
		if _, body := getStatus(t, h, "/?name=x&kind=pool"); strings.Count(body, `"name": "x"`) != 1 || !strings.Contains(body, `"kind": "pool"`) {
			t.Fatalf("?name=x&kind=pool: %s", body)
		}
		req := httptest.NewRequest(http.MethodGet, "/?name=x", nil)
		return testing.AllocsPerRun(20, func() { h.ServeHTTP(httptest.NewRecorder(), req) })
	}
	if one, many := cost(1), cost(2000); many > one+5 {
		t.Errorf("?name= allocates %v times with 2000 other bulkheads, %v with one", many, one)
	}
}

// The status page splits the rejections by reason and shows the line's
// modes.
func TestHandlerRejectionReasons(t *testing.T) {
	r := newRecording(t, "bulkhead:\n  instances:\n    payment: {maxConcurrentCalls: 1, maxWaitDuration: 1h}\n")
	pay, _ := r.Semaphore("payment")
	if err := pay.Reconfigure(semaphore.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Hour,
		QueueOrder: bulkhead.LIFO, MinDeadlineSlack: time.Hour}); err != nil {
		t.Fatal(err)
	}
	pay.TryAcquire()
	pay.TryAcquire()
	near, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = pay.Acquire(near)
	_ = pay.Acquire(near)
	pay.Release()
	_, body := getStatus(t, r.Handler(), "/bulkheads")
	var st status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	got := st.Instances[0].Stats
	if !reflect.DeepEqual(got.RejectedBy, map[string]uint64{"full": 1, "deadline": 2}) || got.Rejected != 3 || !got.LIFO || got.Overloaded {
		t.Fatalf("stats %+v in %s", got, body)
	}
	if c := st.Instances[0].Config; c.QueueOrder != "lifo" || c.MinDeadlineSlack != "1h0m0s" || c.CoDel != nil {
		t.Fatalf("config %+v in %s", c, body)
	}
	if !strings.Contains(body, `"rejectedBy": {`) || !strings.Contains(body, `"lifo": true`) {
		t.Fatalf("JSON names: %s", body)
	}
}
