package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkhead-go/bulkhead/examples/adaptive/sim"
)

// TestRun runs the command's work and checks that it printed every row and
// the comparison, and drew the chart. The figures themselves are in the log
// (go test -v).
func TestRun(t *testing.T) {
	var out strings.Builder
	png := filepath.Join(t.TempDir(), "adaptive.png")
	if err := run(t, &out, sim.Default(), png); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, want := range []string{"static 40", "vegas", "gradient2", "aimd", "failsafe-go",
		"vegas against failsafe-go", "steady", "halved", "recovered", "wrote " + png} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
