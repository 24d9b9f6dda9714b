package reliability

import (
	"testing"

	"go.uber.org/goleak"
)

// IgnoreCurrent ignores exactly the goroutines that exist before any test
// runs: the two of the pool that ants creates when its package is
// initialised (ants.defaultAntsPool). Nothing else is ignored: a pool
// bulkhead's own goroutines (its ants pool's housekeeping included) must be
// gone after Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}
