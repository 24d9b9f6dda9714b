package registry

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/registry/internal/config"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

const seedYAML = `resilience4j:
  bulkhead:
    instances:
      payment:   { maxConcurrentCalls: 2, maxWaitDuration: 0 }
      inventory: { maxConcurrentCalls: 8, maxWaitDuration: 0 }
`

func mustLoad(t *testing.T, y string) Config {
	t.Helper()
	c, err := Load(strings.NewReader(y))
	if err != nil {
		t.Fatalf("Load: %v\ninput:\n%s", err, y)
	}
	return c
}

func loadErr(t *testing.T, y string) string {
	t.Helper()
	_, err := Load(strings.NewReader(y))
	if err == nil {
		t.Fatalf("Load succeeded, want an error; input:\n%s", y)
	}
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Load error %v is not a *ConfigError", err)
	}
	return err.Error()
}

// wantLoadErr checks that Load refuses in with an error (see loadErr) that
// contains each of want.
func wantLoadErr(t *testing.T, in string, want ...string) {
	t.Helper()
	msg := loadErr(t, in)
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("input %q: error %q\ndoes not contain %q", in, msg, w)
		}
	}
}

func intp(v int) *int                       { return &v }
func durp(v time.Duration) *time.Duration   { return &v }
func ptrEq[T comparable](p *T, want T) bool { return p != nil && *p == want }
func semSpec(n int, w time.Duration) SemaphoreSpec {
	return SemaphoreSpec{MaxConcurrentCalls: intp(n), MaxWaitDuration: durp(w)}
}

// resolvedSem and resolvedPool give the config a registry built from c
// would give the named instance.
func resolvedSem(t *testing.T, c Config, name string) (semaphore.Config, int) {
	t.Helper()
	res, err := config.Resolve(c)
	if err != nil {
		t.Fatal(err)
	}
	sc, x, _ := res.Semaphore(name)
	return sc, x.Buffer
}

func resolvedPool(t *testing.T, c Config, name string) (pool.Config, int) {
	t.Helper()
	res, err := config.Resolve(c)
	if err != nil {
		t.Fatal(err)
	}
	pc, x, _ := res.Pool(name)
	return pc, x.Buffer
}

func TestLoadSeedYAML(t *testing.T) {
	want := Config{Semaphores: map[string]SemaphoreSpec{
		"payment":   semSpec(2, 0),
		"inventory": semSpec(8, 0),
	}}
	got := mustLoad(t, seedYAML)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("seed YAML: got %+v, want %+v", got, want)
	}
	// The same without the resilience4j: wrapper, and with the dotted
	// section key real Spring files use.
	unwrapped := strings.ReplaceAll(strings.TrimPrefix(seedYAML, "resilience4j:\n"), "\n  ", "\n")
	unwrapped = strings.TrimPrefix(unwrapped, "  ")
	if got := mustLoad(t, unwrapped); !reflect.DeepEqual(got, want) {
		t.Fatalf("unwrapped:\n%s\ngot %+v, want %+v", unwrapped, got, want)
	}
	dotted := "resilience4j.bulkhead:\n" + strings.SplitN(seedYAML, "bulkhead:\n", 2)[1]
	if got := mustLoad(t, dotted); !reflect.DeepEqual(got, want) {
		t.Fatalf("dotted:\n%s\ngot %+v, want %+v", dotted, got, want)
	}
}

