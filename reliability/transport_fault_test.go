package reliability

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
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

// newSem returns a semaphore bulkhead or fails the test.
func newSem(t testing.TB, limit int, wait time.Duration) *semaphore.Bulkhead {
	t.Helper()
	b, err := semaphore.New("dep", semaphore.Config{MaxConcurrentCalls: limit, MaxWaitDuration: wait})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// guardedClient is an http.Client whose requests go through b, on its own
// http.Transport so that the test can close its connections.
func guardedClient(t testing.TB, b *semaphore.Bulkhead) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: bulkheadhttp.Transport(b, tr)}
}

// server starts an httptest server, closed at cleanup.
func server(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestFaultHangingDependency(t *testing.T) {
	started := make(chan struct{}, 1)
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done() // hangs until the client gives up
	})
	b := newSem(t, 1, 0)
	c := guardedClient(t, b)

	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		got <- err
	}()
	<-started
	// The dependency hangs with the only permit: the next caller is turned
	// away at once instead of piling up.
	if _, err := c.Get(srv.URL); !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("second request while the first hangs: %v, want ErrBulkheadFull", err)
	}
	cancel() // the caller gives up on the hanging dependency
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("hanging request: %v, want context.Canceled", err)
	}
	semtest.AtRest(t, b, 1, 1, 0, 1)
}

func TestFaultClientTimeoutOnHangingDependency(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	b := newSem(t, 2, 0)
	c := guardedClient(t, b)
	c.Timeout = 20 * time.Millisecond // the fault: the client's own timeout fires
	for range 3 {
		_, err := c.Get(srv.URL)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("got %v, want a client timeout", err)
		}
	}
	semtest.AtRest(t, b, 3, 0, 0, 3)
}

// rawServer accepts connections on loopback and hands each to serve.
func rawServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				serve(conn)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

// reset closes conn with a TCP RST instead of a FIN.
func reset(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// readRequest reads one request's head from conn.
func readRequest(conn net.Conn) {
	http.ReadRequest(bufio.NewReader(conn))
}

func TestFaultConnectionResetBeforeResponse(t *testing.T) {
	url := rawServer(t, func(conn net.Conn) {
		readRequest(conn)
		reset(conn)
	})
	b := newSem(t, 1, 0)
	c := guardedClient(t, b)
	for range 3 {
		if _, err := c.Get(url); err == nil || errors.Is(err, bulkhead.ErrBulkheadFull) {
			t.Fatalf("got %v, want a connection error", err)
		}
	}
	semtest.AtRest(t, b, 3, 0, 0, 3)
}

func TestFaultConnectionResetMidBody(t *testing.T) {
	url := rawServer(t, func(conn net.Conn) {
		readRequest(conn)
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial")
		reset(conn)
	})
	b := newSem(t, 1, 0)
	c := guardedClient(t, b)
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	if err == nil {
		t.Fatal("reading a reset body succeeded")
	}
	// A read that fails ends the body as EOF does: the dependency is no
	// longer busy, the permit is back at once, and the call failed.
	semtest.AtRest(t, b, 1, 0, 0, 1)
	resp.Body.Close()
	semtest.AtRest(t, b, 1, 0, 0, 1)
}

func TestFaultErrorStatus(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "dependency unavailable", http.StatusServiceUnavailable)
	})
	b := newSem(t, 1, 0)
	var finished error
	b.Subscribe(func(e bulkhead.Event) {
		if e.Type == bulkhead.EventFinished {
			finished = e.Err
		}
	})
	c := guardedClient(t, b)
	resp, err := c.Get(srv.URL)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("got %v, %v", resp, err)
	}
	// The permit is held until the body is done, as for any response; the
	// call counts as failed, and as the dependency's refusal.
	if s := b.Stats(); s.InFlight != 1 {
		t.Fatalf("in flight %d while a 503 body is unread", s.InFlight)
	}
	resp.Body.Close()
	semtest.AtRest(t, b, 1, 0, 0, 1)
	if !errors.Is(finished, bulkhead.ErrOverloaded) {
		t.Fatalf("EventFinished error %v, want one matching ErrOverloaded", finished)
	}
}

