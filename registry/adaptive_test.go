package registry

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/adaptive"
	"github.com/bulkhead-go/bulkhead/registry/internal/config"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

const adaptiveYAML = `resilience4j:
  bulkhead:
    configs:
      default:
        maxConcurrentCalls: 8
        adaptive: {algorithm: aimd, maxLimit: 50, window: 250, aimd: {backoff: 0.5}}
      shared:
        adaptive:
          min-limit: 2
          Window: PT0.5S
          vegas: {alpha: 2.5, beta: 7, no_load_window: 1m}
    instances:
      inherits: {maxConcurrentCalls: 20}
      viaShared: {baseConfig: shared}
      own:
        adaptive:
          algorithm: gradient2
          minSamples: 5
          gradient2: {smoothing: 0.25, tolerance: 2, longWindow: 10}
      static: {}
  thread-pool-bulkhead:
    configs:
      adapt:
        maxThreadPoolSize: 4
        adaptive: {initialLimit: 3, maxLimit: 16, aimd: {increase: 2, slowCall: 1.5s}, shadow: true}
    instances:
      lookups: {baseConfig: adapt, queueCapacity: 3}
      emails: {maxThreadPoolSize: 2}
`

func TestLoadAdaptive(t *testing.T) {
	c := mustLoad(t, adaptiveYAML)
	res, err := config.Resolve(c)
	if err != nil {
		t.Fatal(err)
	}
	def := adaptive.Config{Algorithm: "aimd", MaxLimit: 50, Window: 250 * time.Millisecond, AIMD: adaptive.AIMD{Backoff: 0.5}}
	shared := adaptive.Config{MinLimit: 2, Window: 500 * time.Millisecond,
		Vegas: adaptive.Vegas{Alpha: 2.5, Beta: 7, NoLoadWindow: time.Minute}}
	own := adaptive.Config{Algorithm: "gradient2", MinSamples: 5,
		Gradient2: adaptive.Gradient2{Smoothing: 0.25, Tolerance: 2, LongWindow: 10}}
	adapt := adaptive.Config{InitialLimit: 3, MaxLimit: 16, AIMD: adaptive.AIMD{Increase: 2, SlowCall: 1500 * time.Millisecond}, Shadow: true}
	semWant := map[string]*adaptive.Config{
		"inherits":  &def,
		"viaShared": &shared, // shared's own block replaces default's as a whole
		"own":       &own,
		"static":    &def,
	}
	for name, want := range semWant {
		_, x, _ := res.Semaphore(name)
		got := x.Adaptive
		if got == nil || *got != *want {
			t.Errorf("semaphore %s: adaptive %+v, want %+v", name, got, want)
		}
	}
	poolWant := map[string]*adaptive.Config{"lookups": &adapt, "emails": nil}
	// adaptive: {} is a controller with every default.
	empty := mustLoad(t, "thread-pool-bulkhead:\n  instances:\n    p: {adaptive: {}}\n")
	if got := empty.Pools["p"].Adaptive; got == nil || *got != (adaptive.Config{}) {
		t.Errorf("adaptive: {} gave %+v", got)
	}
	for name, want := range poolWant {
		_, x, _ := res.Pool(name)
		got := x.Adaptive
		if (got == nil) != (want == nil) || got != nil && *got != *want {
			t.Errorf("pool %s: adaptive %+v, want %+v", name, got, want)
		}
	}
}