func TestLoadApplicationYML(t *testing.T) {
	c, err := LoadFile("testdata/application.yml")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		ok   bool
	}{
		{"default config", ptrEq(c.SemaphoreConfigs["default"].MaxConcurrentCalls, 10)},
		{"slow kebab-case calls", ptrEq(c.SemaphoreConfigs["slow"].MaxConcurrentCalls, 4)},
		{"slow ISO wait", ptrEq(c.SemaphoreConfigs["slow"].MaxWaitDuration, 500*time.Millisecond)},
		{"payment", ptrEq(c.Semaphores["payment"].MaxConcurrentCalls, 2)},
		{"search base", c.Semaphores["search"].BaseConfig == "slow"},
		{"search own wait", ptrEq(c.Semaphores["search"].MaxWaitDuration, 250*time.Millisecond)},
		{"search calls unset", c.Semaphores["search"].MaxConcurrentCalls == nil},
		{"reports listed, empty", reflect.DeepEqual(c.Semaphores["reports"], SemaphoreSpec{})},
		{"pool default workers", ptrEq(c.PoolConfigs["default"].MaxWorkers, 4)},
		{"pool default keepAlive", ptrEq(c.PoolConfigs["default"].KeepAlive, 20*time.Millisecond)},
		{"emails maxWorkers", ptrEq(c.Pools["emails"].MaxWorkers, 2)},
		{"emails queue", ptrEq(c.Pools["emails"].QueueCapacity, 5)},
		{"emails keepAlive", ptrEq(c.Pools["emails"].KeepAlive, time.Second)},
		{"thumbnails wait", ptrEq(c.Pools["thumbnails"].QueueTimeout, 2*time.Second)},
		{"thumbnails buffer", ptrEq(c.Pools["thumbnails"].EventBufferSize, 10)},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("%s: wrong value in %+v", ch.name, c)
		}
	}
}

// TestLoadSpringFiles: Resilience4j's own files (its demos' application.yml
// and its Spring Boot modules' test resources) load unchanged and give the
// limits Spring gives them.
func TestLoadSpringFiles(t *testing.T) {
	type semWant struct {
		calls int
		wait  time.Duration
	}
	type poolWant struct{ max, queue int }
	testResources := func() (map[string]semWant, map[string]poolWant) {
		// Instances without baseConfig inherit configs.default too.
		return map[string]semWant{
				"backendA": {1, 10 * time.Millisecond}, "backendB": {2, 10 * time.Millisecond},
				"backendD": {2, 10 * time.Millisecond}, "dummyFeignClient": {3, 101 * time.Millisecond},
				"backendCustomizer": {10, 100 * time.Millisecond},
			}, map[string]poolWant{
				"backendB": {4, 2}, "backendC": {1, 1}, "backendD": {1, 1},
			}
	}
	files := map[string]func() (map[string]semWant, map[string]poolWant){
		"boot2-demo-application.yml": func() (map[string]semWant, map[string]poolWant) {
			// Resilience4j 0.x keys: maxConcurrentCall, maxWaitTime (ms).
			return map[string]semWant{"backendA": {1, 0}, "backendB": {2, 10 * time.Millisecond}}, nil
		},
		"boot3-demo-application.yml": func() (map[string]semWant, map[string]poolWant) {
			return map[string]semWant{"backendA": {10, 0}, "backendB": {20, 10 * time.Millisecond}},
				map[string]poolWant{"backendA": {4, 2}, "backendB": {1, 1}}
		},
		"boot2-test-application.yaml": testResources,
		"boot3-test-application.yaml": func() (map[string]semWant, map[string]poolWant) {
			s, p := testResources()
			p["backendE"] = poolWant{1, 1}
			return s, p
		},
	}
	files["boot4-test-application.yaml"] = files["boot3-test-application.yaml"]
	for file, want := range files {
		t.Run(file, func(t *testing.T) {
			c, err := LoadFile(filepath.Join("testdata", "spring", file))
			if err != nil {
				t.Fatal(err)
			}
			sems, pools := want()
			if len(c.Semaphores) != len(sems) || len(c.Pools) != len(pools) {
				t.Fatalf("%d semaphores and %d pools, want %d and %d", len(c.Semaphores), len(c.Pools), len(sems), len(pools))
			}
			for name, w := range sems {
				got, _ := resolvedSem(t, c, name)
				if got.MaxConcurrentCalls != w.calls || got.MaxWaitDuration != w.wait {
					t.Errorf("semaphore %s: %+v, want %+v", name, got, w)
				}
			}
			for name, w := range pools {
				got, _ := resolvedPool(t, c, name)
				if got.MaxWorkers != w.max || got.QueueCapacity != w.queue || got.QueueTimeout != 0 {
					t.Errorf("pool %s: %+v, want %+v", name, got, w)
				}
			}
			if len(c.Warnings) != 0 {
				t.Errorf("warnings: %q", c.Warnings)
			}
			r, err := New(c)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close(t.Context())
			if len(r.Instances()) != len(sems)+len(pools) {
				t.Errorf("%d instances, want %d", len(r.Instances()), len(sems)+len(pools))
			}
		})
	}
}

