package bulkheadtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/bulkheadhttp"
	"github.com/bulkhead-go/bulkhead/bulkheadtest"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// stub is the article's pair of downstream dependencies on loopback: /pay
// answers "paid" and /stock answers "ok", each behind its own gate. The
// gate plays the slow payment gateway: the calls that got through stay in
// progress until every worker of the burst has settled.
type stub struct {
	URL        string
	pay, stock *bulkheadtest.Gate
}

func newStub(t *testing.T) *stub {
	s := &stub{pay: new(bulkheadtest.Gate), stock: new(bulkheadtest.Gate)}
	mux := http.NewServeMux()
	mux.Handle("GET /pay", s.pay.Handler(reply("paid")))
	mux.Handle("GET /stock", s.stock.Handler(reply("ok")))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func reply(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) })
}

// client returns an http.Client whose requests go through b.
func client(t *testing.T, b *semaphore.Bulkhead) *http.Client {
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	return &http.Client{Transport: bulkheadhttp.Transport(b, base)}
}

// get fetches url and returns nil if it answered 200 with want, the
// client's error (a rejection among them) as is, and an error otherwise.
func get(ctx context.Context, c *http.Client, url, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(body) != want {
		return fmt.Errorf("GET %s: %s %q, want 200 %q", url, resp.Status, body, want)
	}
	return nil
}

func httpBursts(s *stub, paymentClient, inventoryClient *http.Client) (pay, stock bulkheadtest.Burst) {
	pay = bulkheadtest.Burst{Name: "payment", Workers: 6, Limit: 2, Gate: s.pay,
		Call: func(ctx context.Context) error { return get(ctx, paymentClient, s.URL+"/pay", "paid") }}
	stock = bulkheadtest.Burst{Name: "inventory", Workers: 8, Limit: 8, Gate: s.stock,
		Call: func(ctx context.Context) error { return get(ctx, inventoryClient, s.URL+"/stock", "ok") }}
	return pay, stock
}

// The article's isolation test, on the real Transport: 6 payment and 8
// inventory workers released together against limits 2 and 8.
func TestArticleIsolationOverTransport(t *testing.T) {
	s := newStub(t)
	payment := newSemaphore(t, "payment", 2, 0)
	inventory := newSemaphore(t, "inventory", 8, 0)
	var (
		mu         sync.Mutex
		rejections []error
	)
	cancel := payment.Subscribe(func(e bulkhead.Event) {
		if e.Type == bulkhead.EventRejected {
			mu.Lock()
			rejections = append(rejections, e.Err)
			mu.Unlock()
		}
	})
	defer cancel()
	pay, stock := httpBursts(s, client(t, payment), client(t, inventory))

	results := bulkheadtest.AssertIsolated(t, pay, stock)

	p, i := results[0], results[1]
	t.Logf("RESULT paymentAccepted=%d paymentRejected=%d paymentOther=%d paymentMaxPermitted=%d inventoryAccepted=%d inventoryRejected=%d inventoryOther=%d paymentAvailable=%d inventoryAvailable=%d",
		p.Accepted, p.Rejected, p.Other, p.MaxConcurrent, i.Accepted, i.Rejected, i.Other,
		payment.Stats().AvailableConcurrentCalls, inventory.Stats().AvailableConcurrentCalls)
	wantResult(t, p, 2, 4, 0, 2)
	wantResult(t, i, 8, 0, 0, 8)
	wantAvailable(t, payment, 2)
	wantAvailable(t, inventory, 8)
	mu.Lock()
	defer mu.Unlock()
	if len(rejections) != 4 {
		t.Errorf("payment published %d rejections, want 4", len(rejections))
	}
	for _, err := range rejections {
		var full *bulkhead.FullError
		if !errors.As(err, &full) || full.Name != "payment" || full.MaxConcurrentCalls != 2 {
			t.Errorf("rejection %v, want payment's FullError with limit 2", err)
		}
	}
}

// The pitfall over the Transport: both clients on one bulkhead of 8.
func TestSharedBulkheadOverTransportFailsIsolation(t *testing.T) {
	s := newStub(t)
	shared := newSemaphore(t, "shared", 8, 0)
	pay, stock := httpBursts(s, client(t, shared), client(t, shared))

	results, err := bulkheadtest.RunInOrder(guardCtx(t), pay, stock)
	if err != nil {
		t.Fatal(err)
	}
	wantResult(t, results[0], 6, 0, 0, 6)
	wantResult(t, results[1], 2, 6, 0, 2)
	if err := bulkheadtest.Check(results); err == nil {
		t.Error("Check passed one bulkhead shared by payment and inventory")
	}
	wantAvailable(t, shared, 8)
}
