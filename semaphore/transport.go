package semaphore

import (
	"io"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"
)

// Transport returns an [http.RoundTripper] that sends every request through
// next (http.DefaultTransport when next is nil) while holding a permit of b.
// It waits for the permit with the request's context. The permit is held
// until the response body is closed or read to EOF, because the dependency is
// busy until then; a failed round trip releases it at once. A response whose
// body is dropped without being closed returns its permit only when the
// garbage collector finds the body (and its EventFinished is then published
// on the runtime's cleanup goroutine), so always close response bodies.
// http.Client.CloseIdleConnections reaches next through the returned
// RoundTripper.
//
// A rejected request fails with b's [*bulkhead.FullError], which http.Client
// wraps in a *url.Error: errors.Is(err, bulkhead.ErrBulkheadFull) still
// matches it.
func Transport(b *Bulkhead, next http.RoundTripper) http.RoundTripper {
	if b == nil {
		panic("semaphore: Transport called with a nil *Bulkhead")
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{b: b, next: next}
}

type transport struct {
	b    *Bulkhead
	next http.RoundTripper
}

// CloseIdleConnections closes next's idle connections, if next can, so that
// http.Client.CloseIdleConnections reaches through the bulkhead.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.b.Acquire(req.Context()); err != nil {
		// A RoundTripper must close the request body, even on errors.
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	var start time.Time
	if t.b.hub.Active() {
		start = time.Now()
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		t.b.finish(start, err, true)
		return nil, err
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		t.b.finish(start, nil, false)
		return resp, nil
	}
	p := &permit{b: t.b, start: start}
	var body *guardedBody
	if rw, ok := resp.Body.(io.ReadWriteCloser); ok {
		// A 101 Switching Protocols body is writable; keep it so.
		rwb := &guardedReadWriter{guardedBody{ReadCloser: rw, p: p}, rw}
		body = &rwb.guardedBody
		resp.Body = rwb
		body.cleanup = runtime.AddCleanup(rwb, (*permit).release, p)
	} else {
		body = &guardedBody{ReadCloser: resp.Body, p: p}
		resp.Body = body
		body.cleanup = runtime.AddCleanup(body, (*permit).release, p)
	}
	return resp, nil
}

// permit is a permit held for a response body. It must not point to the
// body, so that the body can be collected while the permit waits for it.
type permit struct {
	b     *Bulkhead
	start time.Time
	done  atomic.Bool
}

func (p *permit) release() {
	if p.done.CompareAndSwap(false, true) {
		p.b.finish(p.start, nil, false)
	}
}

type guardedBody struct {
	io.ReadCloser
	p       *permit
	cleanup runtime.Cleanup
}

func (g *guardedBody) Read(b []byte) (int, error) {
	n, err := g.ReadCloser.Read(b)
	if err == io.EOF {
		g.done()
	}
	return n, err
}

func (g *guardedBody) Close() error {
	err := g.ReadCloser.Close()
	g.done()
	return err
}

func (g *guardedBody) done() {
	g.cleanup.Stop()
	g.p.release()
}

type guardedReadWriter struct {
	guardedBody
	w io.Writer
}

func (g *guardedReadWriter) Write(b []byte) (int, error) { return g.w.Write(b) }