func TestLoadSpellings(t *testing.T) {
	want := Config{
		Semaphores:       map[string]SemaphoreSpec{"a": {BaseConfig: "b", MaxConcurrentCalls: intp(3), MaxWaitDuration: durp(time.Second), EventBufferSize: intp(7)}},
		SemaphoreConfigs: map[string]SemaphoreSpec{"b": {}},
		Pools:            map[string]PoolSpec{"p": {MaxWorkers: intp(2), QueueCapacity: intp(0), KeepAlive: durp(time.Minute), QueueTimeout: durp(0)}},
	}
	for _, y := range []string{
		`bulkhead:
  configs: {b: {}}
  instances:
    a: {maxConcurrentCalls: 3, maxWaitDuration: 1s, baseConfig: b, eventConsumerBufferSize: 7}
thread-pool-bulkhead:
  instances:
    p: {maxThreadPoolSize: 2, queueCapacity: 0, keepAliveDuration: 1m, maxWaitDuration: 0}`,
		`bulkhead:
  configs: {b: {}}
  backends:
    a: {max-concurrent-calls: 3, max-wait-duration: 1000, base-config: b, event-consumer-buffer-size: 7, tags: {x: y}}
threadPoolBulkhead:
  instances:
    p: {max-workers: 2, queue-capacity: 0, keep-alive: PT1M, queue-timeout: PT0S, tags: }`,
		`resilience4j:
  bulkhead:
    configs: {b: {}}
    instances:
      a: {max_concurrent_calls: "3", max_wait_duration: PT1S, base_config: b, event_consumer_buffer_size: 7}
  thread_pool_bulkhead:
    instances:
      p: {maxWorkers: 2, queue_capacity: 0, keepAlive: 60000, max_wait_duration: 0ms}`,
	} {
		if got := mustLoad(t, y); !reflect.DeepEqual(got, want) {
			t.Errorf("input:\n%s\ngot  %+v\nwant %+v", y, got, want)
		}
	}
}

func TestLoadDurationForms(t *testing.T) {
	for _, v := range []string{"250", `"250"`, "250ms", "PT0.25S", "0.25s"} {
		c := mustLoad(t, "bulkhead:\n  instances:\n    a: {maxWaitDuration: "+v+"}\n")
		if !ptrEq(c.Semaphores["a"].MaxWaitDuration, 250*time.Millisecond) {
			t.Errorf("maxWaitDuration: %s read as %v", v, c.Semaphores["a"].MaxWaitDuration)
		}
	}
	// 0 is a value, not "unset": it overrides a base's wait.
	c := mustLoad(t, "bulkhead:\n  configs:\n    default: {maxWaitDuration: 1s}\n  instances:\n    a: {maxWaitDuration: 0}\n")
	if got, _ := resolvedSem(t, c, "a"); got.MaxWaitDuration != 0 {
		t.Fatalf("resolved %+v; want an explicit 0 wait", got)
	}
}

func TestLoadIgnoresOtherSections(t *testing.T) {
	c := mustLoad(t, `
server: {port: 8080}
spring: {application: {name: shop}}
resilience4j.retry: {instances: {x: {maxAttempts: 3}}}
resilience4j:
  circuitbreaker: {instances: {x: {whatever: 1}}}
  retry: [1, 2]
  bulkhead:
    bulkheadAspectOrder: 3
    metrics: {enabled: true, legacy: {enabled: false}}
    tags: {env: prod}
    instances: {a: {writableStackTraceEnabled: false, tags: {team: x}}}
`)
	if _, ok := c.Semaphores["a"]; !ok || len(c.Pools) != 0 {
		t.Fatalf("got %+v", c)
	}
}

