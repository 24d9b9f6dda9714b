package bulkheadtest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/bulkhead-go/bulkhead/bulkheadtest"
)

// The tests import the pool, whose ants dependency starts two goroutines
// when it is initialised; they are ignored, and nothing else.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, bulkheadtest.IgnoreAntsDefaultPool())
}
