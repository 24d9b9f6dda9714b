package bulkheadhttp_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/bulkheadhttp"
	"github.com/bulkhead-go/bulkhead/internal/semtest"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// stub serves "hello" on /, blocks /slow until release is closed, and
// answers /status/NNN with that status.
func stub(t *testing.T) (srv *httptest.Server, release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		case strings.HasPrefix(r.URL.Path, "/status/"):
			var code int
			for _, c := range strings.TrimPrefix(r.URL.Path, "/status/") {
				code = code*10 + int(c-'0')
			}
			w.WriteHeader(code)
		}
		io.WriteString(w, "hello")
	}))
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		srv.Close()
	})
	return srv, release
}

func client(b *semaphore.Bulkhead, opts ...bulkheadhttp.Option) *http.Client {
	tr := &http.Transport{}
	return &http.Client{Transport: bulkheadhttp.Transport(b, tr, opts...)}
}

func inFlight(b *semaphore.Bulkhead) int { return b.Stats().InFlight }

// getAll fetches url, reads and closes the body, and returns the status.
func getAll(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestTransportHoldsPermitUntilBodyClosed(t *testing.T) {
	srv, _ := stub(t)
	b := mustNew(t, 1, 0)
	c := client(b)
	defer c.CloseIdleConnections()

	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if inFlight(b) != 1 {
		t.Fatal("permit released before the body was closed")
	}
	// The dependency is still busy: a second request is rejected, and the
	// rejection is visible through the *url.Error that http.Client returns.
	_, err = c.Get(srv.URL)
	if !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("second request: %v, want ErrBulkheadFull", err)
	}
	var fe *bulkhead.FullError
	if !errors.As(err, &fe) || fe.Name != "test" {
		t.Fatalf("errors.As(%v) found no FullError naming the bulkhead", err)
	}
	resp.Body.Close()
	resp.Body.Close() // a second Close must not release twice
	semtest.AtRest(t, b, 1, 1, 0, 0)
}

func TestTransportReleasesAtEOF(t *testing.T) {
	srv, _ := stub(t)
	b := mustNew(t, 1, 0)
	c := client(b)
	defer c.CloseIdleConnections()
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil || string(data) != "hello" {
		t.Fatalf("body %q, %v", data, err)
	}
	if inFlight(b) != 0 {
		t.Fatal("permit still held after the body was read to EOF")
	}
	resp.Body.Close()
	semtest.AtRest(t, b, 1, 0, 0, 0)
}

func TestTransportReleasesOnRoundTripError(t *testing.T) {
	srv, _ := stub(t)
	srv.Close() // nothing listens any more
	b := mustNew(t, 1, 0)
	ev := record(t, b)
	c := client(b)
	_, err := c.Get(srv.URL)
	if err == nil || errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("want a connection error, got %v", err)
	}
	semtest.AtRest(t, b, 1, 0, 0, 1)
	if errs := ev.finished(); len(errs) != 1 || errs[0] == nil || !strings.Contains(err.Error(), errs[0].Error()) {
		t.Fatalf("EventFinished errors %v, want the transport's error (%v)", errs, err)
	}
}

func TestTransportWaitsWithRequestContext(t *testing.T) {
	srv, release := stub(t)
	b := mustNew(t, 1, time.Hour)
	c := client(b)
	defer c.CloseIdleConnections()

	first := make(chan error, 1)
	go func() {
		resp, err := c.Get(srv.URL + "/slow")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		first <- err
	}()
	waitFor(t, "first request to hold the permit", func() bool { return inFlight(b) == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("body"))
		_, err := c.Do(req)
		second <- err
	}()
	waitFor(t, "second request to wait", func() bool { return b.Stats().Waiting == 1 })
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) || errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("cancelled wait: %v, want context.Canceled", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	semtest.AtRest(t, b, 1, 0, 1, 0)
}