// TestLoadNothingIsAnError: a file that configures no bulkhead (empty, a
// wrong root key, sections with no entry) is almost always a mistake.
func TestLoadNothingIsAnError(t *testing.T) {
	for in, want := range map[string]string{
		"":                            "configures no bulkhead",
		"# nothing\n":                 "configures no bulkhead",
		"---\n":                       "configures no bulkhead",
		"~\n":                         "configures no bulkhead",
		"server: {port: 1}\n":         "configures no bulkhead",
		"bulkhead: {tags: {a: b}}\n":  "configures no bulkhead",
		"resilience4j: {retry: {}}\n": "configures no bulkhead",
		"resilence4j:\n  bulkhead:\n    instances: {a: {maxConcurrentCalls: 2}}\n": `(is "resilence4j" a misspelt resilience4j?)`,
	} {
		wantLoadErr(t, in, want)
	}
	// configs alone configure the bulkheads asked for by name.
	c := mustLoad(t, "bulkhead: {configs: {default: {maxConcurrentCalls: 3}}}\n")
	if got, _ := resolvedSem(t, c, "anything"); got.MaxConcurrentCalls != 3 {
		t.Fatalf("got %+v", got)
	}
}

func TestLoadMergeKeys(t *testing.T) {
	c := mustLoad(t, `
common: &common {maxConcurrentCalls: 3, maxWaitDuration: 1s}
bulkhead:
  instances:
    a:
      <<: *common
      maxWaitDuration: 2s
    b: *common
    c: {<<: [{maxWaitDuration: 2s}, *common]}
`)
	if !reflect.DeepEqual(c.Semaphores["a"], semSpec(3, 2*time.Second)) || !reflect.DeepEqual(c.Semaphores["b"], semSpec(3, time.Second)) ||
		!reflect.DeepEqual(c.Semaphores["c"], semSpec(3, 2*time.Second)) {
		t.Fatalf("got %+v", c.Semaphores)
	}
}

// TestBothKindsShareAName: a name under bulkhead and under
// thread-pool-bulkhead is two bulkheads, as in Resilience4j.
func TestBothKindsShareAName(t *testing.T) {
	c := mustLoad(t, "bulkhead:\n  instances: {x: {maxConcurrentCalls: 3}}\nthread-pool-bulkhead:\n  instances: {x: {maxThreadPoolSize: 2}}\n")
	if !ptrEq(c.Semaphores["x"].MaxConcurrentCalls, 3) || !ptrEq(c.Pools["x"].MaxWorkers, 2) {
		t.Fatalf("got %+v", c)
	}
}

// TestLoadCoreThreadPoolSize: Spring's core size has no effect on a Go
// pool: alone it is a warning, above the maximum an error (as in Spring).
func TestLoadCoreThreadPoolSize(t *testing.T) {
	c := mustLoad(t, "thread-pool-bulkhead:\n  instances:\n    p: {coreThreadPoolSize: 1}\n    q: {coreThreadPoolSize: 1, maxThreadPoolSize: 2}\n")
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], `pool instance "p": coreThreadPoolSize 1 has no effect`) {
		t.Fatalf("warnings %q", c.Warnings)
	}
	msg := loadErr(t, "thread-pool-bulkhead:\n  configs:\n    default: {maxThreadPoolSize: 2}\n  instances:\n    p: {coreThreadPoolSize: 3}\n")
	if !strings.Contains(msg, `line 5: pool instance "p": coreThreadPoolSize must be between 0 and maxThreadPoolSize (2), got 3`) {
		t.Fatalf("error %q", msg)
	}
}

