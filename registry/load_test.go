package registry

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
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

func intp(v int) *int                       { return &v }
func durp(v time.Duration) *time.Duration   { return &v }
func ptrEq[T comparable](p *T, want T) bool { return p != nil && *p == want }
func semSpec(n int, w time.Duration) SemaphoreSpec {
	return SemaphoreSpec{MaxConcurrentCalls: intp(n), MaxWaitDuration: durp(w)}
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
	// The same without the resilience4j: wrapper, and with a dotted key.
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
		{"thumbnails wait", ptrEq(c.Pools["thumbnails"].MaxWaitDuration, 2*time.Second)},
		{"thumbnails buffer", ptrEq(c.Pools["thumbnails"].EventBufferSize, 10)},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("%s: wrong value in %+v", ch.name, c)
		}
	}
}

func TestLoadSpellings(t *testing.T) {
	want := Config{
		Semaphores:       map[string]SemaphoreSpec{"a": {BaseConfig: "b", MaxConcurrentCalls: intp(3), MaxWaitDuration: durp(time.Second), EventBufferSize: intp(7)}},
		SemaphoreConfigs: map[string]SemaphoreSpec{"b": {}},
		Pools:            map[string]PoolSpec{"p": {MaxWorkers: intp(2), QueueCapacity: intp(0), KeepAlive: durp(time.Minute), MaxWaitDuration: durp(0)}},
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
    a: {max-concurrent-calls: 3, max-wait-duration: 1000, base-config: b, event-consumer-buffer-size: 7}
threadPoolBulkhead:
  instances:
    p: {max-workers: 2, queue-capacity: 0, keep-alive: PT1M, max-wait-duration: PT0S}`,
		`resilience4j:
  bulkhead:
    configs: {b: {}}
    instances:
      a: {max_concurrent_calls: "3", max_wait_duration: PT1S, base_config: b, event_consumer_buffer_size: 7}
  thread_pool_bulkhead:
    instances:
      p: {maxWorkers: 2, queue_capacity: 0, keepAlive: 60000, coreThreadPoolSize: 1, max_wait_duration: 0ms}`,
	} {
		if got := mustLoad(t, y); !reflect.DeepEqual(got, want) {
			t.Errorf("input:\n%s\ngot  %+v\nwant %+v", y, got, want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	good := map[string]time.Duration{
		"0": 0, "500": 500 * time.Millisecond, "+20": 20 * time.Millisecond, "-1": -time.Millisecond,
		"500ms": 500 * time.Millisecond, "2s": 2 * time.Second, "1m30s": 90 * time.Second, "1.5s": 1500 * time.Millisecond,
		"PT2S": 2 * time.Second, "PT0.5S": 500 * time.Millisecond, "pt1m": time.Minute, "PT0S": 0,
		"P1DT2H": 26 * time.Hour, "PT1H2M3.000000004S": time.Hour + 2*time.Minute + 3*time.Second + 4,
		"-PT1S": -time.Second, "PT1,5S": 1500 * time.Millisecond, "2d": 48 * time.Hour, " 3s ": 3 * time.Second,
	}
	for in, want := range good {
		got, err := parseDuration(in)
		if err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-", "abc", "P", "PT", "P1H", "PT1D", "PT1.5M", "PT1S2M", "PT1S1S", "1.5", "P1W",
		"PT9999999999999999H", "99999999999999999999", "9999999999999999999ms", "P106751DT24H", "PT.5S", "PT1.1234567890S", "1e3"} {
		if got, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) = %v, want an error", in, got)
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
	r, err := c.resolveSemaphore("a")
	if err != nil || !ptrEq(r.MaxWaitDuration, 0) {
		t.Fatalf("resolved %+v, %v; want an explicit 0 wait", r, err)
	}
}

func TestLoadIgnoresOtherSections(t *testing.T) {
	c := mustLoad(t, `
server: {port: 8080}
spring: {application: {name: shop}}
resilience4j:
  circuitbreaker: {instances: {x: {whatever: 1}}}
  retry: [1, 2]
  bulkhead:
    bulkheadAspectOrder: 3
    metrics: {enabled: true, legacy: {enabled: false}}
    tags: {env: prod}
    instances: {a: {writableStackTraceEnabled: false}}
`)
	if _, ok := c.Semaphores["a"]; !ok || len(c.Pools) != 0 {
		t.Fatalf("got %+v", c)
	}
	for _, y := range []string{"", "# nothing\n", "---\n", "server: {port: 1}\n", "~\n"} {
		if c := mustLoad(t, y); !reflect.DeepEqual(c, Config{}) {
			t.Errorf("%q: got %+v, want an empty Config", y, c)
		}
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
`)
	if !reflect.DeepEqual(c.Semaphores["a"], semSpec(3, 2*time.Second)) || !reflect.DeepEqual(c.Semaphores["b"], semSpec(3, time.Second)) {
		t.Fatalf("got %+v", c.Semaphores)
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
			[]string{"line 3", `semaphore instance "payment"`, "maxConcurrentCalls must be >= 1, got -1"}},
		{"absurd calls", "bulkhead:\n  instances:\n    payment: {maxConcurrentCalls: 1048577}\n",
			[]string{"maxConcurrentCalls must be <= 1048576, got 1048577"}},
		{"huge calls", "bulkhead:\n  instances:\n    payment: {maxConcurrentCalls: 9000000000}\n",
			[]string{`semaphore instance "payment"`, "maxConcurrentCalls is out of range, got 9000000000"}},
		{"absurd workers, Spring name kept", "thread-pool-bulkhead:\n  instances:\n    p: {max-thread-pool-size: 2000000}\n",
			[]string{`pool instance "p"`, "max-thread-pool-size must be <= 1048576, got 2000000", "thread-pool-bulkhead.instances.p.max-thread-pool-size"}},
		{"absurd queue", "thread-pool-bulkhead:\n  configs:\n    big: {queueCapacity: 1048577}\n",
			[]string{`pool config "big"`, "queueCapacity must be <= 1048576, got 1048577"}},
		{"negative queue", "thread-pool-bulkhead:\n  instances:\n    p: {queueCapacity: -1}\n",
			[]string{"queueCapacity must be >= 0, got -1"}},
		{"zero workers", "thread-pool-bulkhead:\n  instances:\n    p: {maxWorkers: 0}\n",
			[]string{"maxWorkers must be >= 1, got 0"}},
		{"core out of range", "thread-pool-bulkhead:\n  instances:\n    p: {coreThreadPoolSize: -3}\n",
			[]string{"coreThreadPoolSize must be between 0 and 1048576, got -3"}},
		{"not a number", "bulkhead:\n  instances:\n    payment: {maxConcurrentCalls: two}\n",
			[]string{`semaphore instance "payment": maxConcurrentCalls must be an integer, got "two"`}},
		{"bad duration", "bulkhead:\n  instances:\n    payment: {maxWaitDuration: soon}\n",
			[]string{`semaphore instance "payment": maxWaitDuration must be a duration`, `got "soon"`}},
		{"negative duration", "thread-pool-bulkhead:\n  instances:\n    p: {keepAliveDuration: -PT1S}\n",
			[]string{`pool instance "p": keepAliveDuration must be >= 0, got -1s`}},
		{"empty value", "bulkhead:\n  instances:\n    payment:\n      maxConcurrentCalls:\n",
			[]string{"maxConcurrentCalls has no value"}},
		{"mapping value", "bulkhead:\n  instances:\n    payment: {maxConcurrentCalls: {a: 1}}\n",
			[]string{"maxConcurrentCalls must be an integer, got a mapping"}},
		{"bad bool", "bulkhead:\n  instances:\n    payment: {writableStackTraceEnabled: maybe}\n",
			[]string{`writableStackTraceEnabled must be true or false, got "maybe"`}},
		{"unknown base", "bulkhead:\n  configs:\n    fast: {}\n  instances:\n    payment: {baseConfig: slow}\n",
			[]string{`semaphore instance "payment": baseConfig names "slow", which is not a known config (known: fast)`, "line 5"}},
		{"cycle", "thread-pool-bulkhead:\n  configs:\n    a: {baseConfig: b}\n    b: {baseConfig: a}\n",
			[]string{`pool config "a": baseConfig "b" makes a cycle: b -> a -> b`}},
		{"self cycle via default", "bulkhead:\n  configs:\n    default: {baseConfig: default}\n",
			[]string{`semaphore config "default": baseConfig "default" makes a cycle`}},
		{"both kinds", "bulkhead:\n  instances: {x: {}}\nthread-pool-bulkhead:\n  instances: {x: {}}\n",
			[]string{`pool instance "x": the name is also a semaphore instance`}},
		{"repeated field", "thread-pool-bulkhead:\n  instances:\n    p:\n      maxWorkers: 2\n      maxThreadPoolSize: 3\n",
			[]string{"line 5", "maxThreadPoolSize is given twice (first at line 4)"}},
		{"repeated instance", "bulkhead:\n  instances:\n    a: {}\n  backends:\n    a: {}\n",
			[]string{`semaphore instance "a" is given twice (first at line 3)`}},
		{"unknown section key", "bulkhead:\n  instance:\n    a: {}\n",
			[]string{`unknown key "instance" in bulkhead (did you mean "instances"?)`}},
		{"unknown far key", "bulkhead:\n  instances:\n    a: {colour: blue}\n",
			[]string{`unknown key "colour"; known keys: maxConcurrentCalls`}},
		{"pool key in semaphore", "bulkhead:\n  instances:\n    a: {queueCapacity: 1}\n",
			[]string{`semaphore instance "a": unknown key "queueCapacity"`}},
		{"section twice", "bulkhead: {}\nresilience4j:\n  bulkhead: {}\n",
			[]string{"the bulkhead section appears twice (first at line 1 as bulkhead)"}},
		{"section in two documents", "bulkhead: {}\n---\nbulkhead: {}\n",
			[]string{"the bulkhead section appears twice"}},
		{"instances not a mapping", "bulkhead:\n  instances: [a, b]\n",
			[]string{"bulkhead.instances must be a mapping of keys to values, got a list"}},
		{"syntax", "bulkhead:\n  instances: {a: [\n", []string{"invalid YAML"}},
		{"top level list", "- a\n", []string{"the top level of the file must be a mapping"}},
		{"empty base", "bulkhead:\n  instances:\n    a: {baseConfig: ''}\n", []string{`baseConfig must name a config, got ""`}},
		{"buffer too big", "bulkhead:\n  instances:\n    a: {eventConsumerBufferSize: 10001}\n", []string{"eventConsumerBufferSize must be <= 10000, got 10001"}},
		{"merge of scalar", "bulkhead:\n  instances:\n    a: {<<: 3}\n", []string{"a merge key (<<) must name a mapping"}},
		{"tags not strings", "bulkhead:\n  tags: {a: [1]}\n", []string{"bulkhead.tags: values must be plain strings"}},
		{"metrics typo", "bulkhead:\n  metrics: {enabeld: true}\n", []string{`unknown key "enabeld" in bulkhead.metrics (did you mean "enabled"?)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := loadErr(t, tt.in)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q\ndoes not contain %q", msg, w)
				}
			}
		})
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
	if n := strings.Count(err.Error(), "\n") + 1; n != maxErrors {
		t.Fatalf("got %d problems, want the cap %d", n, maxErrors)
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
	big := strings.NewReader("# " + strings.Repeat("x", MaxFileSize) + "\n")
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
		`registry: semaphore instance "payment": MaxConcurrentCalls must be >= 1, got 0 (at Semaphores["payment"].MaxConcurrentCalls)`,
		`pool instance "mail": KeepAlive must be >= 0, got -1s`,
		`pool instance "mail": BaseConfig names "missing"`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate() = %v\nwant it to contain %q", err, w)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("empty config: %v", err)
	}
}

func TestResolvePrecedence(t *testing.T) {
	c := mustLoad(t, `
bulkhead:
  configs:
    default: {maxConcurrentCalls: 10, maxWaitDuration: 1s, eventConsumerBufferSize: 5}
    base:    {maxConcurrentCalls: 4}
    derived: {baseConfig: base, maxWaitDuration: 3s}
  instances:
    plain: {}
    own: {maxConcurrentCalls: 7}
    chained: {baseConfig: derived}
    override: {baseConfig: derived, maxConcurrentCalls: 1}
`)
	tests := []struct {
		name string
		want SemaphoreSpec
	}{
		{"plain", SemaphoreSpec{MaxConcurrentCalls: intp(10), MaxWaitDuration: durp(time.Second), EventBufferSize: intp(5)}},
		{"own", SemaphoreSpec{MaxConcurrentCalls: intp(7), MaxWaitDuration: durp(time.Second), EventBufferSize: intp(5)}},
		{"unlisted", SemaphoreSpec{MaxConcurrentCalls: intp(10), MaxWaitDuration: durp(time.Second), EventBufferSize: intp(5)}},
		// A baseConfig chain replaces default: nothing comes from it.
		{"chained", SemaphoreSpec{BaseConfig: "derived", MaxConcurrentCalls: intp(4), MaxWaitDuration: durp(3 * time.Second)}},
		{"override", SemaphoreSpec{BaseConfig: "derived", MaxConcurrentCalls: intp(1), MaxWaitDuration: durp(3 * time.Second)}},
	}
	for _, tt := range tests {
		got, err := c.resolveSemaphore(tt.name)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

// TestLoadDottedKeys: Spring flattens YAML into dotted properties, so a
// dotted key is nested keys at every level, merged with the nested forms.
func TestLoadDottedKeys(t *testing.T) {
	want := Config{Semaphores: map[string]SemaphoreSpec{"payment": semSpec(2, 0)}}
	for name, y := range map[string]string{
		"fully dotted":      "resilience4j.bulkhead.instances.payment.maxConcurrentCalls: 2\nresilience4j.bulkhead.instances.payment.maxWaitDuration: 0\n",
		"under the wrapper": "resilience4j:\n  bulkhead.instances.payment.maxConcurrentCalls: 2\n  bulkhead.instances.payment.maxWaitDuration: 0\n",
		"below the section": "resilience4j:\n  bulkhead:\n    instances.payment.maxConcurrentCalls: 2\n    instances.payment:\n      maxWaitDuration: 0\n",
		"no wrapper":        "bulkhead.instances.payment: {maxConcurrentCalls: 2, maxWaitDuration: 0}\n",
		"mixed with nested": "resilience4j:\n  bulkhead:\n    instances:\n      payment: {maxConcurrentCalls: 2}\nresilience4j.bulkhead.instances.payment.maxWaitDuration: 0\n",
		"kebab, dotted":     "resilience4j.bulkhead.instances.payment.max-concurrent-calls: 2\nresilience4j.bulkhead.instances.payment.max-wait-duration: 0\n",
	} {
		t.Run(name, func(t *testing.T) {
			if got := mustLoad(t, y); !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
	c := mustLoad(t, "resilience4j.thread-pool-bulkhead.configs.default.maxThreadPoolSize: 4\nresilience4j.thread-pool-bulkhead.instances.reports.queueCapacity: 9\n")
	if !ptrEq(c.PoolConfigs["default"].MaxWorkers, 4) || !ptrEq(c.Pools["reports"].QueueCapacity, 9) {
		t.Fatalf("thread-pool-bulkhead, dotted: %+v", c)
	}
	// A name holding dots is written in brackets, as in Spring.
	c = mustLoad(t, "bulkhead:\n  instances:\n    \"[payment.v2]\": {maxConcurrentCalls: 3}\nbulkhead.instances[search.v1].maxConcurrentCalls: 4\n")
	if !ptrEq(c.Semaphores["payment.v2"].MaxConcurrentCalls, 3) || !ptrEq(c.Semaphores["search.v1"].MaxConcurrentCalls, 4) || len(c.Semaphores) != 2 {
		t.Fatalf("bracketed names: %+v", c.Semaphores)
	}
}

func TestLoadDottedKeyErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"same field twice", "bulkhead:\n  instances:\n    payment: {maxConcurrentCalls: 2}\nbulkhead.instances.payment.maxConcurrentCalls: 3\n",
			`maxConcurrentCalls is given twice (first at line 3)`},
		{"typo in a dotted key", "resilience4j.bulkhead.instances.payment.maxConcurentCalls: 2\n",
			`semaphore instance "payment": unknown key "maxConcurentCalls" (from the dotted key "resilience4j.bulkhead.instances.payment.maxConcurentCalls"`},
		{"unbracketed dotted name", "bulkhead:\n  instances:\n    payment.v3: {maxConcurrentCalls: 2}\n",
			`semaphore instance "payment": unknown key "v3" (from the dotted key "payment.v3"; write a name that holds dots as "[a.b]")`},
		{"empty part", "bulkhead:\n  instances..payment: {}\n", `key "instances..payment" is not a valid property name`},
		{"unclosed bracket", "bulkhead:\n  instances.[payment: {}\n", `key "instances.[payment" is not a valid property name`},
		{"typo in a dotted section", "resilience4j.bulkhaed.instances.payment.maxConcurrentCalls: 2\n",
			`unknown section "bulkhaed" in resilience4j (did you mean "bulkhead"?)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if msg := loadErr(t, tt.in); !strings.Contains(msg, tt.want) {
				t.Errorf("error %q\ndoes not contain %q", msg, tt.want)
			}
		})
	}
}

