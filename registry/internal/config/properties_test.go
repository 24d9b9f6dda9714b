package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadFiles(t *testing.T, main string, files map[string]string) (Config, error) {
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, _, err := LoadFile(filepath.Join(dir, main), nil)
	return c, err
}

// TestPropertiesBOMIsStripped: a .properties file saved with a UTF-8 byte order
// mark (as Windows editors do) loses its first property silently: its key
// is "\ufeffbulkhead..." and is skipped as a non-bulkhead section. Load
// strips the BOM of a YAML file (go-yaml does); the same file as YAML loads
// both instances.
func TestPropertiesBOMIsStripped(t *testing.T) {
	const body = "bulkhead.instances.a.maxConcurrentCalls=3\nbulkhead.instances.b.maxConcurrentCalls=4\n"
	c, err := loadFiles(t, "application.properties", map[string]string{"application.properties": "\ufeff" + body})
	if err != nil {
		return // an error is acceptable; silence is not
	}
	if a, ok := c.Semaphores["a"]; !ok || a.MaxConcurrentCalls == nil || *a.MaxConcurrentCalls != 3 {
		t.Errorf("with a BOM, instance a is %+v (listed: %v), want maxConcurrentCalls 3 or an error; instances: %v", a, ok, keysOf(c.Semaphores))
	}
}

// TestProfilePropertiesBOMIsStripped: the same in a profile file: prod's
// override of the first key is dropped and the main file's value stays,
// with no error.
func TestProfilePropertiesBOMIsStripped(t *testing.T) {
	c, err := loadFiles(t, "application.yml", map[string]string{
		"application.yml":             "spring.profiles.active: prod\nbulkhead.instances.a.maxConcurrentCalls: 3\n",
		"application-prod.properties": "\ufeffbulkhead.instances.a.maxConcurrentCalls=5\n",
	})
	if err != nil {
		return
	}
	if got := *c.Semaphores["a"].MaxConcurrentCalls; got != 5 {
		t.Errorf("prod sets maxConcurrentCalls=5 in application-prod.properties (with a BOM); got %d and no error", got)
	}
}

// TestPropertiesSurrogatePair: java.util.Properties reads
// \uD83D\uDE00 as one character (U+1F600); unescape writes each half as
// U+FFFD, so the instance is silently named "\ufffd\ufffd".
func TestPropertiesSurrogatePair(t *testing.T) {
	c, err := loadFiles(t, "application.properties", map[string]string{
		"application.properties": `bulkhead.instances.[pay\uD83D\uDE00].maxConcurrentCalls=3` + "\n",
	})
	if err != nil {
		return
	}
	if _, ok := c.Semaphores["pay\U0001F600"]; !ok {
		t.Errorf("instances: %q, want \"pay\\U0001F600\" (or an error)", keysOf(c.Semaphores))
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestPropertiesMalformedUnicodeEscape: java.util.Properties refuses a
// \u escape without four hex digits; it was read as the letter u.
func TestPropertiesMalformedUnicodeEscape(t *testing.T) {
	_, err := loadFiles(t, "application.properties", map[string]string{
		"application.properties": "bulkhead.instances.b.maxConcurrentCalls=2\nbulkhead.instances.[a\\u12].maxConcurrentCalls=3\n",
	})
	if err == nil || !strings.Contains(err.Error(), "application.properties:2:") || !strings.Contains(err.Error(), `\u`) {
		t.Errorf("a\\u12: %v, want an error naming the file, line 2 and the escape", err)
	}
}