// TestDefaultInheritance: as Spring does since Resilience4j 2.0.1, a shared
// config that names no baseConfig builds on configs.default, for both
// kinds; a baseConfig chain ends at default too.
func TestDefaultInheritance(t *testing.T) {
	c := mustLoad(t, `
bulkhead:
  configs:
    default: {maxConcurrentCalls: 3, maxWaitDuration: 50ms, eventConsumerBufferSize: 5}
    shared:  {maxConcurrentCalls: 2}
    derived: {baseConfig: shared, maxWaitDuration: 3s}
  instances:
    plain: {}
    own: {maxConcurrentCalls: 7}
    viaShared: {baseConfig: shared}
    chained: {baseConfig: derived}
    override: {baseConfig: derived, maxConcurrentCalls: 1}
thread-pool-bulkhead:
  configs:
    default: {maxThreadPoolSize: 8, queueCapacity: 3, keepAliveDuration: 2s, maxWaitDuration: 1s}
    shared: {maxThreadPoolSize: 2}
  instances:
    p: {baseConfig: shared}
`)
	for name, want := range map[string]semaphore.Config{
		"plain":     {MaxConcurrentCalls: 3, MaxWaitDuration: 50 * time.Millisecond},
		"own":       {MaxConcurrentCalls: 7, MaxWaitDuration: 50 * time.Millisecond},
		"unlisted":  {MaxConcurrentCalls: 3, MaxWaitDuration: 50 * time.Millisecond},
		"viaShared": {MaxConcurrentCalls: 2, MaxWaitDuration: 50 * time.Millisecond},
		"chained":   {MaxConcurrentCalls: 2, MaxWaitDuration: 3 * time.Second},
		"override":  {MaxConcurrentCalls: 1, MaxWaitDuration: 3 * time.Second},
	} {
		got, buf := resolvedSem(t, c, name)
		if got != want || buf != 5 {
			t.Errorf("%s: got %+v (buffer %d), want %+v (buffer 5)", name, got, buf, want)
		}
	}
	got, _ := resolvedPool(t, c, "p")
	if want := (pool.Config{MaxWorkers: 2, QueueCapacity: 3, KeepAlive: 2 * time.Second, QueueTimeout: time.Second}); got != want {
		t.Errorf("pool p: got %+v, want %+v", got, want)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // substrings of the error
	}{
		{"typo names key, path, line and suggestion",
			"resilience4j:\n  bulkhead:\n    instances:\n      payment:\n        maxConcurentCalls: 2\n",
			[]string{"line 5", `semaphore instance "payment"`, `unknown key "maxConcurentCalls"`, `did you mean "maxConcurrentCalls"`, "resilience4j.bulkhead.instances.payment.maxConcurentCalls"}},
		{"negative calls", "bulkhead:\n  instances:\n    payment: {maxConcurrentCalls: -1}\n",
			[]string{"line 3", `semaphore instance "payment": maxConcurrentCalls must be >= 1, got -1`}},
		{"absurd calls", "bulkhead:\n  instances:\n    payment: {maxConcurrentCalls: 1048577}\n",
			[]string{"maxConcurrentCalls must be <= 1048576, got 1048577"}},
		{"huge calls", "bulkhead:\n  instances:\n    payment: {maxConcurrentCalls: 9000000000}\n",
			[]string{`semaphore instance "payment": maxConcurrentCalls is out of range, got 9000000000`}},
		{"absurd workers, Spring name kept", "thread-pool-bulkhead:\n  instances:\n    p: {max-thread-pool-size: 2000000}\n",
			[]string{`pool instance "p": max-thread-pool-size: maxWorkers must be <= 1048576, got 2000000`, "thread-pool-bulkhead.instances.p.max-thread-pool-size"}},
		{"absurd queue", "thread-pool-bulkhead:\n  configs:\n    big: {queueCapacity: 1048577}\n",
			[]string{`pool config "big": queueCapacity must be <= 1048576, got 1048577`}},
		{"negative queue", "thread-pool-bulkhead:\n  instances:\n    p: {queueCapacity: -1}\n",
			[]string{"queueCapacity must be >= 0, got -1"}},
		{"zero workers", "thread-pool-bulkhead:\n  instances:\n    p: {maxWorkers: 0}\n",
			[]string{"maxWorkers must be >= 1, got 0"}},
		{"negative core", "thread-pool-bulkhead:\n  instances:\n    p: {coreThreadPoolSize: -3}\n",
			[]string{"coreThreadPoolSize must be between 0 and maxThreadPoolSize"}},
		{"not a number", "bulkhead:\n  instances:\n    payment: {maxConcurrentCalls: two}\n",
			[]string{`semaphore instance "payment": maxConcurrentCalls must be an integer, got "two"`}},
		{"bad duration", "bulkhead:\n  instances:\n    payment: {maxWaitDuration: soon}\n",
			[]string{`semaphore instance "payment": maxWaitDuration must be a duration`, `got "soon"`}},
		{"negative duration", "thread-pool-bulkhead:\n  instances:\n    p: {keepAliveDuration: -PT1S}\n",
			[]string{`pool instance "p": keepAliveDuration: keepAlive must be >= 0, got -1s`}},
		{"empty value", "bulkhead:\n  instances:\n    payment:\n      maxConcurrentCalls:\n",
			[]string{"maxConcurrentCalls has no value"}},
		{"mapping value", "bulkhead:\n  instances:\n    payment: {maxConcurrentCalls: {a: 1}}\n",
			[]string{"maxConcurrentCalls must be an integer, got a mapping"}},
		{"unknown base", "bulkhead:\n  configs:\n    fast: {}\n  instances:\n    payment: {baseConfig: slow}\n",
			[]string{`semaphore instance "payment": baseConfig names "slow", which is not a known config (known: fast)`, "line 5"}},
		{"unknown base of a config", "bulkhead:\n  configs:\n    fast: {baseConfig: slow}\n  instances:\n    payment: {baseConfig: fast}\n",
			[]string{`semaphore config "fast": baseConfig names "slow"`, "line 3"}},
		{"cycle", "thread-pool-bulkhead:\n  configs:\n    a: {baseConfig: b}\n    b: {baseConfig: a}\n",
			[]string{`pool config "a": baseConfig makes a cycle: a -> b -> a`}},
		{"self cycle via default", "bulkhead:\n  configs:\n    default: {baseConfig: default}\n",
			[]string{`semaphore config "default": baseConfig makes a cycle: default -> default`}},
		{"cycle through default", "bulkhead:\n  configs:\n    default: {baseConfig: other}\n    other: {}\n",
			[]string{`makes a cycle: default -> other -> default`}},
		{"repeated field", "thread-pool-bulkhead:\n  instances:\n    p:\n      maxWorkers: 2\n      maxThreadPoolSize: 3\n",
			[]string{"line 5", "maxThreadPoolSize is given twice (first at line 4)"}},
		{"repeated key", "bulkhead:\n  instances:\n    p:\n      maxConcurrentCalls: 2\n      maxConcurrentCalls: 3\n",
			[]string{"line 5", `key "maxConcurrentCalls" is given twice (first at line 4)`}},
		{"repeated instance", "bulkhead:\n  instances:\n    a: {}\n  backends:\n    a: {}\n",
			[]string{`semaphore instance "a" is given twice (first at line 3)`}},
		{"unknown section key", "bulkhead:\n  instance:\n    a: {}\n",
			[]string{`unknown key "instance" in bulkhead (did you mean "instances"?)`}},
		{"unknown far key", "bulkhead:\n  instances:\n    a: {colour: blue}\n",
			[]string{`unknown key "colour"; known keys: maxConcurrentCalls`}},
		{"pool key in semaphore", "bulkhead:\n  instances:\n    a: {queueCapacity: 1}\n",
			[]string{`semaphore instance "a": unknown key "queueCapacity"`}},
		{"a properties file", "resilience4j.bulkhead.instances.payment.maxConcurrentCalls=2\nresilience4j.bulkhead.instances.payment.maxWaitDuration=0\n",
			[]string{"the top level of the file must be a mapping", "only YAML is read"}},
		{"instances not a mapping", "bulkhead:\n  instances: [a, b]\n",
			[]string{"bulkhead.instances must be a mapping of keys to values, got a list"}},
		{"syntax", "bulkhead:\n  instances: {a: [\n", []string{"invalid YAML"}},
		{"top level list", "- a\n", []string{"the top level of the file must be a mapping"}},
		{"empty base", "bulkhead:\n  instances:\n    a: {baseConfig: ''}\n", []string{`baseConfig must name a config, got ""`}},
		{"buffer too big", "bulkhead:\n  instances:\n    a: {eventConsumerBufferSize: 10001}\n", []string{"eventConsumerBufferSize must be between 0 and 10000, got 10001"}},
		{"merges nested too deep", func() string {
			var b strings.Builder
			b.WriteString("m0: &m0 {maxConcurrentCalls: 1}\n")
			for i := 1; i <= 40; i++ {
				fmt.Fprintf(&b, "m%d: &m%d {<<: *m%d}\n", i, i, i-1)
			}
			return b.String() + "bulkhead: {instances: {a: *m40}}\n"
		}(), []string{`line 2: m33: merge keys (<<) nest more than 32 deep (at m33)`}},
		{"merge of scalar", "bulkhead:\n  instances:\n    a: {<<: 3}\n", []string{"a merge key (<<) must name a mapping"}},
		{"dotted key, unknown", "resilience4j.bulkhead.instances.payment.maxConcurentCalls: 2\n",
			[]string{`line 1: semaphore instance "payment": unknown key "maxConcurentCalls" (did you mean "maxConcurrentCalls"?) (at resilience4j.bulkhead.instances.payment.maxConcurentCalls)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantLoadErr(t, tt.in, tt.want...) })
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	_, err := Load(strings.NewReader("bulkhead:\n  instances:\n    a: {maxConcurrentCalls: 0}\n    b: {maxWaitDuration: x}\n"))
	msg := err.Error()
	if !strings.Contains(msg, `"a"`) || !strings.Contains(msg, `"b"`) {
		t.Fatalf("want both problems, got %v", msg)
	}
	// Many problems are capped.
	var b strings.Builder
	b.WriteString("bulkhead:\n  instances:\n")
	for i := 0; i < 100; i++ {
		b.WriteString("    i" + string(rune('a'+i%26)) + strings.Repeat("x", i) + ": {maxConcurrentCalls: 0}\n")
	}
	_, err = Load(strings.NewReader(b.String()))
	if n := strings.Count(err.Error(), "\n") + 1; n != 20 {
		t.Fatalf("got %d problems, want the cap %d", n, 20)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "app.yml")
	if err := os.WriteFile(p, []byte("bulkhead:\n  instances:\n    a: {maxConcurrentCalls: -2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(p)
	if err == nil || !strings.Contains(err.Error(), p+":3: ") {
		t.Fatalf("LoadFile error %v does not name %s:3", err, p)
	}
	if _, err := LoadFile(filepath.Join(dir, "missing.yml")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestLoadTooLarge(t *testing.T) {
	big := strings.NewReader("# " + strings.Repeat("x", config.MaxFileSize) + "\n")
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("got %v", err)
	}
}

func TestValidateCodeConfig(t *testing.T) {
	c := Config{
		Semaphores: map[string]SemaphoreSpec{"payment": {MaxConcurrentCalls: new(0)}},
		Pools:      map[string]PoolSpec{"mail": {BaseConfig: "missing", KeepAlive: new(-time.Second)}},
	}
	err := c.Validate()
	for _, w := range []string{
		`registry: semaphore instance "payment": maxConcurrentCalls must be >= 1, got 0 (at Semaphores["payment"].MaxConcurrentCalls)`,
		`pool instance "mail": keepAlive must be >= 0, got -1s (at Pools["mail"].KeepAlive)`,
		`pool instance "mail": BaseConfig names "missing", which is not a known config (known: none) (at Pools["mail"].BaseConfig)`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate() = %v\nwant it to contain %q", err, w)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("empty config: %v", err)
	}
}

// TestLoadMisspeltSection: under resilience4j, a key a letter or two from
// a bulkhead section is an error; Resilience4j's other sections are not.
func TestLoadMisspeltSection(t *testing.T) {
	for in, want := range map[string]string{
		"resilience4j:\n  bulkhaed:\n    instances: {payment: {maxConcurrentCalls: 2}}\n":     `line 2: unknown section "bulkhaed" (did you mean "bulkhead"?)`,
		"resilience4j:\n  bulkheads:\n    instances: {}\n":                                    `unknown section "bulkheads" (did you mean "bulkhead"?)`,
		"resilience4j:\n  thread-pool-bulkhed:\n    instances: {p: {maxThreadPoolSize: 2}}\n": `unknown section "thread-pool-bulkhed" (did you mean "thread-pool-bulkhead"?)`,
		"resilience4j.bulkhaed:\n  instances: {payment: {maxConcurrentCalls: 2}}\n":           `line 1: unknown section "bulkhaed" (did you mean "bulkhead"?); a bulkhead section spelt wrong would be ignored (at resilience4j.bulkhaed)`,
	} {
		wantLoadErr(t, in, want)
	}
	c := mustLoad(t, "resilience4j:\n  circuitbreaker: {instances: {a: {}}}\n  retry: {}\n  ratelimiter: {}\n  timelimiter: {}\n  bulkhead:\n    instances: {a: {}}\n")
	if len(c.Semaphores) != 1 {
		t.Fatalf("got %+v", c)
	}
}

// TestLoadMergedKeysChecked: a key brought in by a merge key is checked
// like any other, with the line where it is written.
func TestLoadMergedKeysChecked(t *testing.T) {
	tests := []struct{ name, in string }{
		{"in an entry", "x-common: &common\n  maxConcurentCalls: 3\nbulkhead:\n  instances:\n    payment:\n      <<: *common\n      maxWaitDuration: 10ms\n"},
		{"in a section", "x: &x\n  maxConcurentCalls: 3\nbulkhead:\n  <<: *x\n"},
	}
	want := map[string][]string{
		"in an entry":  {"line 2", `semaphore instance "payment": unknown key "maxConcurentCalls" (brought in by a merge key <<)`, `did you mean "maxConcurrentCalls"`},
		"in a section": {"line 2", `unknown key "maxConcurentCalls" (brought in by a merge key <<) in bulkhead`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantLoadErr(t, tt.in, want[tt.name]...) })
	}
	// An explicit key still overrides a merged one, silently, as YAML says.
	c := mustLoad(t, "x: &x {maxConcurrentCalls: 3, max-wait-duration: 1s}\nbulkhead:\n  instances:\n    a: {<<: *x, maxConcurrentCalls: 4, maxWaitDuration: 2s}\n")
	if !reflect.DeepEqual(c.Semaphores["a"], semSpec(4, 2*time.Second)) {
		t.Fatalf("got %+v", c.Semaphores["a"])
	}
}

func TestLoadDurationMessages(t *testing.T) {
	for _, v := range []string{"500MS", "0.5S", "2S", "1M30S", "500Ms"} {
		c := mustLoad(t, "bulkhead:\n  instances:\n    a: {maxWaitDuration: "+v+"}\n")
		d, _ := time.ParseDuration(strings.ToLower(v))
		if !ptrEq(c.Semaphores["a"].MaxWaitDuration, d) {
			t.Errorf("%s read as %v", v, c.Semaphores["a"].MaxWaitDuration)
		}
	}
	for _, v := range []string{"99999999999999999", "9999999999h", "PT9999999999999999H", "99999999999999999999"} {
		msg := loadErr(t, "bulkhead:\n  instances:\n    a: {maxWaitDuration: "+v+"}\n")
		if !strings.Contains(msg, `maxWaitDuration is out of range, got "`+v+`"`) || strings.Contains(msg, "such as") {
			t.Errorf("%s: %q", v, msg)
		}
	}
	if msg := loadErr(t, "bulkhead:\n  instances:\n    a: {maxWaitDuration: 5 parsecs}\n"); !strings.Contains(msg, "must be a duration such as") {
		t.Errorf("not a duration: %q", msg)
	}
}

// TestLoadCycleReportedOnce: a cycle is one problem, however many entries
// reach it.
func TestLoadCycleReportedOnce(t *testing.T) {
	_, err := Load(strings.NewReader("bulkhead:\n  configs:\n    a: {baseConfig: b}\n    b: {baseConfig: c}\n    c: {baseConfig: a}\n    d: {baseConfig: a}\n  instances:\n    x: {baseConfig: a}\n    y: {baseConfig: c}\n"))
	if err == nil {
		t.Fatal("a cycle was accepted")
	}
	msg := err.Error()
	if n := strings.Count(msg, "\n") + 1; n != 1 {
		t.Fatalf("%d problems reported, want the cycle once:\n%s", n, msg)
	}
	if !strings.Contains(msg, `line 3: semaphore config "a": baseConfig makes a cycle: a -> b -> c -> a`) {
		t.Errorf("message %q", msg)
	}
}

// TestLoadUnclosedBracket: a "[" never closed in a key is part of the key's
// name, not a separator (the fuzzer found that it made the loader loop).
func TestLoadUnclosedBracket(t *testing.T) {
	for in, want := range map[string]string{
		"bulkhead:\n  co[figs:\n    a: {baseConfig: b}\n":       `unknown key "co" in bulkhead`,
		"bulkhead:\n  instances:\n    a:\n      max[Calls: 2\n": `unknown key "max"`,
		"bulkhead.instances.a.[maxConcurrentCalls: 2\n":         `[maxConcurrentCalls`,
	} {
		wantLoadErr(t, in, want)
	}
}