// TestLoadMisspeltSection: under resilience4j:, a key a letter or two from
// a bulkhead section is an error; Resilience4j's other sections are not.
func TestLoadMisspeltSection(t *testing.T) {
	for in, want := range map[string]string{
		"resilience4j:\n  bulkhaed:\n    instances: {payment: {maxConcurrentCalls: 2}}\n":     `line 2: unknown section "bulkhaed" in resilience4j (did you mean "bulkhead"?)`,
		"resilience4j:\n  bulkheads:\n    instances: {}\n":                                    `unknown section "bulkheads" in resilience4j (did you mean "bulkhead"?)`,
		"resilience4j:\n  thread-pool-bulkhed:\n    instances: {p: {maxThreadPoolSize: 2}}\n": `unknown section "thread-pool-bulkhed" in resilience4j (did you mean "thread-pool-bulkhead"?)`,
	} {
		if msg := loadErr(t, in); !strings.Contains(msg, want) {
			t.Errorf("error %q\ndoes not contain %q", msg, want)
		}
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
		msg := loadErr(t, tt.in)
		for _, w := range want[tt.name] {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error %q\ndoes not contain %q", tt.name, msg, w)
			}
		}
	}
	msg := loadErr(t, "x: &x\n  instancs: {a: {}}\nbulkhead:\n  <<: *x\n")
	if !strings.Contains(msg, `unknown key "instancs" (brought in by a merge key <<) in bulkhead (did you mean "instances"?)`) {
		t.Errorf("section-level merge: %q", msg)
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
		d, _ := parseDuration(strings.ToLower(v))
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
	_, err := Load(strings.NewReader("bulkhead:\n  configs:\n    a: {baseConfig: b}\n    b: {baseConfig: c}\n    c: {baseConfig: a}\n  instances:\n    x: {baseConfig: a}\n    y: {baseConfig: c}\n"))
	if err == nil {
		t.Fatal("a cycle was accepted")
	}
	msg := err.Error()
	if n := strings.Count(msg, "makes a cycle"); n != 1 {
		t.Fatalf("the cycle is reported %d times:\n%s", n, msg)
	}
	if !strings.Contains(msg, `semaphore config "a": baseConfig "b" makes a cycle: b -> c -> a -> b`) {
		t.Errorf("message %q", msg)
	}
}

func TestLoadPlaceholderRefused(t *testing.T) {
	for _, v := range []string{`"${PAY_MAX:2}"`, `"${PAY_MAX}"`} {
		msg := loadErr(t, "bulkhead:\n  instances:\n    payment: {maxConcurrentCalls: "+v+"}\n")
		if !strings.Contains(msg, "maxConcurrentCalls is the Spring placeholder") || !strings.Contains(msg, "does not resolve") {
			t.Errorf("%s: %q", v, msg)
		}
	}
	msg := loadErr(t, "bulkhead:\n  instances:\n    payment: {writableStackTraceEnabled: \"${TRACE:false}\"}\n")
	if !strings.Contains(msg, "writableStackTraceEnabled is the Spring placeholder") {
		t.Errorf("bool: %q", msg)
	}
}
