package semaphore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// stub serves "hello" on / and blocks /slow until release is closed.
func stub(t *testing.T) (srv *httptest.Server, release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
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

func client(b *semaphore.Bulkhead) *http.Client {
	tr := &http.Transport{}
	return &http.Client{Transport: semaphore.Transport(b, tr)}
}

func inFlight(b *semaphore.Bulkhead) int { return b.Stats().InFlight }

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
	resp.Body.Close()
	resp.Body.Close() // a second Close must not release twice
	checkRest(t, b, 1, 1, 0, 0)
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
	checkRest(t, b, 1, 0, 0, 0)
}

func TestTransportReleasesOnRoundTripError(t *testing.T) {
	srv, _ := stub(t)
	srv.Close() // nothing listens any more
	b := mustNew(t, 1, 0)
	c := client(b)
	if _, err := c.Get(srv.URL); err == nil || errors.Is(err, bulkhead.ErrBulkheadFull) {
		t.Fatalf("want a connection error, got %v", err)
	}
	checkRest(t, b, 1, 0, 0, 1)
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
	checkRest(t, b, 1, 0, 1, 0)
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
	checkRest(t, b, 1, 0, 0, 0)
}

// recorder keeps the bodies of the responses next returns.
type recorder struct {
	next   http.RoundTripper
	bodies []io.ReadCloser
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err == nil {
		r.bodies = append(r.bodies, resp.Body)
	}
	return resp, err
}

// A body that is never closed keeps its permit until the garbage collector
// finds the dropped response. (The connection under it stays busy until
// then too: that part is net/http's, and this test closes it by hand.)
func TestTransportDroppedBodyReturnsPermitAfterGC(t *testing.T) {
	srv, _ := stub(t)
	b := mustNew(t, 1, 0)
	tr := &http.Transport{}
	rec := &recorder{next: tr}
	c := &http.Client{Transport: semaphore.Transport(b, rec)}
	func() {
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp // dropped without Close: a caller bug
	}()
	if inFlight(b) != 1 {
		t.Fatal("permit should be held while the body is reachable")
	}
	waitFor(t, "the cleanup to return the permit", func() bool {
		runtime.GC()
		return inFlight(b) == 0
	})
	for _, body := range rec.bodies {
		body.Close()
	}
	tr.CloseIdleConnections()
	checkRest(t, b, 1, 0, 0, 0)
}

func TestTransportNilBulkheadPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "nil *Bulkhead") {
			t.Fatalf("recovered %v", r)
		}
	}()
	semaphore.Transport(nil, nil)
}