// A Spring file has no adaptive block, and the registry attaches nothing.
func TestSpringFilesHaveNoController(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "spring", "*.y*ml"))
	if len(files) == 0 {
		t.Fatal("no Spring files")
	}
	for _, f := range files {
		c, err := LoadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range r.snapshot() {
			if e.control() != nil {
				t.Errorf("%s: %s %q has a controller", f, e.kind, e.name)
			}
		}
		if err := r.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadAdaptiveErrors(t *testing.T) {
	const head = "resilience4j:\n  bulkhead:\n    instances:\n      a:\n        adaptive:\n"
	tests := []struct {
		name, in string
		want     []string
	}{
		{"unknown key with suggestion", head + "          minLimt: 2\n",
			[]string{"line 6", `semaphore instance "a": unknown key "minLimt" in adaptive (did you mean "minLimit"?)`,
				"(at resilience4j.bulkhead.instances.a.adaptive.minLimt)"}},
		{"unknown nested key", head + "          vegas:\n            alfa: 2\n",
			[]string{"line 7", `unknown key "alfa" in adaptive.vegas (did you mean "alpha"?)`}},
		{"unknown key far from any", head + "          colour: red\n",
			[]string{`unknown key "colour" in adaptive; known keys: algorithm, minLimit`}},
		{"bad duration", head + "          window: soon\n",
			[]string{"line 6", `semaphore instance "a": adaptive.window must be a duration such as 500ms, 2s, PT2S or a number of milliseconds, got "soon"`,
				"(at resilience4j.bulkhead.instances.a.adaptive.window)"}},
		{"bad nested duration", head + "          aimd: {slowCall: 1y}\n",
			[]string{"line 6", `adaptive.aimd.slowCall must be a duration`}},
		{"bad shadow", head + "          shadow: yes\n",
			[]string{"line 6", `adaptive.shadow must be true or false, got "yes"`}},
		{"bad number", head + "          vegas: {alpha: lots}\n",
			[]string{`adaptive.vegas.alpha must be a finite number, got "lots"`}},
		{"infinite number", head + "          vegas: {alpha: .inf}\n",
			[]string{`adaptive.vegas.alpha must be a finite number, got ".inf"`}},
		{"not an integer", head + "          maxLimit: 2.5\n",
			[]string{`adaptive.maxLimit must be an integer, got "2.5"`}},
		{"Validate, with the line of the key", head + "          algorithm: aimd\n          minLimit: -1\n",
			[]string{"line 7", `semaphore instance "a": adaptive.minLimit must be between 1 and 1048576 (or 0 for 1), got -1`,
				"(at resilience4j.bulkhead.instances.a.adaptive.minLimit)"}},
		{"Validate, nested float", head + "          vegas:\n            backoff: 1.5\n",
			[]string{"line 7", `adaptive.vegas.backoff must be >= 0.5 and < 1, got 1.5`, "(at resilience4j.bulkhead.instances.a.adaptive.vegas.backoff)"}},
		{"Validate, algorithm", head + "          algorithm: fast\n",
			[]string{"line 6", `adaptive.algorithm must be vegas, gradient2 or aimd, got "fast"`}},
		{"Validate, cross-field", head + "          minLimit: 30\n          maxLimit: 20\n",
			[]string{"line 6", `adaptive.minLimit (30) must be <= maxLimit (20)`}},
		{"no value", "bulkhead:\n  instances:\n    a:\n      adaptive:\n",
			[]string{"line 4", `semaphore instance "a": adaptive has no value; give a mapping (adaptive: {} for every default)`}},
		{"not a mapping", "bulkhead:\n  instances:\n    a: {adaptive: 5}\n",
			[]string{"line 3", `adaptive must be a mapping of keys to values, got "5"`}},
		{"given twice", head + "          minLimit: 2\n          min-limit: 3\n",
			[]string{"line 7", `adaptive.min-limit is given twice (first at line 6)`}},
		{"placeholder", head + "          maxLimit: ${BULKHEAD_TEST_UNSET}\n",
			[]string{"line 6", `semaphore instance "a": adaptive.maxLimit has the placeholder ${BULKHEAD_TEST_UNSET}, which resolves to nothing`}},
		{"pool, shared config", "thread-pool-bulkhead:\n  configs:\n    c:\n      adaptive: {maxLimit: -4}\n",
			[]string{"line 4", `pool config "c": adaptive.maxLimit must be between 1 and 1048576 (or 0 for 200), got -4`,
				"(at thread-pool-bulkhead.configs.c.adaptive.maxLimit)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantLoadErr(t, tt.in, tt.want...) })
	}
}

func TestValidateAdaptiveInCode(t *testing.T) {
	cfg := Config{Semaphores: map[string]SemaphoreSpec{"a": {Adaptive: &adaptive.Config{MinLimit: -1}}}}
	want := `registry: semaphore instance "a": adaptive.minLimit must be between 1 and 1048576 (or 0 for 1), got -1 (at Semaphores["a"].Adaptive)`
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate: %v\nwant %s", err, want)
	}
	custom := Config{PoolConfigs: map[string]PoolSpec{"default": {Adaptive: &adaptive.Config{Custom: fixed{}}}}}
	if err := custom.Validate(); err == nil || !strings.Contains(err.Error(), "adaptive.Custom is not supported") {
		t.Errorf("Validate with Custom: %v", err)
	}
}

type fixed struct{}

func (fixed) Update(limit float64, _ adaptive.Window) adaptive.Decision {
	return adaptive.Decision{Limit: limit}
}

// control returns the controller of the named bulkhead, or nil.
func controlOf(r *Registry, k bulkhead.Kind, name string) *control {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[key{k, name}]; e != nil {
		return e.control()
	}
	return nil
}

// dropYAML's controllers halve the limit after every window with a drop, and
// a window closes with every call that finishes after it began.
const dropYAML = `resilience4j:
  bulkhead:
    configs:
      default:
        maxConcurrentCalls: 8
        maxWaitDuration: 0
        adaptive: {algorithm: aimd, minSamples: 1, window: 1ns, aimd: {backoff: 0.5}}
    instances:
      a: {}
      b: {maxConcurrentCalls: 30, adaptive: {maxLimit: 10, minSamples: 1, window: 1ns}}
      c: {maxConcurrentCalls: 30, adaptive: {initialLimit: 6, maxLimit: 10}}
  thread-pool-bulkhead:
    instances:
      p:
        maxThreadPoolSize: 4
        adaptive: {algorithm: aimd, maxLimit: 12, initialLimit: 12, minSamples: 1, window: 1ns, aimd: {backoff: 0.5}}
      static: {maxThreadPoolSize: 4}
`

// overloaded is a call that the dependency refused: a drop.
func overloaded(context.Context) error { return bulkhead.ErrOverloaded }

// until makes calls with do until cond holds; the deadline only guards
// against hanging.
func until(t *testing.T, do func() error, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		if err := do(); err != nil && !errors.Is(err, bulkhead.ErrOverloaded) {
			t.Fatal(err)
		}
	}
}

// witness is a controller of the test's own, fed b's events: once it has
// decided a few windows, a controller still attached to b would have too.
func witness(t *testing.T, subscribe func(func(bulkhead.Event)) func()) *adaptive.Controller {
	t.Helper()
	w, err := adaptive.New(adaptive.Config{Algorithm: "aimd", MinSamples: 1, Window: time.Nanosecond}, 1, func(int) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(subscribe(w.Observe))
	return w
}

func TestAdaptiveAttachAtCreation(t *testing.T) {
	r, err := New(mustLoad(t, dropYAML))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	limits := map[string]int{
		"a": 8,  // the configured limit, within 1..200
		"b": 10, // the configured 30, brought within maxLimit
		"c": 6,  // initialLimit
	}
	for name, want := range limits {
		b, _ := r.Semaphore(name)
		if got := b.Config().MaxConcurrentCalls; got != want {
			t.Errorf("%s: limit %d, want %d", name, got, want)
		}
		if ctl := controlOf(r, bulkhead.Semaphore, name); ctl == nil || ctl.c.State().Limit != want {
			t.Errorf("%s: controller %v, want one at limit %d", name, ctl, want)
		}
	}

	// Created on first lookup, from "default": attached too, and it moves
	// the limit.
	s, err := r.Semaphore("later")
	if err != nil {
		t.Fatal(err)
	}
	ctl := controlOf(r, bulkhead.Semaphore, "later")
	if ctl == nil {
		t.Fatal("no controller for a semaphore created on lookup")
	}
	until(t, func() error { return s.Do(t.Context(), overloaded) }, func() bool { return s.Config().MaxConcurrentCalls == 1 })
	if st := ctl.c.State(); st.Limit != 1 || st.Decision != "decrease" && st.Decision != "hold" || st.Reason != "drops" {
		t.Errorf("state %+v, want limit 1 after drops", st)
	}

	p, err := r.Pool("p")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Config().MaxWorkers; got != 12 {
		t.Errorf("pool: %d workers, want initialLimit 12", got)
	}
	until(t, func() error {
		f, err := p.TryGo(t.Context(), overloaded)
		if err != nil {
			return err
		}
		_, err = f.Wait(t.Context())
		return err
	}, func() bool { return p.Config().MaxWorkers < 12 })
}

// A shadow controller is a dry run: the registry does not apply its
// initialLimit either (docs/adaptive.md, "A dry run").
func TestAdaptiveShadowKeepsTheConfiguredLimit(t *testing.T) {
	r, err := New(mustLoad(t, adaptiveYAML))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	p, err := r.Pool("lookups")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Config().MaxWorkers; got != 4 {
		t.Errorf("a shadow controller set %d workers, want the configured 4", got)
	}
	if ctl := controlOf(r, bulkhead.Pool, "lookups"); ctl == nil || ctl.c.State().Limit != 3 {
		t.Errorf("controller %v, want a shadow at its initialLimit 3", ctl)
	}
}

func TestAdaptiveReconfigure(t *testing.T) {
	cfg := mustLoad(t, dropYAML)
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	a, _ := r.Semaphore("a")
	first := controlOf(r, bulkhead.Semaphore, "a")
	until(t, func() error { return a.Do(t.Context(), overloaded) }, func() bool { return a.Config().MaxConcurrentCalls == 2 })
	reached := first.c.State().Limit // 2, or 1 if another window closed meanwhile

	// Same block, other fields changed: the controller and its limit stay;
	// the wait applies.
	cfg2 := mustLoad(t, strings.ReplaceAll(dropYAML, "maxConcurrentCalls: 8\n        maxWaitDuration: 0", "maxConcurrentCalls: 9\n        maxWaitDuration: 5ms"))
	if err := r.Reconfigure(cfg2); err != nil {
		t.Fatal(err)
	}
	if got := controlOf(r, bulkhead.Semaphore, "a"); got != first {
		t.Fatal("an unchanged block started a new controller")
	}
	if c := a.Config(); c.MaxConcurrentCalls != reached || c.MaxWaitDuration != 5*time.Millisecond {
		t.Fatalf("after Reconfigure with the same block: %+v, want limit %d and a 5ms wait", c, reached)
	}

	// A changed block: a new controller, from the configured limit.
	cfg3 := mustLoad(t, strings.Replace(dropYAML, "aimd: {backoff: 0.5}}", "aimd: {backoff: 0.75}}", 1))
	if err := r.Reconfigure(cfg3); err != nil {
		t.Fatal(err)
	}
	second := controlOf(r, bulkhead.Semaphore, "a")
	if second == nil || second == first {
		t.Fatal("a changed block kept the old controller")
	}
	if got := a.Config().MaxConcurrentCalls; got != 8 {
		t.Fatalf("new controller: limit %d, want the configured 8", got)
	}
	before := first.c.State()
	until(t, func() error { return a.Do(t.Context(), overloaded) }, func() bool { return second.c.State().Windows >= 3 })
	if after := first.c.State(); after != before {
		t.Errorf("the replaced controller still decides: %+v, then %+v", before, after)
	}
	if got, want := a.Config().MaxConcurrentCalls, second.c.State().Limit; got != want || got >= 8 {
		t.Errorf("limit %d, want the new controller's %d, below 8", got, want)
	}

	// The block gone: no controller, the configured limit, and calls change
	// nothing any more.
	cfg4 := mustLoad(t, strings.Replace(dropYAML, "        adaptive: {algorithm: aimd, minSamples: 1, window: 1ns, aimd: {backoff: 0.5}}\n", "", 1))
	if err := r.Reconfigure(cfg4); err != nil {
		t.Fatal(err)
	}
	if controlOf(r, bulkhead.Semaphore, "a") != nil {
		t.Fatal("the controller stayed after its block went away")
	}
	if got := a.Config().MaxConcurrentCalls; got != 8 {
		t.Fatalf("limit %d, want the configured 8", got)
	}
	w := witness(t, a.Subscribe)
	before = second.c.State()
	until(t, func() error { return a.Do(t.Context(), overloaded) }, func() bool { return w.State().Windows >= 3 })
	if after := second.c.State(); after != before || a.Config().MaxConcurrentCalls != 8 {
		t.Errorf("after detach: state %+v then %+v, limit %d", before, after, a.Config().MaxConcurrentCalls)
	}
}

func TestAdaptiveDetachOnRemoveAndClose(t *testing.T) {
	r, err := New(mustLoad(t, dropYAML))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := r.Semaphore("a")
	ctl := controlOf(r, bulkhead.Semaphore, "a")
	until(t, func() error { return a.Do(t.Context(), overloaded) }, func() bool { return a.Config().MaxConcurrentCalls == 4 })
	if _, ok := r.Remove(bulkhead.Semaphore, "a"); !ok {
		t.Fatal("Remove")
	}
	limit, before := a.Config().MaxConcurrentCalls, ctl.c.State()
	w := witness(t, a.Subscribe)
	until(t, func() error { return a.Do(t.Context(), overloaded) }, func() bool { return w.State().Windows >= 3 })
	if after := ctl.c.State(); after != before || a.Config().MaxConcurrentCalls != limit {
		t.Errorf("after Remove: state %+v then %+v, limit %d then %d", before, after, limit, a.Config().MaxConcurrentCalls)
	}
	if b, _ := r.Semaphore("a"); b == a || controlOf(r, bulkhead.Semaphore, "a") == ctl {
		t.Error("asking again after Remove returned the old bulkhead or controller")
	}

	b, _ := r.Semaphore("b")
	ctl = controlOf(r, bulkhead.Semaphore, "b")
	if err := r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	limit, before = b.Config().MaxConcurrentCalls, ctl.c.State()
	w = witness(t, b.Subscribe)
	until(t, func() error { return b.Do(t.Context(), overloaded) }, func() bool { return w.State().Windows >= 3 })
	if after := ctl.c.State(); after != before || b.Config().MaxConcurrentCalls != limit {
		t.Errorf("after Close: state %+v then %+v, limit %d then %d", before, after, limit, b.Config().MaxConcurrentCalls)
	}
}

// While the controller moves the limit, Reconfigure changes the other
// fields: neither undoes the other.
func TestAdaptiveReconfigureWhileAdapting(t *testing.T) {
	y := `resilience4j:
  bulkhead:
    instances:
      a:
        maxConcurrentCalls: 50
        maxWaitDuration: WAIT
        adaptive: {algorithm: aimd, minSamples: 1, window: 1ns, maxLimit: 100, aimd: {backoff: 0.99}}
  thread-pool-bulkhead:
    instances:
      p:
        maxThreadPoolSize: 50
        keepAliveDuration: WAIT
        adaptive: {algorithm: aimd, minSamples: 1, window: 1ns, maxLimit: 100, aimd: {backoff: 0.99}}
`
	cfgs := []Config{mustLoad(t, strings.ReplaceAll(y, "WAIT", "1s")), mustLoad(t, strings.ReplaceAll(y, "WAIT", "2s"))}
	r, err := New(cfgs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	a, _ := r.Semaphore("a")
	p, _ := r.Pool("p")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if i%2 == 0 {
					_ = a.Do(context.Background(), overloaded)
				} else if f, err := p.TryGo(context.Background(), overloaded); err == nil {
					_, _ = f.Wait(context.Background())
				}
			}
		})
	}
	sem, pl := controlOf(r, bulkhead.Semaphore, "a"), controlOf(r, bulkhead.Pool, "p")
	for i := range 200 {
		if err := r.Reconfigure(cfgs[i%2]); err != nil {
			t.Fatal(err)
		}
	}
	// Let the controllers decide a few more windows (the deadline only
	// guards against hanging).
	semWin, plWin := sem.c.State().Windows, pl.c.State().Windows
	deadline := time.Now().Add(10 * time.Second)
	for sem.c.State().Windows < semWin+3 || pl.c.State().Windows < plWin+3 {
		if time.Now().After(deadline) {
			t.Fatal("the controllers decide nothing")
		}
		if err := r.Reconfigure(cfgs[1]); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if c := a.Config(); c.MaxWaitDuration != 2*time.Second || c.MaxConcurrentCalls != sem.c.State().Limit {
		t.Errorf("semaphore %+v, want a 2s wait and the controller's limit %d", c, sem.c.State().Limit)
	}
	if c := p.Config(); c.KeepAlive != 2*time.Second || c.MaxWorkers != pl.c.State().Limit {
		t.Errorf("pool %+v, want a 2s keep-alive and the controller's limit %d", c, pl.c.State().Limit)
	}
	if controlOf(r, bulkhead.Semaphore, "a") != sem || controlOf(r, bulkhead.Pool, "p") != pl {
		t.Error("Reconfigure with the same block replaced a controller")
	}
}

