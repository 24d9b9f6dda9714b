package bulkheadhttp_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/bulkheadhttp"
	"github.com/bulkhead-go/bulkhead/internal/semtest"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// app is the guarded application: /hold keeps its permit until the test
// sends on release, /status/NNN writes that status, /panic panics, and
// anything else answers "ok". entered receives a value as each /hold
// request starts.
type app struct {
	entered, release chan struct{}
}

func newApp() *app { return &app{entered: make(chan struct{}, 16), release: make(chan struct{})} }

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/hold":
		a.entered <- struct{}{}
		select {
		case <-a.release:
		case <-r.Context().Done():
			return
		}
	case strings.HasPrefix(r.URL.Path, "/status/"):
		code := 0
		for _, c := range strings.TrimPrefix(r.URL.Path, "/status/") {
			code = code*10 + int(c-'0')
		}
		w.WriteHeader(code)
	case r.URL.Path == "/panic":
		panic(errors.New("handler bug"))
	}
	io.WriteString(w, "ok")
}

// serve starts a real server for Handler(b, a, opts...).
func serve(t *testing.T, b *semaphore.Bulkhead, h http.Handler, opts ...bulkheadhttp.Option) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(bulkheadhttp.Handler(b, h, opts...))
	srv.Config.ErrorLog = nil
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// fetch sends a GET and returns the status, the Retry-After header and the
// body.
func fetch(t *testing.T, c *http.Client, url string) (int, string, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(body)
}

// holdOne sends GET /hold in the background and returns once the handler
// holds its permit; the returned channel gets the request's error.
func holdOne(t *testing.T, c *http.Client, srv *httptest.Server, a *app) chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		resp, err := c.Get(srv.URL + "/hold")
		if err == nil {
			io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	<-a.entered
	return done
}

func TestHandlerAdmitsAndRefuses(t *testing.T) {
	a := newApp()
	b := mustNew(t, 1, 0)
	srv := serve(t, b, a)
	c := srv.Client()
	if code, _, body := fetch(t, c, srv.URL); code != 200 || body != "ok" {
		t.Fatalf("got %d %q", code, body)
	}
	held := holdOne(t, c, srv, a)
	if inFlight(b) != 1 {
		t.Fatal("no permit held while the handler runs")
	}
	code, retry, body := fetch(t, c, srv.URL)
	if code != http.StatusServiceUnavailable || retry != "1" || body != "Service Unavailable\n" {
		t.Fatalf("refusal: %d, Retry-After %q, body %q; want 503, 1, Service Unavailable", code, retry, body)
	}
	close(a.release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	semtest.AtRest(t, b, 2, 1, 0, 0)
}

func TestHandlerRefusalOptions(t *testing.T) {
	tests := []struct {
		name      string
		opts      []bulkheadhttp.Option
		code      int
		retry     string
		bodyStart string
	}{
		{"429", []bulkheadhttp.Option{bulkheadhttp.WithStatus(http.StatusTooManyRequests)}, 429, "1", "Too Many Requests"},
		{"retry after rounds up", []bulkheadhttp.Option{bulkheadhttp.WithRetryAfter(1500 * time.Millisecond)}, 503, "2", "Service"},
		{"no retry after", []bulkheadhttp.Option{bulkheadhttp.WithRetryAfter(0)}, 503, "", "Service"},
		{"retry after 1ns", []bulkheadhttp.Option{bulkheadhttp.WithRetryAfter(1)}, 503, "1", "Service"},
		{"retry after the largest duration", []bulkheadhttp.Option{bulkheadhttp.WithRetryAfter(math.MaxInt64)}, 503, "9223372037", "Service"},
		{"retry after whole seconds", []bulkheadhttp.Option{bulkheadhttp.WithRetryAfter(math.MaxInt64 / time.Second * time.Second)}, 503, "9223372036", "Service"},
		{"reject handler", []bulkheadhttp.Option{bulkheadhttp.WithStatus(429), bulkheadhttp.WithRejectHandler(
			func(w http.ResponseWriter, r *http.Request, err error) {
				if !errors.Is(err, bulkhead.ErrBulkheadFull) {
					t.Errorf("reject handler got %v, want ErrBulkheadFull", err)
				}
				w.Header().Set("Retry-After", "7")
				http.Error(w, "busy: "+err.Error(), http.StatusServiceUnavailable)
			})}, 503, "7", `busy: bulkhead "test" (semaphore) is full`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newApp()
			b := mustNew(t, 1, 0)
			srv := serve(t, b, a, tt.opts...)
			c := srv.Client()
			held := holdOne(t, c, srv, a)
			code, retry, body := fetch(t, c, srv.URL)
			if code != tt.code || retry != tt.retry || !strings.HasPrefix(body, tt.bodyStart) {
				t.Errorf("got %d, Retry-After %q, body %q; want %d, %q, %q...", code, retry, body, tt.code, tt.retry, tt.bodyStart)
			}
			close(a.release)
			<-held
			semtest.AtRest(t, b, 1, 1, 0, 0)
		})
	}
}