// slowStream serves a body in chunks, one each time the test sends on next.
func slowStream(t *testing.T, chunks int) (srv *httptest.Server, next chan struct{}) {
	next = make(chan struct{})
	release := make(chan struct{})
	srv = server(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // the headers now, the body later
		for i := range chunks {
			select {
			case <-next:
			case <-release:
				return
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(w, "chunk%d;", i)
			w.(http.Flusher).Flush()
		}
	})
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return srv, next
}

func TestFaultSlowStreamingBodyHoldsPermitUntilEOF(t *testing.T) {
	srv, next := slowStream(t, 5)
	b := newSem(t, 1, time.Hour)
	c := guardedClient(t, b)
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	// A second caller waits for the permit while the body streams.
	second := make(chan error, 1)
	go func() {
		resp, err := c.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		second <- err
	}()
	waitFor(t, "the second caller to wait", func() bool { return b.Stats().Waiting == 1 })
	buf := make([]byte, 64)
	eof := false
	for i := range 5 {
		next <- struct{}{}
		n, err := resp.Body.Read(buf)
		// The last chunk may come with io.EOF in the same Read.
		if (err != nil && !(i == 4 && err == io.EOF)) || !strings.HasPrefix(string(buf[:n]), fmt.Sprintf("chunk%d", i)) {
			t.Fatalf("chunk %d: %q, %v", i, buf[:n], err)
		}
		if eof = err == io.EOF; eof {
			break
		}
		if s := b.Stats(); s.InFlight != 1 || s.Waiting != 1 {
			t.Fatalf("while streaming: %+v", s)
		}
	}
	if !eof {
		if _, err := resp.Body.Read(buf); err != io.EOF {
			t.Fatalf("after the last chunk: %v, want io.EOF", err)
		}
	}
	// EOF returned the permit, and it went to the waiting caller, who is
	// now served (its body is closed at once).
	close(next)
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	semtest.AtRest(t, b, 2, 0, 0, 0)
}

func TestFaultBodyClosedMidStream(t *testing.T) {
	srv, next := slowStream(t, 100)
	b := newSem(t, 1, 0)
	c := guardedClient(t, b)
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	next <- struct{}{}
	buf := make([]byte, 8)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // the caller stops reading early
	resp.Body.Close()
	semtest.AtRest(t, b, 1, 0, 0, 0)
	if _, err := resp.Body.Read(buf); err == nil {
		t.Fatal("read after Close succeeded")
	}
	semtest.AtRest(t, b, 1, 0, 0, 0)
}

func TestFaultRejectedRequestBodyIsClosed(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {})
	b := newSem(t, 1, 0)
	c := guardedClient(t, b)
	if !b.TryAcquire() {
		t.Fatal("TryAcquire")
	}
	body := &closeRecorder{Reader: strings.NewReader("payload")}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, body)
	if _, err := c.Do(req); !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("got %v, want ErrBulkheadFull", err)
	}
	if body.closed.Load() != 1 {
		t.Fatalf("request body closed %d times after a rejection, want 1", body.closed.Load())
	}
	b.Release()
	semtest.AtRest(t, b, 1, 1, 0, 0)
}

type closeRecorder struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeRecorder) Close() error {
	c.closed.Add(1)
	return nil
}

// TestFaultDroppedBodyReturnsPermitAfterGC: a response whose body is never
// closed nor read to EOF, and which the caller drops, returns its permit
// when the garbage collector finds the body (runtime.AddCleanup), and the
// Transport then closes the body, which frees the connection under it.
func TestFaultDroppedBodyReturnsPermitAfterGC(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 64<<10)) // more than fits in buffers
	})
	const n = 4
	b := newSem(t, n, 0)
	c := guardedClient(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resps := make([]*http.Response, 0, n)
	for range n {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resps = append(resps, resp)
	}
	if s := b.Stats(); s.InFlight != n {
		t.Fatalf("in flight %d while the bodies are reachable, want %d", s.InFlight, n)
	}
	if _, err := c.Get(srv.URL); !errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("a request while every permit sits in an unread body: %v", err)
	}
	runtime.KeepAlive(resps)
	resps = nil // dropped: never read, never closed (a caller bug)
	waitFor(t, "the garbage collector to return the permits", func() bool {
		runtime.GC()
		return b.Stats().InFlight == 0
	})
	semtest.AtRest(t, b, n, 1, 0, 0)
	cancel() // frees net/http's connections, which the dropped bodies kept busy
}