func TestHandlerShowsAdaptiveState(t *testing.T) {
	r := newTestRegistry(t, dropYAML)
	a, _ := r.Semaphore("a")
	ctl := controlOf(r, bulkhead.Semaphore, "a")
	until(t, func() error { return a.Do(t.Context(), overloaded) }, func() bool { return ctl.c.State().Windows >= 2 })
	code, body := getStatus(t, r.Handler(), "/?kind=semaphore&name=a")
	if code != 200 {
		t.Fatal(code, body)
	}
	var doc struct {
		Instances []struct {
			Name     string
			Adaptive *adaptive.State
		}
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	st := ctl.c.State()
	if len(doc.Instances) != 1 || doc.Instances[0].Adaptive == nil {
		t.Fatalf("no adaptive state in %s", body)
	}
	if got := *doc.Instances[0].Adaptive; got.Algorithm != "aimd" || got.MinLimit != 1 || got.MaxLimit != 200 ||
		got.Reason != "drops" || got.Windows < 2 || got.Windows > st.Windows || got.Limit < st.Limit {
		t.Errorf("adaptive %+v, controller %+v", got, st)
	}
	for _, field := range []string{`"adaptive": {`, `"noLoadLatency":`, `"decision":`, `"reason": "drops"`} {
		if !strings.Contains(body, field) {
			t.Errorf("status page lacks %s:\n%s", field, body)
		}
	}
	_, body = getStatus(t, r.Handler(), "/?kind=pool&name=static")
	if strings.Contains(body, "adaptive") {
		t.Errorf("an instance without a controller shows one:\n%s", body)
	}
}

// A controller's decision that was already under way when Remove returned
// (its set function runs after it) must not change the bulkhead, which the
// caller of Remove owns now.
func TestAdaptiveLateDecisionAfterRemove(t *testing.T) {
	r, err := New(mustLoad(t, dropYAML))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	a, _ := r.Semaphore("a")
	e := r.entries[key{bulkhead.Semaphore, "a"}]
	ctl := e.control()
	if ctl == nil {
		t.Fatal("no controller attached")
	}
	if _, ok := r.Remove(bulkhead.Semaphore, "a"); !ok {
		t.Fatal("Remove")
	}
	if err := a.Reconfigure(semaphore.Config{MaxConcurrentCalls: 7}); err != nil { // the owner's own choice
		t.Fatal(err)
	}
	if err := e.setLimit(ctl, 3); err != nil { // the late decision
		t.Fatal(err)
	}
	if got := a.Config().MaxConcurrentCalls; got != 7 {
		t.Fatalf("a late controller decision after Remove changed the limit to %d, want the owner's 7", got)
	}
}

// held is a semaphore bulkhead whose first ReconfigureFunc waits for
// proceed (entered is closed once it waits): before taking the bulkhead's
// lock, or with inside, holding it. polled is closed when the second call
// begins.
type held struct {
	*semaphore.Bulkhead
	inside                   bool
	entered, proceed, polled chan struct{}
	n                        atomic.Int32
}

func newHeld(b *semaphore.Bulkhead, inside bool) *held {
	return &held{Bulkhead: b, inside: inside, entered: make(chan struct{}), proceed: make(chan struct{}), polled: make(chan struct{})}
}

func (h *held) ReconfigureFunc(f func(semaphore.Config) (semaphore.Config, bool)) error {
	switch h.n.Add(1) {
	case 1:
		pause := func() { close(h.entered); <-h.proceed }
		if !h.inside {
			pause()
			return h.Bulkhead.ReconfigureFunc(f)
		}
		return h.Bulkhead.ReconfigureFunc(func(c semaphore.Config) (semaphore.Config, bool) { pause(); return f(c) })
	case 2:
		close(h.polled)
	}
	return h.Bulkhead.ReconfigureFunc(f)
}

// hold puts h in place of the bulkhead of r's semaphore "a" and returns
// that entry.
func hold(r *Registry, h *held) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[key{bulkhead.Semaphore, "a"}]
	e.b = h
	return e
}

