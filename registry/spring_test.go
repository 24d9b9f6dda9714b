package registry

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeFiles writes name -> content into a new directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// calls returns the resolved MaxConcurrentCalls of semaphore name.
func calls(t *testing.T, c Config, name string) int {
	t.Helper()
	sc, _ := resolvedSem(t, c, name)
	return sc.MaxConcurrentCalls
}

const profilesYAML = `resilience4j.bulkhead.instances:
  payment: {maxConcurrentCalls: 2, maxWaitDuration: 1s}
  search: {maxConcurrentCalls: 3}
---
spring.config.activate.on-profile: prod
resilience4j.bulkhead.instances.payment.maxConcurrentCalls: 20
---
spring.config.activate.on-profile: "!prod"
resilience4j.bulkhead.instances.search.maxConcurrentCalls: 4
---
spring.config.activate.on-profile: prod & eu
resilience4j.bulkhead.instances.search.maxConcurrentCalls: 40
---
spring:
  profiles: legacy
resilience4j.bulkhead.instances.payment.maxConcurrentCalls: 7
`

// TestProfileSelection: documents apply when their profile expression
// holds for the active profiles, later over earlier, key by key.
func TestProfileSelection(t *testing.T) {
	for _, tt := range []struct {
		name, active    string // SPRING_PROFILES_ACTIVE
		payment, search int
	}{
		{"default only", "", 2, 4},
		{"one profile", "prod", 20, 3},
		{"two profiles", "prod,eu", 20, 40},
		{"two profiles, spaces and order", " eu , prod ", 20, 40},
		{"negation holds for another profile", "eu", 2, 4},
		{"legacy spring.profiles", "legacy", 7, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("SPRING_PROFILES_ACTIVE", tt.active)
			c := mustLoad(t, profilesYAML)
			if p, s := calls(t, c, "payment"), calls(t, c, "search"); p != tt.payment || s != tt.search {
				t.Errorf("payment %d, search %d; want %d, %d", p, s, tt.payment, tt.search)
			}
			// Key by key: the prod document leaves payment's wait alone.
			if w, _ := resolvedSem(t, c, "payment"); w.MaxWaitDuration != time.Second {
				t.Errorf("payment's wait %v, want the first document's 1s", w.MaxWaitDuration)
			}
		})
	}
}

// TestProfilesActiveInFile: spring.profiles.active in the file, which the
// environment overrides.
func TestProfilesActiveInFile(t *testing.T) {
	y := "spring.profiles.active: prod\n" + profilesYAML
	t.Setenv("SPRING_PROFILES_ACTIVE", "")
	if got := calls(t, mustLoad(t, y), "payment"); got != 20 {
		t.Errorf("spring.profiles.active: prod gave payment %d, want 20", got)
	}
	t.Setenv("SPRING_PROFILES_ACTIVE", "legacy")
	if got := calls(t, mustLoad(t, y), "payment"); got != 7 {
		t.Errorf("SPRING_PROFILES_ACTIVE=legacy over the file's prod gave payment %d, want 7", got)
	}
	t.Setenv("SPRING_PROFILES_ACTIVE", "")
	wantLoadErr(t, "bulkhead.instances.a: {}\n---\nspring.config.activate.on-profile: x\nspring.profiles.active: y\n",
		"line 4: spring.profiles.active is not allowed in a profile-specific document", `(in the document for profile "x")`)
	wantLoadErr(t, "bulkhead.instances.a: {}\n---\nspring.config.activate.on-profile: a & b | c\n",
		`line 3: spring.config.activate.on-profile: malformed profile expression "a & b | c": mix & and | only with parentheses`)
}

