package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/bulkhead-go/bulkhead/registry"
	"github.com/bulkhead-go/bulkhead/semaphore"
	"github.com/prometheus/client_golang/prometheus"
)

// The resilience4j section of a Spring Boot application.yml loads as is.
func ExampleLoad() {
	cfg, err := registry.Load(strings.NewReader(`
resilience4j:
  bulkhead:
    instances:
      payment:   { maxConcurrentCalls: 2, maxWaitDuration: 0 }
      inventory: { maxConcurrentCalls: 8, maxWaitDuration: 0 }
`))
	if err != nil {
		log.Fatal(err)
	}
	r, err := registry.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close(context.Background())

	payment, _ := r.Semaphore("payment")
	c := payment.Config()
	fmt.Printf("maxConcurrentCalls %d, maxWaitDuration %v\n", c.MaxConcurrentCalls, c.MaxWaitDuration)
	// Output: maxConcurrentCalls 2, maxWaitDuration 0s
}

// A typo never silently becomes a default.
func ExampleLoad_typo() {
	_, err := registry.Load(strings.NewReader(`
resilience4j.bulkhead:
  instances:
    payment: { maxConcurentCalls: 2 }
`))
	fmt.Println(err)
	// Output: registry: line 4: semaphore instance "payment": unknown key "maxConcurentCalls" (did you mean "maxConcurrentCalls"?) (at resilience4j.bulkhead.instances.payment.maxConcurentCalls)
}

// A configuration built in code: nil fields are inherited, so an explicit 0
// is kept apart from "unset".
func ExampleNew() {
	r, err := registry.New(registry.Config{
		SemaphoreConfigs: map[string]registry.SemaphoreSpec{
			"default": {MaxConcurrentCalls: new(10), MaxWaitDuration: new(50 * time.Millisecond)},
		},
		Semaphores: map[string]registry.SemaphoreSpec{
			"payment": {MaxConcurrentCalls: new(2), MaxWaitDuration: new(time.Duration(0))},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close(context.Background())

	payment, _ := r.Semaphore("payment")
	search, _ := r.Semaphore("search") // not listed: the default config
	for _, b := range []*semaphore.Bulkhead{payment, search} {
		c := b.Config()
		fmt.Printf("%-7s maxConcurrentCalls %d, maxWaitDuration %v\n", b.Name(), c.MaxConcurrentCalls, c.MaxWaitDuration)
	}
	// Output:
	// payment maxConcurrentCalls 2, maxWaitDuration 0s
	// search  maxConcurrentCalls 10, maxWaitDuration 50ms
}

func ExampleRegistry_RegisterMetrics() {
	cfg, _ := registry.Load(strings.NewReader("bulkhead: {instances: {payment: {maxConcurrentCalls: 2}}}"))
	r, _ := registry.New(cfg)
	defer r.Close(context.Background())

	reg := prometheus.NewRegistry() // serve it with promhttp.HandlerFor(reg, ...)
	unregister, err := r.RegisterMetrics(reg, registry.MetricsOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer unregister()

	payment, _ := r.Semaphore("payment")
	payment.TryAcquire()
	payment.TryAcquire()
	payment.TryAcquire() // rejected

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		switch mf.GetName() {
		case "bulkhead_available_concurrent_calls":
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetGauge().GetValue())
		case "bulkhead_calls_rejected_total":
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output:
	// bulkhead_available_concurrent_calls 0
	// bulkhead_calls_rejected_total 1
}

func ExampleRegistry_Handler() {
	cfg, _ := registry.Load(strings.NewReader("bulkhead: {instances: {payment: {maxConcurrentCalls: 2}}}"))
	cfg.RecordEvents = true // keep recent events for the status page
	r, _ := registry.New(cfg)
	defer r.Close(context.Background())

	h := r.Handler() // e.g. http.Handle("/bulkheads", r.Handler())
	payment, _ := r.Semaphore("payment")
	payment.TryAcquire()

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/bulkheads?name=payment", nil))
	var st struct {
		Instances []struct {
			Name, Kind string
			Stats      struct{ AvailableConcurrentCalls int }
			Events     []struct{ Type string }
		}
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &st)
	for _, in := range st.Instances {
		fmt.Println(in.Name, in.Kind, "available", in.Stats.AvailableConcurrentCalls, "events", len(in.Events), in.Events[0].Type)
	}
	// Output: payment semaphore available 1 events 1 permitted
}

// With Strict, every bulkhead must be declared in the file: a misspelt name
// is an error instead of a bulkhead with default limits.
func ExampleConfig_strict() {
	cfg, _ := registry.Load(strings.NewReader("bulkhead: {instances: {payment: {maxConcurrentCalls: 2}}}"))
	cfg.Strict = true
	r, _ := registry.New(cfg)
	defer r.Close(context.Background())

	_, err := r.Semaphore("paymnet")
	fmt.Println(errors.Is(err, registry.ErrNotConfigured))
	// Output: true
}

// An adaptive: block (this library's extension, not a Resilience4j key)
// attaches a controller that moves the limit; the configured limit is where
// it starts, within minLimit and maxLimit.
func ExampleLoad_adaptive() {
	cfg, err := registry.Load(strings.NewReader(`
resilience4j:
  bulkhead:
    instances:
      inventory:
        maxConcurrentCalls: 40
        adaptive: { algorithm: vegas, minLimit: 5, maxLimit: 30, vegas: { noLoadWindow: PT30S } }
`))
	if err != nil {
		log.Fatal(err)
	}
	r, err := registry.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close(context.Background())

	inventory, _ := r.Semaphore("inventory")
	fmt.Println(inventory.Config().MaxConcurrentCalls)

	// The status page shows the controller's state under "adaptive".
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/?name=inventory", nil))
	var page struct {
		Instances []struct {
			Adaptive struct {
				Algorithm       string
				Limit, MaxLimit int
			}
		}
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &page)
	fmt.Printf("%+v\n", page.Instances[0].Adaptive)
	// Output:
	// 30
	// {Algorithm:vegas Limit:30 MaxLimit:30}
}
