package registry

import (
	"testing"

	"go.uber.org/goleak"
)

// IgnoreCurrent ignores exactly the goroutines that exist before any test
// runs: the two of the pool ants starts when its package is initialised
// (ants.defaultAntsPool). The goroutines of a pool the registry failed to
// close are still reported.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}
