package bulkheadtest

import (
	// Imported for its initialisation, which runs before this package's:
	// ants starts its default pool's two goroutines then.
	_ "github.com/panjf2000/ants/v2"
	"go.uber.org/goleak"
)

// atInit holds the goroutines that exist when this package is initialised:
// ants' two, since no other package of this module starts one at init.
var atInit = goleak.IgnoreCurrent()

// IgnoreAntsDefaultPool returns a goleak option that ignores exactly the two
// goroutines that github.com/panjf2000/ants/v2 starts for its package-level
// default pool when it is initialised (purgeStaleWorkers and ticktock), and
// nothing else: a pool bulkhead left unclosed is still reported. Importing
// the pool package (or the registry) starts them. Use it in TestMain:
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(m, bulkheadtest.IgnoreAntsDefaultPool())
//	}
func IgnoreAntsDefaultPool() goleak.Option { return atInit }