// A controller decision on its way into the bulkhead's Reconfigure when a
// reload lands the very configuration it wants (the registry's Reconfigure
// syncs every entry, so a reload that leaves "a" unchanged does): Remove,
// called then, returns, and the decision does not land after it over the
// new owner's 77.
func TestAdaptiveDecisionAfterSameReloadAndRemove(t *testing.T) {
	c := mustLoad(t, dropYAML)
	r, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	a, _ := r.Semaphore("a")
	h := newHeld(a, false)
	e := hold(r, h)
	decided := make(chan error, 1)
	go func() { decided <- e.setLimit(e.control(), 3) }()
	<-h.entered
	if err := r.Reconfigure(c); err != nil { // a reload that does not change "a"
		t.Fatal(err)
	}
	if got := a.Config().MaxConcurrentCalls; got != 3 {
		t.Fatalf("the reload applied %d, want the controller's 3", got)
	}
	if _, ok := r.Remove(bulkhead.Semaphore, "a"); !ok {
		t.Fatal("Remove found nothing")
	}
	if err := a.Reconfigure(semaphore.Config{MaxConcurrentCalls: 77}); err != nil { // the new owner's choice
		t.Fatal(err)
	}
	close(h.proceed)
	if err := <-decided; err != nil {
		t.Fatal(err)
	}
	if got := a.Config().MaxConcurrentCalls; got != 77 {
		t.Fatalf("a decision under way set the limit to %d after Remove returned, over the owner's 77", got)
	}
}

