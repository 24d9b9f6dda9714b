package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/registry"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// secrets appear in the configuration file outside the bulkhead sections,
// in a comment, in the environment, and in the errors and panics of calls.
var secrets = []string{
	"hunter2-db-password", "sk_live_api_key_42", "keystore-pass-77", "token-in-comment",
	"env-secret-value", "error-text-secret", "panic-text-secret", "jdbc:postgresql://db.internal/orders",
	"circuit-secret-99",
}

const secretYAML = `# deploy token: token-in-comment
server:
  port: 8443
  ssl:
    key-store-password: keystore-pass-77
spring:
  datasource:
    url: jdbc:postgresql://db.internal/orders
    password: hunter2-db-password
payments:
  api-key: sk_live_api_key_42
  password: ${ENV_SECRET:env-secret-value}
resilience4j:
  circuitbreaker:
    instances:
      payment: { slidingWindowSize: 10, apiKey: circuit-secret-99 }
  bulkhead:
    instances:
      payment:   { maxConcurrentCalls: 2, maxWaitDuration: 0 }
      inventory: { maxConcurrentCalls: 8, maxWaitDuration: 10ms }
  thread-pool-bulkhead:
    instances:
      reports: { maxThreadPoolSize: 2, queueCapacity: 4, keepAliveDuration: 1s }
`

// TestExposureHandlerAndMetricsShowNamesAndNumbersOnly loads a configuration
// file that holds secrets outside the bulkhead sections, runs calls whose
// errors and panics carry secrets, and checks that neither the status
// handler nor the Prometheus exposition contains any of them, and that
// every string the handler serves is a name, a kind, a fixed word, a
// duration or a time.
func TestExposureHandlerAndMetricsShowNamesAndNumbersOnly(t *testing.T) {
	t.Setenv("ENV_SECRET", "env-secret-value")
	cfg, err := registry.Load(strings.NewReader(secretYAML))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RecordEvents = true
	r, err := registry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	reg := prometheus.NewRegistry()
	unregister, err := r.RegisterMetrics(reg, registry.MetricsOptions{Histograms: true})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()
	handler := r.Handler() // with recent events: cfg.RecordEvents

	ctx := context.Background()
	payment, err := r.Semaphore("payment")
	if err != nil {
		t.Fatal(err)
	}
	payment.Do(ctx, func(context.Context) error { return errors.New("upstream said error-text-secret") })
	func() {
		defer func() { recover() }()
		payment.Do(ctx, func(context.Context) error { panic("panic-text-secret") })
	}()
	payment.Do(ctx, func(context.Context) error { return nil })
	reports, err := r.Pool("reports")
	if err != nil {
		t.Fatal(err)
	}
	f, err := reports.TryGo(ctx, func(context.Context) error { return fmt.Errorf("wrapped: %w", errors.New("error-text-secret")) })
	if err != nil {
		t.Fatal(err)
	}
	f.Wait(ctx)
	g, _ := pool.Submit(ctx, reports, func(context.Context) (int, error) { panic(errors.New("panic-text-secret")) })
	g.Wait(ctx)

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/bulkheads", nil))
	status := rec.Body.String()
	mrec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(mrec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	metrics, _ := io.ReadAll(mrec.Body)
	if rec.Code != http.StatusOK || mrec.Code != http.StatusOK || !strings.Contains(status, `"payment"`) || !strings.Contains(string(metrics), `name="reports"`) {
		t.Fatalf("status %d, metrics %d; status body:\n%s", rec.Code, mrec.Code, status)
	}
	for _, s := range secrets {
		if strings.Contains(status, s) {
			t.Errorf("the status handler exposes %q", s)
		}
		if strings.Contains(string(metrics), s) {
			t.Errorf("the metrics expose %q", s)
		}
	}

	// Every string in the status JSON is one of a small set of kinds.
	var doc any
	if err := json.Unmarshal([]byte(status), &doc); err != nil {
		t.Fatalf("status is not JSON: %v", err)
	}
	allowed := map[string]bool{"payment": true, "inventory": true, "reports": true, "semaphore": true, "pool": true,
		"permitted": true, "rejected": true, "cancelled": true, "finished": true,
		"deadline-exceeded": true, "closed": true, "other": true, "success": true, "error": true, "panic": true}
	for _, r := range bulkhead.Reasons { // the reasons of rejections: fixed words too
		allowed[r.String()] = true
	}
	for _, o := range []bulkhead.QueueOrder{bulkhead.LIFO, bulkhead.AdaptiveLIFO} { // and the queue orders
		allowed[o.String()] = true
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(path+"."+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), x)
			}
		case string:
			if allowed[v] {
				return
			}
			if _, err := time.ParseDuration(v); err == nil {
				return
			}
			if _, err := time.Parse(time.RFC3339Nano, v); err == nil {
				return
			}
			t.Errorf("status %s = %q: not a name, kind, fixed word, duration or time", path, v)
		}
	}
	walk("", doc)

	// Every label value in the exposition is a name, a kind or a number.
	for _, line := range strings.Split(string(metrics), "\n") {
		if line == "" || strings.HasPrefix(line, "#") || !strings.HasPrefix(line, "bulkhead_") {
			continue
		}
		i, j := strings.IndexByte(line, '{'), strings.IndexByte(line, '}')
		if i < 0 || j < i {
			continue
		}
		for _, kv := range strings.Split(line[i+1:j], ",") {
			k, v, _ := strings.Cut(kv, "=")
			v = strings.Trim(v, `"`)
			if k == "le" || allowed[v] {
				continue
			}
			t.Errorf("metric label %s=%q in %q", k, v, line)
		}
	}
}

