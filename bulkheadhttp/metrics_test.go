package bulkheadhttp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/bulkhead-go/bulkhead/bulkheadhttp"
	"github.com/bulkhead-go/bulkhead/registry"
)

// The Transport's 5xx counts reach Stats.Failed and the Prometheus failure
// counter of the registry's collector.
func TestTransportFailuresReachPrometheus(t *testing.T) {
	cfg, err := registry.Load(strings.NewReader("resilience4j.bulkhead:\n  instances:\n    search:\n      maxConcurrentCalls: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())
	search, err := reg.Semaphore("search")
	if err != nil {
		t.Fatal(err)
	}
	prom := prometheus.NewRegistry()
	unregister, err := reg.RegisterMetrics(prom, registry.MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer unregister()

	srv, _ := stub(t)
	c := &http.Client{Transport: bulkheadhttp.Transport(search, &http.Transport{})}
	defer c.CloseIdleConnections()
	for _, code := range []int{200, 500, 502, 404} {
		getAll(t, c, srv.URL+"/status/"+itoa(code))
	}
	if s := search.Stats(); s.Finished != 4 || s.Failed != 2 {
		t.Fatalf("stats %+v, want 4 finished, 2 failed", s)
	}
	want := `
# HELP bulkhead_calls_failed_total Finished calls that returned an error or panicked.
# TYPE bulkhead_calls_failed_total counter
bulkhead_calls_failed_total{kind="semaphore",name="search"} 2
`
	if err := testutil.GatherAndCompare(prom, strings.NewReader(want), "bulkhead_calls_failed_total"); err != nil {
		t.Fatal(err)
	}
}