func TestHandlerBypass(t *testing.T) {
	a := newApp()
	b := mustNew(t, 1, 0)
	srv := serve(t, b, a, bulkheadhttp.WithBypass(func(r *http.Request) bool { return r.URL.Path == "/healthz" }))
	c := srv.Client()
	held := holdOne(t, c, srv, a)
	if code, _, _ := fetch(t, c, srv.URL+"/healthz"); code != 200 {
		t.Fatalf("health check while full: %d, want 200", code)
	}
	if code, _, _ := fetch(t, c, srv.URL+"/other"); code != 503 {
		t.Fatalf("other request while full: %d, want 503", code)
	}
	close(a.release)
	<-held
	semtest.AtRest(t, b, 1, 1, 0, 0) // the health check is not counted
}

// A 5xx written by the handler counts as failed, a 4xx does not.
func TestHandlerClassifiesStatus(t *testing.T) {
	b := mustNew(t, 4, 0)
	ev := record(t, b)
	srv := serve(t, b, newApp())
	for _, code := range []int{200, 404, 500, 503} {
		if got, _, _ := fetch(t, srv.Client(), srv.URL+"/status/"+itoa(code)); got != code {
			t.Fatalf("status %d, want %d", got, code)
		}
	}
	semtest.AtRest(t, b, 4, 0, 0, 2)
	errs := ev.finished()
	var se *bulkheadhttp.StatusError
	if errs[0] != nil || errs[1] != nil || !errors.As(errs[2], &se) || se.Code != 500 || !errors.Is(errs[3], bulkhead.ErrOverloaded) {
		t.Fatalf("EventFinished errors %v", errs)
	}

	b = mustNew(t, 1, 0)
	srv = serve(t, b, newApp(), bulkheadhttp.WithClassifier(func(status int, _ error) error {
		if status >= 400 {
			return &bulkheadhttp.StatusError{Code: status}
		}
		return nil
	}))
	fetch(t, srv.Client(), srv.URL+"/status/404")
	semtest.AtRest(t, b, 1, 0, 0, 1)
}

// A panic in the handler gives the permit back, counts as failed and goes
// on to net/http, which logs it and drops the connection.
func TestHandlerPanic(t *testing.T) {
	b := mustNew(t, 1, 0)
	ev := record(t, b)
	srv := httptest.NewUnstartedServer(bulkheadhttp.Handler(b, newApp()))
	var logged strings.Builder
	srv.Config.ErrorLog = newLogger(&logged)
	srv.Start()
	defer srv.Close()
	for range 3 { // more panics than permits
		if _, err := srv.Client().Get(srv.URL + "/panic"); err == nil {
			t.Fatal("a panicking handler answered")
		}
	}
	waitFor(t, "the permits back", func() bool { return b.Stats().Finished == 3 })
	semtest.AtRest(t, b, 3, 0, 0, 3)
	var pe *bulkhead.PanicError
	if errs := ev.finished(); !errors.As(errs[0], &pe) || pe.Error() != "bulkhead: task panicked: handler bug" {
		t.Fatalf("EventFinished error %v, want a *bulkhead.PanicError", errs[0])
	}
	srv.Close()
	if !strings.Contains(logged.String(), "http: panic serving") || !strings.Contains(logged.String(), "handler bug") {
		t.Fatalf("net/http did not log the panic: %q", logged.String())
	}
}

// A handler that ends its goroutine with runtime.Goexit gives the permit
// back and counts as failed.
func TestHandlerGoexit(t *testing.T) {
	b := mustNew(t, 1, 0)
	h := bulkheadhttp.Handler(b, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { runtime.Goexit() }))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}()
	<-done
	semtest.AtRest(t, b, 1, 0, 0, 1)
}

// A client that goes away while its request waits for a permit is counted
// cancelled, and the handler never runs for it; one that goes away while
// the handler runs gets its permit back when the handler returns.
func TestHandlerClientDisconnects(t *testing.T) {
	a := newApp()
	b := mustNew(t, 1, time.Hour)
	srv := serve(t, b, a)
	c := srv.Client()
	held := holdOne(t, c, srv, a)

	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/hold", nil)
		_, err := c.Do(req)
		waiting <- err
	}()
	waitFor(t, "the second request to wait", func() bool { return b.Stats().Waiting == 1 })
	cancel()
	if err := <-waiting; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	waitFor(t, "the server to give up the wait", func() bool { return b.Stats().Cancelled == 1 })

	// Now the holder goes away while its handler runs.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	close(a.release)
	<-held
	a.release = make(chan struct{})
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/hold", nil)
		_, err := c.Do(req)
		waiting <- err
	}()
	<-a.entered
	cancel()
	<-waiting
	waitFor(t, "the handler to return", func() bool { return b.Stats().Finished == 2 })
	if len(a.entered) != 0 {
		t.Fatal("the handler ran for the request that gave up waiting")
	}
	semtest.AtRest(t, b, 2, 0, 1, 0)
}

