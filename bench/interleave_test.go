package bench

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestInterleaved compares rows of groups 1, 2, 3, 4 and 7
// finely interleaved: every row runs in chunks of BENCH_CHUNK operations, in
// a new random order each round, for BENCH_ROUNDS rounds, and each row's
// time is divided by its table's floor (or by BENCH_REF) in the same round.
// On a busy machine this keeps ratios within a few percent where separate
// runs differ by tens of percent. It runs only when BENCH_INTER names the
// rows (a regular expression over table/row names), for example
//
//	BENCH_INTER='G1_Guard/(floor_atomicCAS|ours_semaphore_Do)$' go test -run TestInterleaved -v
func TestInterleaved(t *testing.T) {
	pattern := os.Getenv("BENCH_INTER")
	if pattern == "" {
		t.Skip("set BENCH_INTER to a pattern of rows to compare")
	}
	re := regexp.MustCompile(pattern)
	rounds := envInt(t, "BENCH_ROUNDS", 200)
	chunk := envInt(t, "BENCH_CHUNK", 2000)
	ref := os.Getenv("BENCH_REF")
	type named struct {
		table string
		c     opCase
	}
	var all []named
	for _, c := range guardCases {
		all = append(all, named{"G1_Guard", c})
	}
	for _, c := range rejectCases {
		all = append(all, named{"G2_Reject", c})
	}
	for _, c := range joinCases {
		all = append(all, named{"G3_Join", c})
	}
	for _, c := range fanOutCases {
		all = append(all, named{"G4_FanOut", c})
	}
	for _, c := range configuredSemaphoreCases {
		all = append(all, named{"G7_Configured/semaphore", c})
	}
	for _, c := range configuredPoolCases {
		all = append(all, named{"G7_Configured/pool", c})
	}
	testing.Benchmark(func(b *testing.B) {
		if b.N != 1 {
			return
		}
		type row struct {
			name, table string
			op          func()
			ns          []float64
		}
		var rows []*row
		for _, n := range all {
			name := n.table + "/" + kindPrefix[n.c.kind] + n.c.name
			if re.MatchString(name) {
				rows = append(rows, &row{name: name, table: n.table, op: n.c.setup(b)})
			}
		}
		order := slices.Clone(rows)
		for range rounds {
			rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, r := range order {
				runtime.Gosched()
				start := time.Now()
				for range chunk {
					r.op()
				}
				r.ns = append(r.ns, float64(time.Since(start).Nanoseconds())/float64(chunk))
			}
		}
		var out strings.Builder
		fmt.Fprintf(&out, "%d rounds of %d ops, GOMAXPROCS %d\n%-55s %8s %8s %8s  %s\n", rounds, chunk, runtime.GOMAXPROCS(0),
			"row", "min", "p10", "median", "ratio to reference (median of per-round ratios; p10 / p10)")
		for _, r := range rows {
			var refRow *row
			for _, x := range rows {
				if (ref != "" && strings.HasSuffix(x.name, ref) && x.table == r.table) ||
					(ref == "" && x.table == r.table && strings.Contains(x.name, "/floor_")) {
					refRow = x
				}
			}
			s := slices.Sorted(slices.Values(r.ns))
			line := fmt.Sprintf("%-55s %8.2f %8.2f %8.2f", r.name, s[0], s[len(s)/10], s[len(s)/2])
			if refRow != nil {
				q := make([]float64, len(r.ns))
				for i := range q {
					q[i] = r.ns[i] / refRow.ns[i]
				}
				slices.Sort(q)
				rs := slices.Sorted(slices.Values(refRow.ns))
				line += fmt.Sprintf("  %.3f× ; %.3f×  (ref %s)", q[len(q)/2], s[len(s)/10]/rs[len(rs)/10], strings.TrimPrefix(refRow.name, r.table+"/"))
			}
			out.WriteString(line + "\n")
		}
		fmt.Print(out.String())
	})
}

func envInt(t *testing.T, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s must be a positive integer, got %q", key, v)
	}
	return n
}
