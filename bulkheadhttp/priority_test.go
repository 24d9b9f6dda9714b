package bulkheadhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/bulkheadhttp"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

func TestWithPriorityHeader(t *testing.T) {
	b, _ := semaphore.New("api", semaphore.Config{MaxConcurrentCalls: 4})
	k, _ := semaphore.NewKeyed[string]("tenants", semaphore.KeyedConfig{PerKey: semaphore.Config{MaxConcurrentCalls: 2}})
	var seen bulkhead.Priority
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = bulkhead.PriorityFrom(r.Context()) })
	handlers := map[string]http.Handler{
		"Handler":      bulkheadhttp.Handler(b, next, bulkheadhttp.WithPriorityHeader("x-bulkhead-priority")),
		"KeyedHandler": bulkheadhttp.KeyedHandler(k, func(*http.Request) (string, bool) { return "t", true }, next, bulkheadhttp.WithPriorityHeader("X-Bulkhead-Priority")),
	}
	for name, h := range handlers {
		for _, c := range []struct {
			header string // "" for none
			outer  bulkhead.Priority
			want   bulkhead.Priority
		}{
			{"sheddable", bulkhead.Critical, bulkhead.Sheddable},
			{"CRITICAL_PLUS", bulkhead.Sheddable, bulkhead.CriticalPlus},
			{"", bulkhead.SheddablePlus, bulkhead.SheddablePlus}, // no header: the context's
			{"urgent", bulkhead.Critical, bulkhead.Critical},     // names no priority: the context's
		} {
			r := httptest.NewRequest("GET", "/", nil)
			if c.header != "" {
				r.Header.Set("X-Bulkhead-Priority", c.header)
			}
			r = r.WithContext(bulkhead.WithPriority(context.Background(), c.outer))
			seen = 99
			h.ServeHTTP(httptest.NewRecorder(), r)
			if seen != c.want {
				t.Errorf("%s: header %q over %v: next saw %v, want %v", name, c.header, c.outer, seen, c.want)
			}
		}
	}
	// Without the option the header is not read.
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Bulkhead-Priority", "sheddable")
	bulkheadhttp.Handler(b, next).ServeHTTP(httptest.NewRecorder(), r)
	if seen != bulkhead.Critical {
		t.Errorf("without WithPriorityHeader next saw %v", seen)
	}
}

func TestWithPriorityHeaderMisuse(t *testing.T) {
	b, _ := semaphore.New("api", semaphore.Config{MaxConcurrentCalls: 1})
	for name, f := range map[string]func(){
		"empty name": func() { bulkheadhttp.WithPriorityHeader("") },
		"Transport":  func() { bulkheadhttp.Transport(b, nil, bulkheadhttp.WithPriorityHeader("x-p")) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