func TestTransportNoBodyReleasesAtOnce(t *testing.T) {
	srv, _ := stub(t)
	b := mustNew(t, 1, 0)
	c := client(b)
	defer c.CloseIdleConnections()
	resp, err := c.Head(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Body != http.NoBody {
		t.Fatalf("a HEAD response has body %T, want http.NoBody", resp.Body)
	}
	if inFlight(b) != 0 {
		t.Fatal("permit held for a response without a body")
	}
	resp.Body.Close()
	semtest.AtRest(t, b, 1, 0, 0, 0)
}

// The default classifier: a 5xx counts as failed, with a *StatusError that
// names the status; 429 and 503 also match ErrOverloaded; other statuses
// are successes.
func TestTransportCountsServerErrorsAsFailed(t *testing.T) {
	srv, _ := stub(t)
	b := mustNew(t, 1, 0)
	ev := record(t, b)
	c := client(b)
	defer c.CloseIdleConnections()
	if got := (&bulkheadhttp.StatusError{Code: 599}).Error(); got != "http status 599" {
		t.Errorf("StatusError{599}: %q", got)
	}
	for _, code := range []int{200, 404, 429, 500, 503} {
		if got := getAll(t, c, srv.URL+"/status/"+itoa(code)); got != code {
			t.Fatalf("status %d, want %d", got, code)
		}
	}
	semtest.AtRest(t, b, 5, 0, 0, 2)
	errs := ev.finished()
	if len(errs) != 5 || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("EventFinished errors %v, want nil for 200, 404 and 429", errs)
	}
	for i, want := range map[int]struct {
		code       int
		overloaded bool
		text       string
	}{3: {500, false, "http status 500 (Internal Server Error)"}, 4: {503, true, "http status 503 (Service Unavailable)"}} {
		var se *bulkheadhttp.StatusError
		if !errors.As(errs[i], &se) || se.Code != want.code || se.Error() != want.text {
			t.Errorf("EventFinished error %v, want a *StatusError %q", errs[i], want.text)
		}
		if errors.Is(errs[i], bulkhead.ErrOverloaded) != want.overloaded {
			t.Errorf("%v: errors.Is(ErrOverloaded) = %v, want %v", errs[i], !want.overloaded, want.overloaded)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestTransportClassifier(t *testing.T) {
	srv, _ := stub(t)
	// Also 429, as a dependency's refusal.
	also429 := bulkheadhttp.WithClassifier(func(status int, err error) error {
		if status == http.StatusTooManyRequests {
			return &bulkheadhttp.StatusError{Code: status}
		}
		return bulkheadhttp.Classify(status, err)
	})
	b := mustNew(t, 1, 0)
	ev := record(t, b)
	c := client(b, also429)
	defer c.CloseIdleConnections()
	getAll(t, c, srv.URL+"/status/429")
	getAll(t, c, srv.URL+"/status/500")
	semtest.AtRest(t, b, 2, 0, 0, 2)
	if errs := ev.finished(); !errors.Is(errs[0], bulkhead.ErrOverloaded) {
		t.Fatalf("429: %v, want an error matching ErrOverloaded", errs[0])
	}

	// Nothing but transport errors.
	b = mustNew(t, 1, 0)
	c = client(b, bulkheadhttp.WithClassifier(func(_ int, err error) error { return err }))
	defer c.CloseIdleConnections()
	getAll(t, c, srv.URL+"/status/500")
	semtest.AtRest(t, b, 1, 0, 0, 0)
}

func TestTransportRejectsServerOptions(t *testing.T) {
	for _, o := range []bulkheadhttp.Option{
		bulkheadhttp.WithStatus(http.StatusTooManyRequests),
		bulkheadhttp.WithRetryAfter(time.Second),
		bulkheadhttp.WithBypass(func(*http.Request) bool { return false }),
		bulkheadhttp.WithRejectHandler(func(http.ResponseWriter, *http.Request, error) {}),
	} {
		func() {
			defer func() {
				if r, _ := recover().(string); !strings.Contains(r, "is an option of Handler, not of Transport") {
					t.Errorf("recovered %q", r)
				}
			}()
			bulkheadhttp.Transport(mustNew(t, 1, 0), nil, o)
		}()
	}
}

// panicky is a RoundTripper that panics with v, or calls runtime.Goexit
// when v is nil.
type panicky struct{ v any }

func (p panicky) RoundTrip(*http.Request) (*http.Response, error) {
	if p.v == nil {
		runtime.Goexit()
	}
	panic(p.v)
}

// Issue 11, point 2: a panic in next gives the permit back, counts the call
// failed and goes on up the caller's stack; so does runtime.Goexit.
func TestTransportPanicInNextReleasesPermit(t *testing.T) {
	b := mustNew(t, 1, 0)
	ev := record(t, b)
	boom := errors.New("boom")
	c := &http.Client{Transport: bulkheadhttp.Transport(b, panicky{boom})}
	for range 3 { // more panics than permits
		func() {
			defer func() {
				if r := recover(); r != boom {
					t.Fatalf("recovered %v, want the panic value of next", r)
				}
			}()
			c.Get("http://example.invalid/")
		}()
	}
	semtest.AtRest(t, b, 3, 0, 0, 3)
	var pe *bulkhead.PanicError
	if errs := ev.finished(); !errors.As(errs[0], &pe) || !errors.Is(errs[0], boom) || len(pe.Stack) == 0 {
		t.Fatalf("EventFinished error %v, want a *bulkhead.PanicError for boom", errs[0])
	}

	b = mustNew(t, 1, 0)
	c = &http.Client{Transport: bulkheadhttp.Transport(b, panicky{nil})}
	for range 2 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Get("http://example.invalid/")
		}()
		<-done
	}
	semtest.AtRest(t, b, 2, 0, 0, 2)
}

func TestTransportClassifierPanicReleasesPermit(t *testing.T) {
	srv, _ := stub(t)
	b := mustNew(t, 1, 0)
	c := client(b, bulkheadhttp.WithClassifier(func(int, error) error { panic("classifier") }))
	defer c.CloseIdleConnections()
	for range 2 {
		func() {
			defer func() {
				if r := recover(); r != "classifier" {
					t.Fatalf("recovered %v", r)
				}
			}()
			c.Get(srv.URL)
		}()
	}
	semtest.AtRest(t, b, 2, 0, 0, 2)
}

// Issue 11, point 3: a body dropped without Close gives its permit back
// when the garbage collector finds it, on HTTP/1.1 and on HTTP/2 alike,
// while the stream would otherwise stay open (a large body from a healthy
// server, or a server that hangs after the headers), and the Transport then
// closes the body, which ends the stream: the server sees its request's
// context end.
func TestTransportDroppedBodyReturnsPermit(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		for _, server := range []string{"large body", "hangs"} {
			t.Run(proto+"/"+server, func(t *testing.T) {
				var ended atomic.Int32
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					defer ended.Add(1)
					if server == "hangs" {
						w.WriteHeader(http.StatusOK)
						http.NewResponseController(w).Flush()
						<-r.Context().Done()
						return
					}
					chunk := strings.Repeat("x", 32<<10)
					for range 1 << 10 { // 32 MiB, far beyond any flow-control window
						if _, err := io.WriteString(w, chunk); err != nil {
							return
						}
					}
				})
				srv := httptest.NewUnstartedServer(h)
				if proto == "HTTP/2.0" {
					srv.EnableHTTP2 = true
					srv.StartTLS()
				} else {
					srv.Start()
				}
				defer srv.Close()
				base := srv.Client().Transport.(*http.Transport)
				defer base.CloseIdleConnections()
				// Ends the streams if the test fails, so that srv.Close
				// does not wait for them; the pass criterion is before.
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				const n = 3
				b := mustNew(t, n, 0)
				c := &http.Client{Transport: bulkheadhttp.Transport(b, base)}
				resps := make([]*http.Response, 0, n)
				for range n {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
					resp, err := c.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					if resp.Proto != proto {
						resp.Body.Close()
						t.Fatalf("response over %s, want %s", resp.Proto, proto)
					}
					resps = append(resps, resp)
				}
				if _, err := c.Get(srv.URL); !errors.Is(err, bulkhead.ErrBulkheadFull) {
					t.Fatalf("a request while every permit sits in an unread body: %v", err)
				}
				runtime.KeepAlive(resps)
				resps = nil // dropped: never read, never closed (a caller bug)
				waitFor(t, "the garbage collector to return the permits", func() bool {
					runtime.GC()
					return inFlight(b) == 0
				})
				waitFor(t, "the server to see the streams end", func() bool { return ended.Load() == n })
				semtest.AtRest(t, b, n, 1, 0, 0)
			})
		}
	}
}

