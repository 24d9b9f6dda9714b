package config

import (
	"reflect"
	"testing"

	"github.com/bulkhead-go/bulkhead/adaptive"
)

// TestEveryAdaptiveKeyBound: every yaml-tagged field of adaptive.Config
// has its key in both kinds' tables, so that a field added there is not
// silently unreadable from a file.
func TestEveryAdaptiveKeyBound(t *testing.T) {
	var walk func(rt reflect.Type, prefix string)
	walk = func(rt reflect.Type, prefix string) {
		for f := range rt.Fields() {
			tag := f.Tag.Get("yaml")
			if tag == "" || tag == "-" {
				continue
			}
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, prefix+tag+".")
				continue
			}
			key := normalize(prefix + tag)
			if _, ok := newBinder(semaphoreKind).index[key]; !ok {
				t.Errorf("semaphore: no key %s", prefix+tag)
			}
			if _, ok := newBinder(poolKind).index[key]; !ok {
				t.Errorf("pool: no key %s", prefix+tag)
			}
		}
	}
	walk(reflect.TypeFor[adaptive.Config](), "adaptive.")
}
