// Command adaptive simulates a client calling a dependency through a
// bulkhead, with static limits and with each adaptive algorithm, on a virtual
// clock, and prints what each achieved per phase: the dependency runs
// steadily, loses half its capacity, then recovers.
//
//	go run ./examples/adaptive [-slots 40] [-initial 20] [-seed 1] [-vegas.alpha 0] [-vegas.beta 0]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/bulkhead-go/bulkhead/examples/adaptive/sim"
)

func main() {
	s := sim.Default()
	s.Flags(flag.CommandLine)
	flag.Parse()
	if _, err := run(os.Stdout, s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run simulates s with every limit, prints the results to w and returns
// them.
func run(w io.Writer, s sim.Scenario) ([]sim.Result, error) {
	results, err := sim.RunAll(s)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "A dependency with %d slots of %v (log-normal), a queue of %d and a %v client deadline;\n",
		s.Slots, s.Service, s.Queue, s.Timeout)
	fmt.Fprintf(w, "static limits %v and each algorithm (vegas is the default), on a virtual clock.\n\n", sim.Statics(s))
	sim.Print(w, s, results)
	return results, nil
}