// TestFaultMix sends many concurrent requests to a dependency that answers
// each path with a different fault, and handles each response in a
// different way (close, read to EOF, read then close, drop); afterwards every
// permit is back and every request is counted once.
func TestFaultMix(t *testing.T) {
	var hits atomic.Int64
	hang := make(chan struct{})
	srv := server(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/ok":
			io.WriteString(w, "ok")
		case "/error":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "/hang":
			select {
			case <-r.Context().Done():
			case <-hang:
			}
		case "/reset":
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				reset(conn)
			}
		case "/slow":
			for i := range 3 {
				fmt.Fprintf(w, "part%d;", i)
				w.(http.Flusher).Flush()
				runtime.Gosched()
			}
		}
	})
	t.Cleanup(func() { close(hang) })
	b := newSem(t, 4, 2*time.Millisecond)
	c := guardedClient(t, b)
	paths := []string{"/ok", "/error", "/hang", "/reset", "/slow"}
	var o outcomes
	var ok, bad, dropped, ctxErrs atomic.Uint64
	baseCtx, cancelAll := context.WithCancel(context.Background())
	defer cancelAll()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(soakSeed(t), uint64(w)))
			for range 40 {
				o.calls.Add(1)
				path := paths[r.IntN(len(paths))]
				ctx, cancel := context.WithTimeout(baseCtx, time.Duration(1+r.IntN(20))*time.Millisecond)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
				resp, err := c.Do(req)
				switch {
				case err == nil:
					ok.Add(1)
					var readErr error
					switch r.IntN(4) {
					case 0:
						resp.Body.Close()
					case 1:
						_, readErr = io.ReadAll(resp.Body)
					case 2:
						_, readErr = io.ReadAll(resp.Body)
						resp.Body.Close()
					case 3:
						dropped.Add(1) // left for the garbage collector
					}
					if resp.StatusCode >= 500 || readErr != nil {
						bad.Add(1) // a 5xx, or a body that failed: counted Failed
					}
				case errors.Is(err, bulkhead.ErrBulkheadFull):
					o.rejected.Add(1)
				default:
					// a round trip that failed (counted Failed), a wait
					// that timed out (counted Cancelled), or a context that
					// had ended before the request reached the bulkhead
					// (counted nowhere): Stats tell which
					if errors.Is(err, context.DeadlineExceeded) {
						ctxErrs.Add(1)
					}
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	waitFor(t, "every permit back", func() bool {
		runtime.GC()
		return b.Stats().InFlight == 0
	})
	s := b.Stats()
	if s.Waiting != 0 || s.Permitted != s.Finished || s.AvailableConcurrentCalls != 4 {
		t.Fatalf("not at rest: %+v", s)
	}
	if s.Rejected != o.rejected.Load() {
		t.Fatalf("Rejected %d, callers saw %d rejections", s.Rejected, o.rejected.Load())
	}
	// Every request is one of: permitted (succeeded, or failed in the round
	// trip), rejected, cancelled while waiting, or turned away uncounted
	// because its 1-20ms deadline had passed before it reached the bulkhead;
	// the callers saw a deadline error for each of the last.
	counted := s.Permitted + s.Rejected + s.Cancelled
	if counted > o.calls.Load() || o.calls.Load()-counted > ctxErrs.Load() {
		t.Fatalf("permitted+rejected+cancelled = %d of %d requests, with %d deadline errors; %+v",
			counted, o.calls.Load(), ctxErrs.Load(), s)
	}
	if s.Permitted-s.Failed != ok.Load()-bad.Load() {
		t.Fatalf("%d responses, %d of them 5xx or failed reads, but stats count %d permitted calls that did not fail",
			ok.Load(), bad.Load(), s.Permitted-s.Failed)
	}
	t.Logf("%d requests: %d responses (%d dropped unclosed), %d rejected, %d cancelled waiting, %d failed round trips; %d reached the server",
		o.calls.Load(), ok.Load(), dropped.Load(), s.Rejected, s.Cancelled, s.Failed, hits.Load())
	cancelAll()
}
