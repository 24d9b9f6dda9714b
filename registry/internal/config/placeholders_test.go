package config

import (
	"strings"
	"testing"
)

// TestProfilesActivePlaceholderFromFile: spring.profiles.active's
// placeholders are expanded before ld.props is filled (in finish), so a
// placeholder naming a property of the file is reported as set nowhere
// ("no environment variable or property app.profile is set"), and one with
// a default silently takes the default. Spring resolves it from the file.
func TestProfilesActivePlaceholderFromFile(t *testing.T) {
	src := "app.profile: prod\nspring.profiles.active: ${app.profile:dev}\n" +
		"bulkhead.instances.a.maxConcurrentCalls: 1\n---\n" +
		"spring.config.activate.on-profile: prod\nbulkhead.instances.a.maxConcurrentCalls: 7\n"
	c, err := Load([]byte(src), "f.yml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := *c.Semaphores["a"].MaxConcurrentCalls; got != 7 {
		t.Errorf("maxConcurrentCalls %d: the profile ${app.profile:dev} resolved to dev, not the file's app.profile (prod)", got)
	}
	_, err = Load([]byte(strings.Replace(src, ":dev}", "}", 1)), "f.yml", nil)
	if err != nil {
		t.Errorf("without a default: %v", err)
	}
}

// TestErrorNamesPlaceholderNotItsValue: an error about a value that came
// through a placeholder names the placeholder as written, never the value
// (from the environment, which the status page must not show); a literal
// value is still quoted.
func TestErrorNamesPlaceholderNotItsValue(t *testing.T) {
	env := func(k string) (string, bool) { return "hunter2-password", k == "SOME_SECRET" }
	_, err := Load([]byte("bulkhead.instances:\n  payment: {maxConcurrentCalls: \"${SOME_SECRET}\"}\n"), "f.yml", env)
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "${SOME_SECRET}") ||
		!strings.Contains(err.Error(), "f.yml:2:") || !strings.Contains(err.Error(), "maxConcurrentCalls") {
		t.Errorf("error: %v, want one naming f.yml:2, maxConcurrentCalls and ${SOME_SECRET}, not its value", err)
	}
	_, err = Load([]byte("bulkhead.instances:\n  payment: {maxConcurrentCalls: 3x}\n"), "f.yml", env)
	if err == nil || !strings.Contains(err.Error(), `got "3x"`) {
		t.Errorf("literal value: %v, want got \"3x\"", err)
	}
}