// A controller decision inside the bulkhead's Reconfigure (holding its lock)
// when Remove is called: Remove passes once through that lock, so the
// decision either lands before Remove returns or not at all, and the owner's
// 77 stays.
func TestAdaptiveDecisionInReconfigureDuringRemove(t *testing.T) {
	r, err := New(mustLoad(t, dropYAML))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	a, _ := r.Semaphore("a")
	h := newHeld(a, true)
	e := hold(r, h)
	decided := make(chan error, 1)
	go func() { decided <- e.setLimit(e.control(), 3) }()
	<-h.entered
	removed := make(chan error, 1)
	go func() {
		if _, ok := r.Remove(bulkhead.Semaphore, "a"); !ok {
			removed <- errors.New("Remove found nothing")
			return
		}
		removed <- a.Reconfigure(semaphore.Config{MaxConcurrentCalls: 77}) // the new owner's choice
	}()
	<-h.polled // Remove is at the bulkhead's lock
	close(h.proceed)
	if err := <-decided; err != nil {
		t.Fatal(err)
	}
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	if got := a.Config().MaxConcurrentCalls; got != 77 {
		t.Fatalf("a decision under way during Remove set the limit to %d after it, over the owner's 77", got)
	}
}

// A subscriber of the limit change of Reconfigure's apply, on that apply's
// goroutine, reconfigures again and then removes the bulkhead: Remove
// returns (it waits for no other apply) and the inner configuration stays.
func TestRemoveAfterNestedReconfigure(t *testing.T) {
	r, err := New(mustLoad(t, "bulkhead:\n  instances:\n    a: {maxConcurrentCalls: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	a, _ := r.Semaphore("a")
	third := mustLoad(t, "bulkhead:\n  instances:\n    a: {maxConcurrentCalls: 3}\n")
	var removed atomic.Bool
	cancel := r.Subscribe(func(e bulkhead.Event) {
		if e.Type == bulkhead.EventLimitChanged && e.Limit == 2 {
			if err := r.Reconfigure(third); err != nil {
				t.Error(err)
			}
			_, ok := r.Remove(bulkhead.Semaphore, "a")
			removed.Store(ok)
		}
	})
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- r.Reconfigure(mustLoad(t, "bulkhead:\n  instances:\n    a: {maxConcurrentCalls: 2}\n"))
	}()
	select {
	case err := <-done:
		if err != nil || !removed.Load() {
			t.Fatalf("Reconfigure: %v; removed by the subscriber: %v", err, removed.Load())
		}
	case <-time.After(guard):
		t.Fatal("Remove after a nested Reconfigure, from the outer apply's subscriber, did not return")
	}
	if got := a.Config().MaxConcurrentCalls; got != 3 {
		t.Fatalf("limit %d, want the nested Reconfigure's 3", got)
	}
}

// Remove called by a subscriber of the limit change that Reconfigure's
// apply makes (on the goroutine of that apply) returns: it waits for the
// apply only until the change has landed, which it has.
func TestRemoveFromTheApplysSubscriber(t *testing.T) {
	r, err := New(mustLoad(t, "bulkhead:\n  instances:\n    a: {maxConcurrentCalls: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	var removed atomic.Bool
	cancel := r.Subscribe(func(e bulkhead.Event) {
		if e.Type == bulkhead.EventLimitChanged {
			_, ok := r.Remove(bulkhead.Semaphore, "a")
			removed.Store(ok)
		}
	})
	defer cancel()
	next := mustLoad(t, "bulkhead:\n  instances:\n    a: {maxConcurrentCalls: 2}\n")
	done := make(chan error, 1)
	go func() { done <- r.Reconfigure(next) }()
	select {
	case err := <-done:
		if err != nil || !removed.Load() {
			t.Fatalf("Reconfigure: %v; removed by the subscriber: %v", err, removed.Load())
		}
	case <-time.After(guard):
		t.Fatal("Remove from a subscriber of Reconfigure's limit change deadlocked")
	}
}
