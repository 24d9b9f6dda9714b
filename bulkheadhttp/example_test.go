package bulkheadhttp_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/bulkheadhttp"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

func ExampleTransport() {
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refund" {
			http.Error(w, "refunds are down", http.StatusBadGateway)
			return
		}
		io.WriteString(w, "paid")
	}))
	defer gateway.Close()

	payment, _ := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 2})
	client := &http.Client{Transport: bulkheadhttp.Transport(payment, nil)}
	defer client.CloseIdleConnections()

	resp, err := client.Get(gateway.URL + "/pay")
	if err != nil {
		fmt.Println(err) // errors.Is(err, bulkhead.ErrBulkheadFull) when payment is saturated
		return
	}
	fmt.Println("in flight while the body is open:", payment.Stats().InFlight)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body), "- in flight after Close:", payment.Stats().InFlight)

	// A 5xx is a response, but the call counts as failed.
	resp, _ = client.Get(gateway.URL + "/refund")
	resp.Body.Close()
	s := payment.Stats()
	fmt.Println("finished", s.Finished, "failed", s.Failed)
	// Output:
	// in flight while the body is open: 1
	// paid - in flight after Close: 0
	// finished 2 failed 1
}

func ExampleHandler() {
	checkout, _ := semaphore.New("checkout", semaphore.Config{MaxConcurrentCalls: 1})
	entered, release := make(chan struct{}, 1), make(chan struct{})
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release // a slow payment
		io.WriteString(w, "paid")
	})
	mux := http.NewServeMux()
	mux.Handle("/checkout/pay", bulkheadhttp.Handler(checkout, pay))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	first := make(chan string)
	go func() {
		resp, _ := http.Get(srv.URL + "/checkout/pay")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		first <- string(body)
	}()
	<-entered // the first request holds the permit while pay runs
	resp, _ := http.Get(srv.URL + "/checkout/pay")
	resp.Body.Close()
	fmt.Println("second request:", resp.Status, "Retry-After:", resp.Header.Get("Retry-After"))
	close(release)
	fmt.Println("first request:", <-first)
	// Output:
	// second request: 503 Service Unavailable Retry-After: 1
	// first request: paid
}

func ExampleWithClassifier() {
	// Count a 429 as the dependency's refusal too, as well as what Classify
	// counts: transport errors and 5xx.
	also429 := bulkheadhttp.WithClassifier(func(status int, err error) error {
		if status == http.StatusTooManyRequests {
			return &bulkheadhttp.StatusError{Code: status}
		}
		return bulkheadhttp.Classify(status, err)
	})
	search, _ := semaphore.New("search", semaphore.DefaultConfig())
	client := &http.Client{Transport: bulkheadhttp.Transport(search, nil, also429)}
	_ = client

	err := bulkheadhttp.Classify(http.StatusServiceUnavailable, nil)
	fmt.Println(err, errors.Is(err, bulkhead.ErrOverloaded))
	// Output: http status 503 (Service Unavailable) true
}
