package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/bulkhead-go/bulkhead/bulkheadtest"
)

// ants starts two goroutines for its default pool when imported.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, bulkheadtest.IgnoreAntsDefaultPool()) }

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, want := range []string{
		"fan-out: 50 lookups, 4 at a time",
		`first "stock of 1: 7", last "stock of 50: 7"`,
		"12 accepted, 28 rejected with ErrBulkheadFull",
		"stats: permitted 62, rejected 28, finished 62, in flight 0, queued 0",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