// Streaming through the wrapper: http.Flusher and http.ResponseController
// (Flush, SetWriteDeadline, through Unwrap) reach the server's writer, on
// HTTP/1.1 and HTTP/2, and the permit is held until the handler returns.
func TestHandlerStreams(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			next := make(chan struct{})
			b := mustNew(t, 1, 0)
			srv := httptest.NewUnstartedServer(bulkheadhttp.Handler(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				rc := http.NewResponseController(w)
				if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
					t.Errorf("SetWriteDeadline through the wrapper: %v", err)
				}
				w.(http.Flusher).Flush() // the headers now, the events later
				for i := range 3 {
					if _, ok := <-next; !ok {
						return
					}
					io.WriteString(w, "data: "+itoa(i)+"\n\n")
					if i%2 == 0 {
						w.(http.Flusher).Flush()
					} else if err := rc.Flush(); err != nil {
						t.Errorf("ResponseController.Flush through the wrapper: %v", err)
					}
				}
			})))
			if proto == "HTTP/2.0" {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			resp, err := srv.Client().Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.Proto != proto {
				t.Fatalf("proto %s", resp.Proto)
			}
			r := bufio.NewReader(resp.Body)
			for i := range 3 {
				next <- struct{}{}
				line, err := r.ReadString('\n')
				if err != nil || line != "data: "+itoa(i)+"\n" {
					t.Fatalf("event %d: %q, %v", i, line, err)
				}
				r.ReadString('\n')
				if i < 2 && inFlight(b) != 1 {
					t.Fatal("permit released while the handler streams")
				}
			}
			io.ReadAll(r)
			waitFor(t, "the handler to return", func() bool { return b.Stats().Finished == 1 })
			semtest.AtRest(t, b, 1, 0, 0, 0)
		})
	}
}

// Hijacking through the wrapper: as an http.Hijacker and through
// http.ResponseController. Over HTTP/2 Hijack fails with
// http.ErrNotSupported, as it does without the wrapper.
func TestHandlerHijack(t *testing.T) {
	for _, how := range []string{"Hijacker", "ResponseController"} {
		t.Run(how, func(t *testing.T) {
			b := mustNew(t, 1, 0)
			srv := serve(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var hj func() (any, *bufio.ReadWriter, error)
				if how == "Hijacker" {
					hj = func() (any, *bufio.ReadWriter, error) { c, rw, err := w.(http.Hijacker).Hijack(); return c, rw, err }
				} else {
					hj = func() (any, *bufio.ReadWriter, error) {
						c, rw, err := http.NewResponseController(w).Hijack()
						return c, rw, err
					}
				}
				conn, rw, err := hj()
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.(io.Closer).Close()
				rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
				rw.Flush()
			}))
			if code, _, body := fetch(t, srv.Client(), srv.URL); code != 200 || body != "hijacked" {
				t.Fatalf("got %d %q", code, body)
			}
			waitFor(t, "the handler to return", func() bool { return b.Stats().Finished == 1 })
			semtest.AtRest(t, b, 1, 0, 0, 0)
		})
	}
	t.Run("HTTP/2", func(t *testing.T) {
		b := mustNew(t, 1, 0)
		srv := httptest.NewUnstartedServer(bulkheadhttp.Handler(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, _, err := w.(http.Hijacker).Hijack(); !errors.Is(err, http.ErrNotSupported) {
				t.Errorf("Hijack over HTTP/2: %v, want http.ErrNotSupported", err)
			}
			io.WriteString(w, "ok")
		})))
		srv.EnableHTTP2 = true
		srv.StartTLS()
		defer srv.Close()
		if code, _, body := fetch(t, srv.Client(), srv.URL); code != 200 || body != "ok" {
			t.Fatalf("got %d %q", code, body)
		}
		semtest.AtRest(t, b, 1, 0, 0, 0)
	})
}

func TestHandlerMisusePanics(t *testing.T) {
	b := mustNew(t, 1, 0)
	ok := http.NotFoundHandler()
	for _, tt := range []struct {
		want string
		f    func()
	}{
		{"nil *semaphore.Bulkhead", func() { bulkheadhttp.Handler(nil, ok) }},
		{"nil http.Handler", func() { bulkheadhttp.Handler(b, nil) }},
		{"WithStatus(200): the status must be 503 or 429", func() { bulkheadhttp.WithStatus(200) }},
		{"WithRetryAfter(-1s)", func() { bulkheadhttp.WithRetryAfter(-time.Second) }},
		{"WithBypass called with a nil function", func() { bulkheadhttp.WithBypass(nil) }},
		{"WithRejectHandler called with a nil function", func() { bulkheadhttp.WithRejectHandler(nil) }},
		{"WithClassifier called with a nil function", func() { bulkheadhttp.WithClassifier(nil) }},
		{"nil Option", func() { bulkheadhttp.Handler(b, ok, nil) }},
	} {
		func() {
			defer func() {
				if r, _ := recover().(string); !strings.Contains(r, tt.want) {
					t.Errorf("recovered %q, want it to contain %q", r, tt.want)
				}
			}()
			tt.f()
		}()
	}
}
