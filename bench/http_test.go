package bench

// Group 7: the cost per request of server-side admission. Every row serves
// the same handler (it writes "ok") into a fresh httptest.ResponseRecorder:
// bare, behind the channel-semaphore middleware people write by hand today,
// and behind bulkheadhttp.Handler. base_semaphore_AcquirePermit is the
// semaphore's own cost (a permit taken and released around the handler),
// so that Handler's overhead reads as Handler - AcquirePermit against
// floor_bare.

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/bulkhead-go/bulkhead/bulkheadhttp"
)

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })

// serveOp returns one request served by h into a new recorder.
func serveOp(h http.Handler) func() {
	req := httptest.NewRequest(http.MethodGet, "/checkout/pay", nil)
	return func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			panic("refused: " + rec.Result().Status)
		}
	}
}

// chanLimit is the middleware hand-rolled in many services: a buffered
// channel as the semaphore, 503 when it is full.
func chanLimit(n int, next http.Handler) http.Handler {
	sem := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
		}
	})
}

var httpCases = []opCase{
	{floorKind, "bare", func(b *testing.B) func() { return serveOp(okHandler) }},
	{baseKind, "semaphore_AcquirePermit", func(b *testing.B) func() {
		s := newSemaphore(b, bigLimit)
		return serveOp(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, err := s.AcquirePermit(r.Context())
			if err != nil {
				panic(err)
			}
			okHandler(w, r)
			p.Release(nil)
		}))
	}},
	{peerKind, "chan_middleware", func(b *testing.B) func() { return serveOp(chanLimit(bigLimit, okHandler)) }},
	{oursKind, "bulkheadhttp_Handler", func(b *testing.B) func() {
		return serveOp(bulkheadhttp.Handler(newSemaphore(b, bigLimit), okHandler))
	}},
}

// BenchmarkG9_HTTPHandler serves one request through each approach, with a
// limit that is never reached.
func BenchmarkG9_HTTPHandler(b *testing.B) { runOps(b, httpCases, 0) }