// TestExposureAbsurdLimitsAreRefused: a configuration file cannot make the
// library allocate without bound. Limits are refused with an error that
// names the instance, the field and the value, from a file and from code,
// and a file above 4 MiB is refused before it is parsed.
func TestExposureAbsurdLimitsAreRefused(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"bulkhead:\n  instances:\n    a: { maxConcurrentCalls: 2000000000 }\n", "2000000000"},
		{"bulkhead:\n  instances:\n    a: { maxConcurrentCalls: 1048577 }\n", "1048577"},
		{"bulkhead:\n  instances:\n    a: { maxConcurrentCalls: -5 }\n", "-5"},
		{"thread-pool-bulkhead:\n  instances:\n    p: { maxThreadPoolSize: 99999999 }\n", "99999999"},
		{"thread-pool-bulkhead:\n  instances:\n    p: { maxWorkers: 2, queueCapacity: 1000000000000 }\n", "1000000000000"},
		{"thread-pool-bulkhead:\n  instances:\n    p: { maxWorkers: 2, queueCapacity: 99999999999999999999999 }\n", "queueCapacity"},
		{"bulkhead:\n  instances:\n    a: { maxConcurrentCalls: 1, eventConsumerBufferSize: 100000000 }\n", "100000000"},
		{"bulkhead:\n  instances:\n    a: { maxConcurrentCalls: 1, maxWaitDuration: -1s }\n", "-1s"},
	}
	for _, c := range cases {
		_, err := registry.Load(strings.NewReader(c.yaml))
		if err == nil {
			t.Errorf("Load accepted\n%s", c.yaml)
			continue
		}
		msg := err.Error()
		name := "a"
		if strings.Contains(c.yaml, "thread-pool") {
			name = "p"
		}
		if !strings.Contains(msg, c.want) || !strings.Contains(msg, name) {
			t.Errorf("Load error %q does not name the instance %q and %q", msg, name, c.want)
		}
	}

	// The same limits from code.
	big := semaphore.MaxLimit + 1
	for _, cfg := range []registry.Config{
		{Semaphores: map[string]registry.SemaphoreSpec{"a": {MaxConcurrentCalls: &big}}},
		{Pools: map[string]registry.PoolSpec{"p": {MaxWorkers: &big}}},
		{Pools: map[string]registry.PoolSpec{"p": {QueueCapacity: &big}}},
	} {
		if r, err := registry.New(cfg); err == nil || r != nil || !strings.Contains(err.Error(), fmt.Sprint(big)) {
			t.Errorf("registry.New(%+v) = %v, %v; want an error naming %d", cfg, r, err, big)
		}
	}

	// A file larger than 4 MiB is refused.
	huge := "bulkhead:\n  instances:\n    a: { maxConcurrentCalls: 1 }\n# " + strings.Repeat("x", 4<<20) + "\n"
	if _, err := registry.Load(strings.NewReader(huge)); err == nil {
		t.Error("Load accepted a file larger than 4 MiB")
	}
}
