package bulkheadhttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/bulkheadhttp"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

func tenantOf(r *http.Request) (string, bool) {
	t := r.URL.Query().Get("tenant") // in a test only: take keys from a verified identity
	return t, t != ""
}

// A tenant that holds its limit is refused with 503 and Retry-After, while
// another tenant is served, requests without a key pass without a permit,
// and a failing status counts failed.
func TestKeyedHandlerIsolatesTenants(t *testing.T) {
	k, err := semaphore.NewKeyed[string]("tenants", semaphore.KeyedConfig{
		PerKey: semaphore.Config{MaxConcurrentCalls: 2}, MaxConcurrentCalls: 3})
	if err != nil {
		t.Fatal(err)
	}
	a := newApp()
	h := bulkheadhttp.KeyedHandler(k, tenantOf, a, bulkheadhttp.WithBypass(func(r *http.Request) bool { return r.URL.Path == "/healthz" }))
	serveOne := func(url string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", url, nil))
		return w
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { serveOne("/hold?tenant=noisy") })
		<-a.entered
	}
	if w := serveOne("/x?tenant=noisy"); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("noisy tenant's third request: %d %v", w.Code, w.Header())
	}
	if w := serveOne("/x?tenant=quiet"); w.Code != http.StatusOK || w.Body.String() != "ok" {
		t.Fatalf("quiet tenant: %d %q", w.Code, w.Body)
	}
	if w := serveOne("/status/500?tenant=quiet"); w.Code != 500 {
		t.Fatalf("quiet tenant's 500: %d", w.Code)
	}
	if w := serveOne("/x"); w.Code != http.StatusOK { // no key: no permit
		t.Fatalf("unkeyed: %d", w.Code)
	}
	if w := serveOne("/healthz?tenant=noisy"); w.Code != http.StatusOK { // bypassed
		t.Fatalf("bypass: %d", w.Code)
	}
	close(a.release)
	wg.Wait()
	s, ks := k.Stats(), k.KeyStats()
	if s.Permitted != 4 || s.Finished != 4 || s.Failed != 1 || s.Rejected != 1 || ks.RejectedKey != 1 || ks.ActiveKeys != 0 {
		t.Fatalf("stats %+v, key stats %+v", s, ks)
	}
}

func TestKeyedHandlerRejectHandlerGetsReason(t *testing.T) {
	k, _ := semaphore.NewKeyed[string]("tenants", semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: 1}, MaxActiveKeys: 1})
	var got error
	h := bulkheadhttp.KeyedHandler(k, tenantOf, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		bulkheadhttp.WithRejectHandler(func(w http.ResponseWriter, r *http.Request, err error) { got = err; w.WriteHeader(429) }))
	p, _ := k.TryAcquire("a")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/?tenant=b", nil))
	p.Release(nil)
	var fe *bulkhead.FullError
	if w.Code != 429 || !errors.As(got, &fe) || fe.Reason != bulkhead.ReasonKeys {
		t.Fatalf("%d, %v", w.Code, got)
	}
	// A request whose context has ended is refused with the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/?tenant=a", nil).WithContext(ctx))
	if !errors.Is(got, context.Canceled) {
		t.Fatalf("ended context: %v", got)
	}
}

func TestKeyedHandlerPanicsOnNil(t *testing.T) {
	k, _ := semaphore.NewKeyed[string]("t", semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: 1}})
	ok := http.NotFoundHandler()
	for want, f := range map[string]func(){
		"bulkheadhttp: KeyedHandler called with a nil *semaphore.Keyed": func() { bulkheadhttp.KeyedHandler(nil, tenantOf, ok) },
		"bulkheadhttp: KeyedHandler called with a nil key function":     func() { bulkheadhttp.KeyedHandler(k, nil, ok) },
		"bulkheadhttp: KeyedHandler called with a nil http.Handler":     func() { bulkheadhttp.KeyedHandler(k, tenantOf, nil) },
	} {
		func() {
			defer func() {
				if r := recover(); r != want {
					t.Errorf("panic %v, want %q", r, want)
				}
			}()
			f()
		}()
	}
}