// TestProfileFiles: LoadFile reads application-{profile}.yaml, .yml and
// .properties beside the main file, for each active profile in order,
// later over earlier, after the main file's documents.
func TestProfileFiles(t *testing.T) {
	t.Setenv("SPRING_PROFILES_ACTIVE", "")
	dir := writeFiles(t, map[string]string{
		"application.yml": "spring.profiles.active: prod,eu\n" +
			"resilience4j.bulkhead.instances:\n  a: {maxConcurrentCalls: 1}\n  b: {maxConcurrentCalls: 1}\n  c: {maxConcurrentCalls: 1}\n  d: {maxConcurrentCalls: 1}\n" +
			"---\nspring.config.activate.on-profile: prod\nresilience4j.bulkhead.instances.e.maxConcurrentCalls: 1\n",
		"application-prod.yaml":       "resilience4j.bulkhead.instances:\n  a: {maxConcurrentCalls: 2}\n  b: {maxConcurrentCalls: 2}\n  e: {maxConcurrentCalls: 2}\n",
		"application-prod.yml":        "resilience4j.bulkhead.instances.b.maxConcurrentCalls: 3\nresilience4j.bulkhead.instances.c.maxConcurrentCalls: 3\n",
		"application-prod.properties": "resilience4j.bulkhead.instances.c.max-concurrent-calls=4\n",
		"application-eu.yml":          "resilience4j.bulkhead.instances.d.maxConcurrentCalls: 5\n---\nspring.config.activate.on-profile: prod\nresilience4j.bulkhead.instances.a.maxConcurrentCalls: 6\n",
		"application-default.yml":     "resilience4j.bulkhead.instances.a.maxConcurrentCalls: 99\n",
	})
	c, err := LoadFile(filepath.Join(dir, "application.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"a": 6, "b": 3, "c": 4, "d": 5, "e": 2} {
		if got := calls(t, c, name); got != want {
			t.Errorf("%s: %d, want %d", name, got, want)
		}
	}
	// No profile active: the default profile's file applies.
	t.Setenv("SPRING_PROFILES_ACTIVE", "none-of-these")
	c, _ = LoadFile(filepath.Join(dir, "application.yml"))
	if got := calls(t, c, "a"); got != 1 {
		t.Errorf("profile none-of-these: a %d, want 1", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "application.yml"), []byte("bulkhead.instances.a: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPRING_PROFILES_ACTIVE", "")
	c, _ = LoadFile(filepath.Join(dir, "application.yml"))
	if got := calls(t, c, "a"); got != 99 {
		t.Errorf("no profile: a %d, want application-default.yml's 99", got)
	}
	// An error in a profile file names it.
	if err := os.WriteFile(filepath.Join(dir, "application-default.yml"), []byte("bulkhead.instances.a.maxConcurrentCalls: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadFile(filepath.Join(dir, "application.yml"))
	if want := filepath.Join(dir, "application-default.yml") + `:1: semaphore instance "a": maxConcurrentCalls must be >= 1, got 0`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v\nwant %s", err, want)
	}
}

// TestPlaceholders: ${NAME} and ${NAME:default} from the environment
// (as written, or in Spring's upper-case form), then from the file.
func TestPlaceholders(t *testing.T) {
	y := `limits: {search: 6, nested: "${limits.search}"}
resilience4j.bulkhead.instances:
  payment: {maxConcurrentCalls: "${PAYMENT_LIMIT:8}", maxWaitDuration: "${PAYMENT_WAIT:1}s"}
  search: {maxConcurrentCalls: "${limits.search}"}
  nested: {maxConcurrentCalls: "${limits.nested}"}
  defaulted: {maxConcurrentCalls: "${NOT_SET_ANYWHERE:${limits.search}}"}
`
	c := mustLoad(t, y)
	for name, want := range map[string]int{"payment": 8, "search": 6, "nested": 6, "defaulted": 6} {
		if got := calls(t, c, name); got != want {
			t.Errorf("%s: %d, want %d", name, got, want)
		}
	}
	t.Setenv("PAYMENT_LIMIT", "3")
	t.Setenv("LIMITS_SEARCH", "9") // Spring's form of limits.search
	c = mustLoad(t, y)
	for name, want := range map[string]int{"payment": 3, "search": 9, "nested": 9} {
		if got := calls(t, c, name); got != want {
			t.Errorf("with the environment, %s: %d, want %d", name, got, want)
		}
	}
	wantLoadErr(t, "bulkhead:\n  instances:\n    payment: {maxConcurrentCalls: \"${PAY_MAX_UNSET}\"}\n",
		`line 3: semaphore instance "payment": maxConcurrentCalls has the placeholder ${PAY_MAX_UNSET}, which resolves to nothing`)
	wantLoadErr(t, "a: ${b}\nb: ${c}\nc: ${a}\nbulkhead:\n  instances:\n    p: {maxConcurrentCalls: \"${a}\"}\n",
		`line 6: semaphore instance "p": maxConcurrentCalls has the placeholder ${a}, which makes a cycle: a -> b -> c -> a`)
	wantLoadErr(t, "bulkhead.instances.p.maxConcurrentCalls: ${x\n", `has the placeholder "${x" with no closing }`)
	// Placeholders outside the bulkhead sections are not resolved.
	mustLoad(t, "spring.application.name: ${UNSET_APP_NAME}\nbulkhead.instances.a: {}\n")
}

// TestFlattenedKeys: a dotted key is the same path as nested keys, at any
// depth, in YAML and in .properties.
func TestFlattenedKeys(t *testing.T) {
	nested := mustLoad(t, `resilience4j:
  bulkhead:
    instances:
      a:
        maxConcurrentCalls: 3
        adaptive: {maxLimit: 9, vegas: {alpha: 2.5}}
  thread-pool-bulkhead:
    instances:
      "[p.q]": {maxThreadPoolSize: 2, contextPropagators: [x, y]}
`)
	for _, y := range []string{
		"resilience4j.bulkhead.instances.a.maxConcurrentCalls: 3\nresilience4j.bulkhead.instances.a.adaptive.maxLimit: 9\nresilience4j.bulkhead.instances.a.adaptive.vegas.alpha: 2.5\n" +
			"resilience4j.thread-pool-bulkhead.instances.[p.q].maxThreadPoolSize: 2\nresilience4j.thread-pool-bulkhead.instances.[p.q].contextPropagators: [x, y]\n",
		"resilience4j:\n  bulkhead.instances.a:\n    maxConcurrentCalls: 3\n    adaptive.maxLimit: 9\n    adaptive.vegas: {alpha: 2.5}\n" +
			"  thread-pool-bulkhead:\n    instances.[p.q].max-thread-pool-size: 2\n",
		"resilience4j.bulkhead:\n  instances.a: {maxConcurrentCalls: 3, adaptive: {maxLimit: 9, vegas.alpha: 2.5}}\n" +
			"resilience4j.thread-pool-bulkhead.instances:\n  \"[p.q]\": {max_thread_pool_size: 2}\n",
	} {
		if got := mustLoad(t, y); !configEqual(got, nested) {
			t.Errorf("input:\n%s\ngot  %+v\nwant %+v", y, got, nested)
		}
	}
	dir := writeFiles(t, map[string]string{"application.properties": `# a comment
! another
resilience4j.bulkhead.instances.a.maxConcurrentCalls=3
resilience4j.bulkhead.instances.a.adaptive.maxLimit = 9
resilience4j.bulkhead.instances.a.adaptive.vegas.alpha : 2.5
resilience4j.thread-pool-bulkhead.instances.[p.q].max-thread-pool-size \
    2
resilience4j.thread-pool-bulkhead.instances.[p.q].contextPropagators[0]=x
`})
	c, err := LoadFile(filepath.Join(dir, "application.properties"))
	if err != nil {
		t.Fatal(err)
	}
	if !configEqual(c, nested) {
		t.Errorf(".properties: got %+v, want %+v", c, nested)
	}
	// Load stays YAML, and says so.
	wantLoadErr(t, "resilience4j.bulkhead.instances.a.maxConcurrentCalls=3\n", "only YAML is read here: LoadFile reads an application.properties file by its extension")
}

func configEqual(a, b Config) bool {
	sa, sb := a.Semaphores["a"], b.Semaphores["a"]
	pa, pb := a.Pools["p.q"], b.Pools["p.q"]
	return len(a.Semaphores) == len(b.Semaphores) && len(a.Pools) == len(b.Pools) &&
		ptrEq(sa.MaxConcurrentCalls, *sb.MaxConcurrentCalls) && sa.Adaptive != nil && *sa.Adaptive == *sb.Adaptive &&
		ptrEq(pa.MaxWorkers, *pb.MaxWorkers)
}

// TestPropertiesFileDocuments: #--- separates documents of a .properties
// file, each with its own profile, as in Spring.
func TestPropertiesFileDocuments(t *testing.T) {
	t.Setenv("SPRING_PROFILES_ACTIVE", "prod")
	dir := writeFiles(t, map[string]string{"app.properties": "bulkhead.instances.a.maxConcurrentCalls=1\n#---\nspring.config.activate.on-profile=prod\nbulkhead.instances.a.maxConcurrentCalls=2\n#---\nspring.config.activate.on-profile=dev\nbulkhead.instances.a.maxConcurrentCalls=3\n"})
	c, err := LoadFile(filepath.Join(dir, "app.properties"))
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(t, c, "a"); got != 2 {
		t.Errorf("a: %d, want 2", got)
	}
	dir = writeFiles(t, map[string]string{"app.properties": "bulkhead.instances.a.maxConcurrentCalls=1\n#---\nspring.config.activate.on-profile=prod\nbulkhead.instances.a.maxConcurentCalls=2\n"})
	_, err = LoadFile(filepath.Join(dir, "app.properties"))
	if want := `app.properties:4: semaphore instance "a": unknown key "maxConcurentCalls" (did you mean "maxConcurrentCalls"?) (at bulkhead.instances.a.maxConcurentCalls) (in the document for profile "prod")`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v\nwant %s", err, want)
	}
}

// TestSyntaxErrorsHaveLines: a YAML syntax error names its line (and a
// tab when one is the cause), and several errors come in line order.
func TestSyntaxErrorsHaveLines(t *testing.T) {
	_, err := Load(strings.NewReader("bulkhead:\n\tinstances: {}\n"))
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Line != 2 || !strings.Contains(ce.Msg, "a tab: YAML indents with spaces only") {
		t.Fatalf("tab: %v (line %d)", err, ce.Line)
	}
	_, err = Load(strings.NewReader("bulkhead:\n  instances:\n    a: {maxConcurrentCalls: 0}\n    b: {maxWaitDuration: x}\n    c: {maxConcurentCalls: 1}\n  configs:\n    d: {baseConfig: nowhere}\n"))
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		lines = append(lines, strings.SplitN(l, ":", 3)[1])
	}
	if got := strings.Join(lines, ","); got != " line 3, line 4, line 5, line 7" {
		t.Errorf("lines %s; error:\n%v", got, err)
	}
	_, err = Load(strings.NewReader("bulkhead:\n  instances:\n    a: {<<: *nowhere}\n"))
	if !errors.As(err, &ce) || ce.Line != 3 {
		t.Errorf("unknown anchor: %v", err)
	}
}
