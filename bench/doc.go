// Package bench compares the bulkhead library with its peers, side by side,
// in one test binary. It holds only benchmarks; run them with run.sh (which
// builds the binary once, interleaves the rounds and writes the tables into
// docs/performance.md) or, to check that they still compile and run, with
//
//	go test -run='^$' -bench=. -benchtime=1x ./...
//
// Every benchmark name has the form Benchmark<Group>/<table>/<kind>_<row>,
// where kind is floor (the one reference floor of the table), base (another
// reference point), ours (this library) or peer (another library or idiom).
// The runner reads the kind from the name to compute the ratios.
//
// This is a separate module so that library users never download the peers.
package bench
