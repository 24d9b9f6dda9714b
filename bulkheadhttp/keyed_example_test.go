package bulkheadhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/bulkhead-go/bulkhead/bulkheadhttp"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// tenantKey is the context key under which an authentication middleware
// (not shown) stores the tenant it verified.
type tenantKey struct{}

func ExampleKeyedHandler() {
	tenants, _ := semaphore.NewKeyed[string]("tenants", semaphore.KeyedConfig{
		PerKey:             semaphore.Config{MaxConcurrentCalls: 1},
		MaxConcurrentCalls: 100,
	})
	key := func(r *http.Request) (string, bool) {
		t, ok := r.Context().Value(tenantKey{}).(string) // the verified tenant, never a raw header
		return t, ok
	}
	var api http.Handler
	api = bulkheadhttp.KeyedHandler(tenants, key, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/nested" { // while acme holds its permit, a second acme request and a globex one
			for _, t := range []string{"acme", "globex"} {
				rec := httptest.NewRecorder()
				inner := httptest.NewRequest("GET", "/report", nil)
				api.ServeHTTP(rec, inner.WithContext(context.WithValue(inner.Context(), tenantKey{}, t)))
				fmt.Println(t, rec.Code)
			}
		}
	}))
	req := httptest.NewRequest("GET", "/nested", nil)
	api.ServeHTTP(httptest.NewRecorder(), req.WithContext(context.WithValue(req.Context(), tenantKey{}, "acme")))
	// Output:
	// acme 503
	// globex 200
}
