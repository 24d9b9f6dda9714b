package bulkheadhttp

import (
	"errors"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync/atomic"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// Transport returns an [http.RoundTripper] that sends every request through
// next (http.DefaultTransport when nil) while holding a permit of b. It waits
// for the permit with the request's context. A rejected request fails with
// b's [*bulkhead.FullError], which http.Client wraps in a *url.Error:
// errors.Is(err, bulkhead.ErrBulkheadFull) still matches it.
//
// The permit is held until the response body is closed, read to io.EOF or
// fails a read, because the dependency is busy until then (a read that fails
// because the caller closed the body is not a failure); a response without
// a body, a failed round trip and a panic in next give it back at once (the
// panic goes on up the caller's stack). The call's outcome is the
// classifier's (see [Classify], [WithClassifier]) for the response's status,
// or for the error of the round trip or of a body read.
//
// Always close response bodies. A body dropped without Close gives its
// permit back only when the garbage collector finds the response
// unreachable, over HTTP/1.1 and HTTP/2 alike; the Transport then also
// closes the body, which frees the connection or stream under it, and the
// call's EventFinished is published on a goroutine of its own.
//
// http.Client.CloseIdleConnections reaches next through the returned
// RoundTripper. Options other than WithClassifier panic.
func Transport(b *semaphore.Bulkhead, next http.RoundTripper, opts ...Option) http.RoundTripper {
	if b == nil {
		panic("bulkheadhttp: Transport called with a nil *semaphore.Bulkhead")
	}
	c := newConfig(opts)
	if c.serverOnly != "" {
		panic("bulkheadhttp: " + c.serverOnly + " is an option of Handler, not of Transport")
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{b: b, next: next, classify: c.classify}
}

type transport struct {
	b        *semaphore.Bulkhead
	next     http.RoundTripper
	classify func(int, error) error
}

// CloseIdleConnections closes next's idle connections, if next can, so that
// http.Client.CloseIdleConnections reaches through the bulkhead.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// errGoexit is the outcome of a call whose goroutine ended in
// runtime.Goexit: it counts as failed.
var errGoexit = errors.New("bulkheadhttp: runtime.Goexit called")

// abort gives back the permit of a call that panicked (r != nil) or called
// runtime.Goexit (r == nil), and lets the panic go on.
func abort(p semaphore.Permit, r any) {
	if r == nil {
		p.Release(errGoexit)
		return
	}
	p.Release(&bulkhead.PanicError{Value: r, Stack: debug.Stack()})
	panic(r)
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	p, err := t.b.AcquirePermit(req.Context())
	if err != nil {
		// A RoundTripper must close the request body, even on errors.
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	var resp *http.Response
	returned := false
	defer func() {
		if !returned {
			if resp != nil && resp.Body != nil {
				resp.Body.Close() // the classifier panicked
			}
			abort(p, recover())
		}
	}()
	resp, err = t.next.RoundTrip(req)
	if err != nil {
		outcome := t.classify(0, err)
		returned = true
		p.Release(outcome)
		return nil, err
	}
	outcome := t.classify(resp.StatusCode, nil)
	returned = true
	if resp.Body == nil || resp.Body == http.NoBody {
		p.Release(outcome)
		return resp, nil
	}
	return guard(resp, &permit{p: p, status: resp.StatusCode, outcome: outcome, classify: t.classify, body: resp.Body}), nil
}

// guard returns a copy of resp whose body holds pm until it is done. The
// copy, not resp, goes to the caller: an HTTP/2 connection keeps a pointer
// to resp while the stream is open (to fill in its trailers), and through
// resp.Body it would keep the guarded body, and the permit, reachable for
// as long as a dropped stream stays open.
func guard(resp *http.Response, pm *permit) *http.Response {
	out := new(http.Response)
	*out = *resp
	g := guardedBody{ReadCloser: resp.Body, pm: pm, orig: resp, out: out}
	if rw, ok := resp.Body.(io.ReadWriteCloser); ok {
		// A 101 Switching Protocols body is writable; keep it so.
		rwb := &guardedReadWriter{g, rw}
		rwb.cleanup = runtime.AddCleanup(rwb, (*permit).dropped, pm)
		out.Body = rwb
	} else {
		gb := &g
		gb.cleanup = runtime.AddCleanup(gb, (*permit).dropped, pm)
		out.Body = gb
	}
	return out
}

// permit is a permit held for a response body. It must not point to the
// guarded body, so that the body can be collected while the permit waits
// for it.
type permit struct {
	p        semaphore.Permit
	status   int
	outcome  error // the classifier's verdict on the status
	classify func(int, error) error
	body     io.Closer // the body next returned
	done     atomic.Bool
	closing  atomic.Bool // the caller called Close
}

// release gives the permit back once, with the outcome of the status, or
// that of readErr when the body failed.
func (pm *permit) release(readErr error) {
	if !pm.done.CompareAndSwap(false, true) {
		return
	}
	outcome := pm.outcome
	if readErr != nil {
		outcome = pm.classify(pm.status, readErr)
	}
	pm.p.Release(outcome)
}

// dropped runs when the garbage collector finds a guarded body that was
// never closed nor read to the end. Off the runtime's cleanup goroutine,
// which must not wait for subscribers or for the network, it gives the
// permit back and closes the body, which frees the connection or stream.
func (pm *permit) dropped() {
	go func() {
		defer pm.body.Close()
		pm.release(nil)
	}()
}

type guardedBody struct {
	io.ReadCloser
	pm        *permit
	orig, out *http.Response
	cleanup   runtime.Cleanup
}

func (g *guardedBody) Read(b []byte) (int, error) {
	n, err := g.ReadCloser.Read(b)
	if err != nil {
		if err == io.EOF && g.out.Trailer == nil {
			// net/http fills in the trailers of the response it returned,
			// at the end of the body.
			g.out.Trailer = g.orig.Trailer
		}
		g.done(err)
	}
	return n, err
}

func (g *guardedBody) Close() error {
	// Set before the body is closed: a Read on another goroutine that the
	// Close ends ("use of closed network connection") must not count the
	// call failed. Closing is how a caller aborts a read.
	g.pm.closing.Store(true)
	err := g.ReadCloser.Close()
	g.done(nil)
	return err
}

func (g *guardedBody) done(err error) {
	g.cleanup.Stop()
	if err == io.EOF || g.pm.closing.Load() {
		err = nil
	}
	g.pm.release(err)
}

type guardedReadWriter struct {
	guardedBody
	w io.Writer
}

func (g *guardedReadWriter) Write(b []byte) (int, error) { return g.w.Write(b) }