// The response the caller gets is a copy of next's: the trailers that
// net/http fills in at the end of the body must reach it, on both
// protocols, declared or not.
func TestTransportKeepsTrailers(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
		t.Run(proto, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/declared" {
					w.Header().Set("Trailer", "Declared")
				}
				io.WriteString(w, "body")
				w.(http.Flusher).Flush() // HTTP/1.1: chunked, so that undeclared trailers can follow
				if r.URL.Path == "/declared" {
					w.Header().Set("Declared", "d")
				}
				w.Header().Set(http.TrailerPrefix+"Undeclared", "u")
			}))
			if proto == "HTTP/2" {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			base := srv.Client().Transport.(*http.Transport)
			defer base.CloseIdleConnections()
			b := mustNew(t, 1, 0)
			c := &http.Client{Transport: bulkheadhttp.Transport(b, base)}
			for path, want := range map[string]string{"/declared": "du", "/undeclared": "u"} {
				resp, err := c.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				io.ReadAll(resp.Body)
				resp.Body.Close()
				if got := resp.Trailer.Get("Declared") + resp.Trailer.Get("Undeclared"); got != want {
					t.Errorf("%s: trailers %v, want %q", path, resp.Trailer, want)
				}
			}
			semtest.AtRest(t, b, 2, 0, 0, 0)
		})
	}
}

func TestTransportNilBulkheadPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "nil *semaphore.Bulkhead") {
			t.Fatalf("recovered %v", r)
		}
	}()
	bulkheadhttp.Transport(nil, nil)
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
	getAll(t, c, srv.URL)
	c.CloseIdleConnections() // must reach the http.Transport under the bulkhead
	waitFor(t, "the server to see the connection closed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return closed == 1
	})
	semtest.AtRest(t, b, 1, 0, 0, 0)
}

func TestTransportNilNextUsesDefaultTransport(t *testing.T) {
	srv, _ := stub(t)
	b := mustNew(t, 1, 0)
	c := &http.Client{Transport: bulkheadhttp.Transport(b, nil)}
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
	semtest.AtRest(t, b, 1, 0, 0, 0)
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
	semtest.AtRest(t, b, 1, 0, 0, 0)
}

// abortBody is a response body whose Read blocks until Close, then fails as
// a connection closed under it does. Close returns only once the caller's
// Read has returned, so that the Read's error comes first: the order that
// lost the race in 13 of 50 runs under -race.
type abortBody struct {
	closed       chan struct{} // closed by Close
	readReturned chan struct{} // closed by the test when the guarded Read returned
}

var errClosedConn = errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: use of closed network connection")

func (b *abortBody) Read([]byte) (int, error) {
	<-b.closed
	return 0, errClosedConn
}

func (b *abortBody) Close() error {
	close(b.closed)
	<-b.readReturned
	return nil
}

type bodyTransport struct{ body io.ReadCloser }

func (t bodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: t.body, Header: http.Header{}, Request: req}, nil
}

// Closing a body while another goroutine reads it is how a caller aborts a
// read: the Read's error that the Close causes is not the call's failure.
func TestTransportCloseDuringReadIsNotAFailure(t *testing.T) {
	b := mustNew(t, 1, 0)
	ev := record(t, b)
	body := &abortBody{closed: make(chan struct{}), readReturned: make(chan struct{})}
	c := &http.Client{Transport: bulkheadhttp.Transport(b, bodyTransport{body})}
	resp, err := c.Get("http://dependency.invalid/")
	if err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(make([]byte, 8))
		close(body.readReturned)
		readErr <- err
	}()
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-readErr; err != errClosedConn {
		t.Fatalf("the aborted Read returned %v, want the body's own error", err)
	}
	if s := b.Stats(); s.Finished != 1 || s.Failed != 0 || s.InFlight != 0 {
		t.Fatalf("stats %+v: want 1 finished, 0 failed, none in flight", s)
	}
	if errs := ev.finished(); len(errs) != 1 || errs[0] != nil {
		t.Fatalf("EventFinished errors %v, want one nil", errs)
	}
}
