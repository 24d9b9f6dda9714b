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
			for _, b := range []*binder{newLoader(nil).sem, newLoader(nil).pool} {
				if _, ok := b.index[key]; !ok {
					t.Errorf("%s: no key %s", b.kind, prefix+tag)
				}
			}
		}
	}
	walk(reflect.TypeFor[adaptive.Config](), "adaptive.")
}

// TestEveryKeyBinds: every key the binder knows (but those accepted
// without effect) sets its Spec field, so that a key listed without a case
// in bind is not silently ignored.
func TestEveryKeyBinds(t *testing.T) {
	for _, b := range []*binder{newLoader(nil).sem, newLoader(nil).pool} {
		for _, k := range b.keys {
			if k.goName == "-" {
				continue
			}
			bound := false
			for _, in := range []prop{{value: "1"}, {value: "true"}, {value: "lifo"}, {value: "a"}, {kind: emptyMap}} {
				in.segs, in.doc = []seg{{name: k.name}}, &document{}
				v := &value{ld: newLoader(nil), p: &in, what: "t", key: k.name}
				var s, p = SemaphoreSpec{}, PoolSpec{}
				if b.kind == "semaphore" {
					s.bind(k.name, v)
				} else {
					p.bind(k.name, v)
				}
				bound = bound || !reflect.DeepEqual(s, SemaphoreSpec{}) || !reflect.DeepEqual(p, PoolSpec{})
			}
			if !bound {
				t.Errorf("%s: key %s sets nothing", b.kind, k.name)
			}
		}
	}
}
