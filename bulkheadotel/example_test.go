package bulkheadotel_test

import (
	"context"
	"fmt"

	"github.com/bulkhead-go/bulkhead/bulkheadotel"
	"github.com/bulkhead-go/bulkhead/semaphore"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Report a bulkhead through an OpenTelemetry MeterProvider. With a
// registry, pass the *registry.Registry itself as the Source.
func ExampleRegister() {
	payment, _ := semaphore.New("payment", semaphore.Config{MaxConcurrentCalls: 4})

	reader := sdkmetric.NewManualReader() // in production: a periodic reader and an exporter
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())

	unregister, err := bulkheadotel.Register(provider, bulkheadotel.Bulkheads(payment), bulkheadotel.Options{})
	if err != nil {
		panic(err)
	}
	defer unregister()

	payment.Do(context.Background(), func(context.Context) error { return nil })

	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == "bulkhead.limit" || m.Name == "bulkhead.finished_calls" {
			p := m.Data.(metricdata.Sum[int64]).DataPoints[0]
			name, _ := p.Attributes.Value("bulkhead.name")
			fmt.Printf("%s{bulkhead.name=%s} %d\n", m.Name, name.AsString(), p.Value)
		}
	}
	// Output:
	// bulkhead.limit{bulkhead.name=payment} 4
	// bulkhead.finished_calls{bulkhead.name=payment} 1
}
