package bulkheadhttp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// Handler returns an [http.Handler] that serves each request with next
// while holding a permit of b, from before next is called until it returns.
// A request waits for a permit up to b's MaxWaitDuration, or until its
// context ends.
//
// A request that gets no permit is not passed to next: it is answered with
// 503 Service Unavailable (or 429, see [WithStatus]) and a Retry-After
// header of 1 second ([WithRetryAfter]) when the bulkhead is full, and with
// the same status and no Retry-After when its context ended while it waited
// (the client went away, or a deadline passed). [WithRejectHandler]
// replaces that answer, [WithBypass] exempts requests.
//
// The call's outcome is the classifier's for the status next wrote (200 if
// it wrote none): by default a 5xx counts as failed (see [Classify]). A
// panic in next counts as failed, with a [*bulkhead.PanicError], and goes on
// up the stack, so that net/http's own recovery and logging still happen.
//
// next gets a ResponseWriter that records the status. It is an
// http.Flusher and an http.Hijacker, its Unwrap method gives
// [http.ResponseController] the writer underneath (for deadlines and full
// duplex), and ReadFrom keeps net/http's sendfile path, so streaming
// responses, server-sent events and hijacked connections (WebSocket) keep
// working. A hijacked connection counts as a 200 and holds its permit until
// next returns.
func Handler(b *semaphore.Bulkhead, next http.Handler, opts ...Option) http.Handler {
	if b == nil {
		panic("bulkheadhttp: Handler called with a nil *semaphore.Bulkhead")
	}
	if next == nil {
		panic("bulkheadhttp: Handler called with a nil http.Handler")
	}
	return &handler{b: b, next: next, config: newConfig(opts)}
}

type handler struct {
	b    *semaphore.Bulkhead
	next http.Handler
	config
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.bypass != nil && h.bypass(r) {
		h.next.ServeHTTP(w, r)
		return
	}
	r = h.prioritize(r)
	// Do holds the permit until next returns, counts a panic or a
	// runtime.Goexit in next as a failure and lets it go on up, so that
	// net/http's own recovery and logging still happen.
	ran := false
	err := h.b.Do(r.Context(), func(context.Context) error {
		ran = true
		rw := &responseWriter{ResponseWriter: w}
		h.next.ServeHTTP(rw, r)
		status := rw.status
		if status == 0 {
			status = http.StatusOK // what net/http sends for a handler that writes nothing
		}
		return h.classify(status, nil)
	})
	if !ran {
		h.refuse(w, r, err)
	}
}

// refuse answers a request that got no permit.
func (c *config) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if c.reject != nil {
		c.reject(w, r, err)
		return
	}
	if c.retryAfter != "" && errors.Is(err, bulkhead.ErrBulkheadFull) {
		w.Header().Set("Retry-After", c.retryAfter)
	}
	http.Error(w, http.StatusText(c.status), c.status)
}

// responseWriter records the final status that the handler writes.
type responseWriter struct {
	http.ResponseWriter
	status int // 0 until the handler writes a final status
}

func (w *responseWriter) WriteHeader(code int) {
	// 1xx statuses other than 101 are informational: a final one follows.
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// ReadFrom lets io.Copy reach the server's own ReadFrom (sendfile).
func (w *responseWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return io.Copy(w.ResponseWriter, r)
}

// Flush sends any buffered data to the client, as http.Flusher.
func (w *responseWriter) Flush() { w.FlushError() }

// FlushError is Flush, reporting the error, for http.ResponseController.
func (w *responseWriter) FlushError() error {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack takes over the connection, as http.Hijacker; it fails with
// http.ErrNotSupported where the writer underneath cannot (HTTP/2).
func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap returns the ResponseWriter underneath, for http.ResponseController.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
