package future

import "testing"

type recordHook struct {
	name  string
	log   *[]string
	panic bool
}

func (r *recordHook) fire(int, bool) due {
	*r.log = append(*r.log, r.name)
	if r.panic {
		panic("hook " + r.name)
	}
	return nil
}

// A hook that panics is not recovered: the panic goes on to the goroutine
// that completed the future, the hooks after it miss the completion, and the
// future is complete.
func TestPanicInHookGoesUp(t *testing.T) {
	p := NewPromise[int](nil)
	var log []string
	for _, r := range []*recordHook{{name: "a"}, {name: "b", panic: true}, {name: "c"}} {
		r.log = &log
		p.Future().onDone(&hook{x: r})
	}
	func() {
		defer func() {
			if r := recover(); r != "hook b" {
				t.Errorf("recover() = %v, want hook b's panic", r)
			}
		}()
		p.Complete(1, nil)
	}()
	if len(log) != 2 || log[0] != "a" || log[1] != "b" {
		t.Fatalf("hooks ran %v, want [a b]", log)
	}
	if v, err := p.Future().Result(); v != 1 || err != nil {
		t.Fatalf("Result = %v, %v", v, err)
	}
	// The panic ended the completer's turn: a hook added now runs at once.
	p.Future().onDone(&hook{x: &recordHook{name: "d", log: &log}})
	if len(log) != 3 || log[2] != "d" || HookCount(p.Future()) != 0 {
		t.Fatalf("after the panic, hooks ran %v, %d left", log, HookCount(p.Future()))
	}
}
