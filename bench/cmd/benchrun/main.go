// Command benchrun runs the comparison benchmarks of the bench module and
// writes their tables.
//
// It builds the test binary once, runs every benchmark once per round for
// -count rounds (so machine noise spreads over all rows instead of hitting a
// few), hands the samples to benchstat for medians and confidence intervals,
// and writes one markdown table per group with the ratio of every row to the
// group's floor and to its best peer. The tables go to <out>/tables.md and
// into every file named by -docs, between marker comments of the form
//
//	<!-- bench:begin NAME --> ... <!-- bench:end NAME -->
//
// where NAME is one of machine, command, tables, targets, headline, jointrap.
// Run it from the bench module's directory (run.sh does).
package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

type options struct {
	count         int
	benchtime     string
	bench         string
	cpu           string
	contention    string
	contentionCPU string
	out           string
	docs          string
	benchstat     string
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func main() {
	var o options
	count, err := strconv.Atoi(envOr("BENCH_COUNT", "6"))
	if err != nil {
		fatalf("BENCH_COUNT must be an integer, got %q", os.Getenv("BENCH_COUNT"))
	}
	flag.IntVar(&o.count, "count", count, "rounds; every benchmark runs once per round (env BENCH_COUNT; benchstat needs 6 for a 95% CI)")
	flag.StringVar(&o.benchtime, "benchtime", envOr("BENCH_TIME", "50ms"), "-test.benchtime of each run (env BENCH_TIME)")
	flag.StringVar(&o.bench, "bench", envOr("BENCH_FILTER", "."), "-test.bench pattern (env BENCH_FILTER)")
	flag.StringVar(&o.cpu, "cpu", envOr("BENCH_CPU", "1,2"), "-test.cpu list for every benchmark (env BENCH_CPU)")
	flag.StringVar(&o.contention, "contention", envOr("BENCH_CONTENTION", "^BenchmarkG[12]_/parallel/"), "benchmarks also run at -contention-cpu; \"none\" skips (env BENCH_CONTENTION)")
	flag.StringVar(&o.contentionCPU, "contention-cpu", envOr("BENCH_CONTENTION_CPU", "8"), "-test.cpu for the contention benchmarks")
	flag.StringVar(&o.out, "out", envOr("BENCH_OUT", ""), "directory for the binary, the raw samples and benchstat's output (env BENCH_OUT; default results, or a new temporary directory when -docs is none, so that a quick look leaves the committed results alone)")
	flag.StringVar(&o.docs, "docs", envOr("BENCH_DOCS", "../docs/performance.md,../docs/choosing.md,../README.md"), "comma-separated files whose marker blocks are regenerated; \"none\" skips (env BENCH_DOCS)")
	flag.StringVar(&o.benchstat, "benchstat", envOr("BENCHSTAT", ""), "benchstat binary (default: PATH, then $(go env GOPATH)/bin)")
	flag.Parse()
	if o.count < 1 {
		fatalf("-count must be >= 1, got %d", o.count)
	}
	if o.out == "" {
		o.out = "results"
		if o.docs == "" || o.docs == "none" {
			dir, err := os.MkdirTemp("", "bulkhead-bench-")
			if err != nil {
				fatalf("%v", err)
			}
			o.out = dir
		}
	}
	if err := run(o); err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchrun: "+format+"\n", args...)
	os.Exit(1)
}

func run(o options) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return fmt.Errorf("run me from the bench module's directory (no go.mod here): %v", err)
	}
	bs, err := findBenchstat(o.benchstat)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	m := machineInfo(bs)
	m.load0 = loadavg()
	fmt.Printf("go:          %s\nGOMAXPROCS:  %d (NumCPU %d)\ncpu:         %s\nkernel:      %s\nload:        %s\n",
		m.goVersion, m.gomaxprocs, m.numCPU, m.cpuModel, m.kernel, m.load0)

	bin := filepath.Join(o.out, "bench.test")
	fmt.Fprintf(os.Stderr, "building %s\n", bin)
	if err := command("go", "test", "-c", "-o", bin, ".").Run(); err != nil {
		return fmt.Errorf("building the test binary: %v", err)
	}
	rawPath := filepath.Join(o.out, "raw.txt")
	raw, err := os.Create(rawPath)
	if err != nil {
		return err
	}
	defer raw.Close()

	type pass struct{ bench, cpu string }
	passes := []pass{{o.bench, o.cpu}}
	if o.contention != "" && o.contention != "none" {
		passes = append(passes, pass{o.contention, o.contentionCPU})
	}
	start := time.Now()
	for r := 1; r <= o.count; r++ {
		for _, p := range passes {
			fmt.Fprintf(os.Stderr, "round %d/%d: -bench=%s -cpu=%s (%s elapsed)\n", r, o.count, p.bench, p.cpu, time.Since(start).Round(time.Second))
			cmd := exec.Command(bin, "-test.run=^$", "-test.bench="+p.bench, "-test.benchtime="+o.benchtime,
				"-test.cpu="+p.cpu, "-test.count=1", "-test.benchmem")
			cmd.Stdout = raw
			cmd.Stderr = os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("round %d: %s: %v", r, strings.Join(cmd.Args, " "), err)
			}
		}
	}
	m.elapsed = time.Since(start).Round(time.Second)
	m.load1 = loadavg()
	if err := raw.Close(); err != nil {
		return err
	}

	human, err := exec.Command(bs, rawPath).Output()
	if err != nil {
		return fmt.Errorf("benchstat: %v", err)
	}
	if err := os.WriteFile(filepath.Join(o.out, "benchstat.txt"), human, 0o644); err != nil {
		return err
	}
	csvOut, err := exec.Command(bs, "-format", "csv", rawPath).Output()
	if err != nil {
		return fmt.Errorf("benchstat -format csv: %v", err)
	}
	if err := os.WriteFile(filepath.Join(o.out, "benchstat.csv"), csvOut, 0o644); err != nil {
		return err
	}
	cells, order, err := parseCSV(csvOut)
	if err != nil {
		return err
	}
	tables := buildTables(cells, order)
	if len(tables) == 0 {
		return fmt.Errorf("benchstat reported no benchmarks; see %s", rawPath)
	}

	m.command = commandLine(o)
	m.count = o.count
	blocks := map[string]string{
		"machine":  m.markdown(),
		"command":  "```sh\n" + m.command + "\n```\n",
		"tables":   renderTables(tables, o.count),
		"targets":  renderTargets(tables),
		"headline": renderHeadline(tables),
		"jointrap": renderJoinTrap(tables),
	}
	var all strings.Builder
	for _, k := range []string{"machine", "command", "headline", "targets", "tables", "jointrap"} {
		fmt.Fprintf(&all, "<!-- %s -->\n%s\n", k, blocks[k])
	}
	if err := os.WriteFile(filepath.Join(o.out, "tables.md"), []byte(all.String()), 0o644); err != nil {
		return err
	}
	fmt.Println()
	fmt.Println(blocks["headline"])
	fmt.Println(blocks["targets"])
	fmt.Println(blocks["tables"])
	if o.docs != "" && o.docs != "none" {
		for _, f := range strings.Split(o.docs, ",") {
			n, err := fillMarkers(strings.TrimSpace(f), blocks)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "updated %d block(s) in %s\n", n, f)
		}
	}
	fmt.Fprintf(os.Stderr, "raw samples: %s; benchstat: %s; tables: %s; %s of benchmarks\n",
		rawPath, filepath.Join(o.out, "benchstat.txt"), filepath.Join(o.out, "tables.md"), m.elapsed)
	return nil
}

func command(name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.Stdout = os.Stderr
	c.Stderr = os.Stderr
	return c
}

func findBenchstat(flagged string) (string, error) {
	if flagged != "" {
		return flagged, nil
	}
	if p, err := exec.LookPath("benchstat"); err == nil {
		return p, nil
	}
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(strings.TrimSpace(strings.Split(string(gopath), string(os.PathListSeparator))[0]), "bin", "benchstat")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("benchstat not found: go install golang.org/x/perf/cmd/benchstat@latest (run.sh does this)")
}

func commandLine(o options) string {
	var b strings.Builder
	b.WriteString("cd bench && ")
	var env []string
	if o.count != 6 {
		env = append(env, fmt.Sprintf("BENCH_COUNT=%d", o.count))
	}
	if o.benchtime != "50ms" {
		env = append(env, "BENCH_TIME="+o.benchtime)
	}
	if o.bench != "." {
		env = append(env, "BENCH_FILTER='"+o.bench+"'")
	}
	if o.cpu != "1,2" {
		env = append(env, "BENCH_CPU="+o.cpu)
	}
	if len(env) > 0 {
		b.WriteString(strings.Join(env, " ") + " ")
	}
	b.WriteString("./run.sh")
	return b.String()
}

// machine describes where and how the numbers were taken.
type machine struct {
	goVersion, cpuModel, kernel, load0, load1, benchstat, command string
	gomaxprocs, numCPU, count                                     int
	modules                                                       []string
	elapsed                                                       time.Duration
	date                                                          string
}

func machineInfo(benchstat string) machine {
	m := machine{gomaxprocs: runtime.GOMAXPROCS(0), numCPU: runtime.NumCPU(), date: time.Now().UTC().Format("2006-01-02")}
	if out, err := exec.Command("go", "version").Output(); err == nil {
		m.goVersion = strings.TrimSpace(string(out))
	}
	m.cpuModel = "unknown"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpuModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(data))
	}
	if out, err := exec.Command("go", "list", "-m", "golang.org/x/sync", "github.com/failsafe-go/failsafe-go",
		"github.com/alitto/pond/v2", "github.com/panjf2000/ants/v2").Output(); err == nil {
		m.modules = strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	m.benchstat = "benchstat"
	if out, err := exec.Command("go", "version", "-m", benchstat).Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && f[0] == "mod" {
				m.benchstat = "benchstat (" + f[1] + " " + f[2] + ")"
			}
		}
	}
	return m
}

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func (m machine) markdown() string {
	var b strings.Builder
	b.WriteString("| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| Go | `%s` |\n", m.goVersion)
	fmt.Fprintf(&b, "| GOMAXPROCS | %d by default (NumCPU %d); each table says which `-cpu` values ran |\n", m.gomaxprocs, m.numCPU)
	fmt.Fprintf(&b, "| CPU | %s |\n", m.cpuModel)
	fmt.Fprintf(&b, "| kernel | %s |\n", m.kernel)
	fmt.Fprintf(&b, "| load (1, 5, 15 min) | %s before, %s after |\n", m.load0, m.load1)
	fmt.Fprintf(&b, "| peers | %s |\n", strings.Join(wrapCode(m.modules), ", "))
	fmt.Fprintf(&b, "| statistics | %s, %d rounds, interleaved; %s of benchmarks; run on %s |\n", m.benchstat, m.count, m.elapsed, m.date)
	return b.String()
}

func wrapCode(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "`" + s + "`"
	}
	return out
}

// cell is benchstat's summary of one benchmark at one GOMAXPROCS in one unit.
type cell struct {
	center float64
	ci     string
}

type key struct {
	name string // full benchmark name without the -N suffix
	cpu  int
	unit string
}

var procsSuffix = regexp.MustCompile(`^(.*)-(\d+)$`)

// parseCSV reads `benchstat -format csv` output for a single input file:
// blocks of ",file," / ",unit,CI" / "name,value,CI" rows.
func parseCSV(data []byte) (map[key]cell, []string, error) {
	cells := map[key]cell{}
	var order []string
	seen := map[string]bool{}
	unit := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			unit = ""
			continue
		}
		rec, err := csv.NewReader(strings.NewReader(line)).Read()
		if err != nil || len(rec) < 2 {
			continue
		}
		if rec[0] == "" {
			if len(rec) >= 3 && rec[2] == "CI" {
				unit = rec[1]
			}
			continue
		}
		if unit == "" || rec[0] == "geomean" || rec[1] == "" {
			continue
		}
		v, err := strconv.ParseFloat(rec[1], 64)
		if err != nil {
			continue
		}
		name, cpu := rec[0], 1
		if m := procsSuffix.FindStringSubmatch(name); m != nil {
			name = m[1]
			cpu, _ = strconv.Atoi(m[2])
		}
		u := unit
		if u == "sec/op" {
			u, v = "ns/op", v*1e9
		} else if m, ok := strings.CutSuffix(u, "-sec/op"); ok {
			u, v = m+"-ns/op", v*1e9 // benchstat turns a metric in ns (cpu-ns/op) into seconds
		}
		ci := ""
		if len(rec) >= 3 {
			ci = rec[2]
		}
		cells[key{name, cpu, u}] = cell{v, ci}
		if !seen[name] {
			seen[name] = true
			order = append(order, name)
		}
	}
	return cells, order, sc.Err()
}

type row struct {
	name  string // with its kind prefix, e.g. ours_semaphore_Do
	kind  string // floor, base, ours, peer
	ns    map[int]cell
	other map[string]map[int]cell // B/op, allocs/op, custom metrics
}

type table struct {
	name  string // e.g. G1_Guard/serial
	cpus  []int
	units []string // non-time units in first-seen order
	rows  []*row
}

func (t *table) row(name string) *row {
	for _, r := range t.rows {
		if r.name == name {
			return r
		}
	}
	return nil
}

func (t *table) floor() *row {
	for _, r := range t.rows {
		if r.kind == "floor" {
			return r
		}
	}
	return nil
}

// bestPeer returns the fastest peer at cpu.
func (t *table) bestPeer(cpu int) *row {
	var best *row
	for _, r := range t.rows {
		c, ok := r.ns[cpu]
		if r.kind != "peer" || !ok {
			continue
		}
		if best == nil || c.center < best.ns[cpu].center {
			best = r
		}
	}
	return best
}

func buildTables(cells map[key]cell, order []string) []*table {
	byName := map[string]*table{}
	var tables []*table
	for _, full := range order {
		i := strings.LastIndex(full, "/")
		if i < 0 {
			continue
		}
		tname, rname := full[:i], full[i+1:]
		t := byName[tname]
		if t == nil {
			t = &table{name: tname}
			byName[tname] = t
			tables = append(tables, t)
		}
		r := t.row(rname)
		if r == nil {
			kind, _, _ := strings.Cut(rname, "_")
			r = &row{name: rname, kind: kind, ns: map[int]cell{}, other: map[string]map[int]cell{}}
			t.rows = append(t.rows, r)
		}
		for k, c := range cells {
			if k.name != full {
				continue
			}
			if !slices.Contains(t.cpus, k.cpu) {
				t.cpus = append(t.cpus, k.cpu)
			}
			if k.unit == "ns/op" {
				r.ns[k.cpu] = c
				continue
			}
			if r.other[k.unit] == nil {
				r.other[k.unit] = map[int]cell{}
			}
			r.other[k.unit][k.cpu] = c
			if !slices.Contains(t.units, k.unit) {
				t.units = append(t.units, k.unit)
			}
		}
	}
	for _, t := range tables {
		sort.Ints(t.cpus)
		// B/op and allocs/op last, custom metrics first, as in the notes.
		slices.SortStableFunc(t.units, func(a, b string) int { return unitRank(a) - unitRank(b) })
	}
	sort.SliceStable(tables, func(i, j int) bool { return groupNum(tables[i].name) < groupNum(tables[j].name) })
	return tables
}

func unitRank(u string) int {
	switch u {
	case "B/op":
		return 1
	case "allocs/op":
		return 2
	}
	return 0
}

func groupOf(table string) string {
	g, _, _ := strings.Cut(table, "/")
	return g
}

// groupNum is the number of a table's group (G10 after G9), or 0.
func groupNum(table string) int {
	g, _, _ := strings.Cut(strings.TrimPrefix(groupOf(table), "G"), "_")
	n, _ := strconv.Atoi(g)
	return n
}

var groupTitles = map[string]string{
	"G1_Guard":    "1. Guard a no-op call on the caller's goroutine (limit 2^20, never reached)",
	"G2_Reject":   "2. Rejection with the limit held (limit 8, all permits or workers busy)",
	"G3_Join":     "3. Submit one task (`return 42`) and wait for it (64 workers)",
	"G4_FanOut":   "4. Fan-out: 1,000 tasks, then wait for all (64 workers; ns/op is per batch of 1,000)",
	"G5_JoinTrap": "5. The join trap: the same body guarded on the caller vs submitted and waited for (limits 1024; parallel rows run 8 callers per P)",
	"G6_Burst":    "6. Burst: 10,000 parked callers released at once against a limit of 8, no wait, an admitted call sleeps 2 ms (ns/op is the wall time of one burst)",
	"G7_Configured": "7. The configured path: a bulkhead from the registry with the Prometheus collector registered (histograms on) and the status handler mounted; " +
		"the floor is the same bulkhead bare (semaphore `Do`, limit 2^20; pool `Submit`+`Wait`, 64 workers)",
	"G8_Line": "8. A line: 10,000 callers calling in a loop against a limit of 8, waiting as long as it takes; an admitted call spins 1 µs and yields " +
		"(cpu-ns/op is the CPU time of the whole process per call)",
	"G10_NewcomerFanOut": "10. The newcomer's fan-out (issue 20): 200 lookups of 2 ms on 8 workers and a queue of 50, lookup 37 failing " +
		"(ns/op is the wall time of the fan-out; worked/op the lookups that did their 2 ms, of which 38 is the floor)",
	"G9_HTTPHandler": "9. Server-side admission: one request through an http.Handler that writes \"ok\", into a new httptest.ResponseRecorder (limit 2^20, never reached)",
}

func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a < 10000 && v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a < 10000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a < 1e6:
		return sig3(v/1e3) + "k"
	case a < 1e9:
		return sig3(v/1e6) + "M"
	}
	return sig3(v/1e9) + "G"
}

func sig3(v float64) string {
	switch a := math.Abs(v); {
	case a < 10:
		return strings.TrimSuffix(strings.TrimRight(strconv.FormatFloat(v, 'f', 2, 64), "0"), ".")
	case a < 100:
		return strings.TrimSuffix(strings.TrimRight(strconv.FormatFloat(v, 'f', 1, 64), "0"), ".")
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

func fmtRatio(v float64) string {
	switch {
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64) + "×"
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64) + "×"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + "×"
}

func displayName(r *row) string {
	name := strings.TrimPrefix(r.name, r.kind+"_")
	switch r.kind {
	case "ours":
		return "**`" + name + "`**"
	case "floor":
		return "`" + name + "` (floor)"
	case "base":
		return "`" + name + "` (ref)"
	}
	return "`" + name + "`"
}

func ciText(c cell) string {
	if c.ci == "" || c.ci == "∞" {
		return "n/a"
	}
	return "±" + c.ci
}

// joined prints a per-cpu value once if it is the same at every cpu, else
// "a / b" in cpu order.
func joined(m map[int]cell, cpus []int) string {
	var vals []string
	for _, cpu := range cpus {
		c, ok := m[cpu]
		if !ok {
			continue
		}
		vals = append(vals, fmtNum(c.center))
	}
	if len(vals) == 0 {
		return "–"
	}
	same := true
	for _, v := range vals {
		same = same && v == vals[0]
	}
	if same {
		return vals[0]
	}
	return strings.Join(vals, " / ")
}

func renderTables(tables []*table, count int) string {
	var b strings.Builder
	group := ""
	for _, t := range tables {
		if g := groupOf(t.name); g != group {
			group = g
			title := groupTitles[g]
			if title == "" {
				title = g
			}
			fmt.Fprintf(&b, "\n### %s\n", title)
		}
		renderTable(&b, t, count)
	}
	return b.String()
}

func renderTable(b *strings.Builder, t *table, count int) {
	floor := t.floor()
	fmt.Fprintf(b, "\n*%s*\n\n| approach |", t.name)
	sep := "|---|"
	for _, cpu := range t.cpus {
		fmt.Fprintf(b, " ns/op @%d | ± @%d | × floor @%d | × best peer @%d |", cpu, cpu, cpu, cpu)
		sep += "---|---|---|---|"
	}
	for _, u := range t.units {
		fmt.Fprintf(b, " %s |", u)
		sep += "---|"
	}
	b.WriteString("\n" + sep + "\n")
	for _, r := range t.rows {
		fmt.Fprintf(b, "| %s |", displayName(r))
		for _, cpu := range t.cpus {
			c, ok := r.ns[cpu]
			if !ok {
				b.WriteString(" – | – | – | – |")
				continue
			}
			fmt.Fprintf(b, " %s | %s | %s | %s |", fmtNum(c.center), ciText(c), ratioTo(c, floor, cpu), ratioTo(c, t.bestPeer(cpu), cpu))
		}
		for _, u := range t.units {
			fmt.Fprintf(b, " %s |", joined(r.other[u], t.cpus))
		}
		b.WriteString("\n")
	}
	var notes []string
	if floor != nil {
		notes = append(notes, "floor = `"+strings.TrimPrefix(floor.name, "floor_")+"`")
	}
	for _, cpu := range t.cpus {
		if p := t.bestPeer(cpu); p != nil {
			notes = append(notes, fmt.Sprintf("best peer @%d = `%s`", cpu, strings.TrimPrefix(p.name, "peer_")))
		}
	}
	fmt.Fprintf(b, "\n<sub>median of %d rounds; ± = benchstat 95%% CI (n/a under 6 rounds); %s; where B/op, allocs/op or a metric differ by cpu: @%s</sub>\n",
		count, strings.Join(notes, "; "), strings.Trim(strings.ReplaceAll(fmt.Sprint(t.cpus), " ", " / @"), "[]"))
}

func ratioTo(c cell, ref *row, cpu int) string {
	if ref == nil {
		return "–"
	}
	rc, ok := ref.ns[cpu]
	if !ok || rc.center == 0 {
		return "–"
	}
	return fmtRatio(c.center / rc.center)
}

// lookup finds a row and its median at cpu.
func lookup(tables []*table, tname, rname string) (*table, *row) {
	for _, t := range tables {
		if t.name == tname {
			return t, t.row(rname)
		}
	}
	return nil, nil
}

func renderHeadline(tables []*table) string {
	items := []struct{ what, table, row string }{
		{"guard a call (semaphore `Do`), 1 caller", "G1_Guard/serial", "ours_semaphore_Do"},
		{"guard a call (semaphore `Do`), all Ps calling", "G1_Guard/parallel", "ours_semaphore_Do"},
		{"reject when full (semaphore `Do`)", "G2_Reject/serial", "ours_semaphore_Do"},
		{"reject when full (pool `Submit`)", "G2_Reject/serial", "ours_pool_Submit"},
		{"submit one task and wait (pool)", "G3_Join/serial", "ours_pool_Submit_Wait"},
		{"fan out 1,000 tasks, wait for all (pool)", "G4_FanOut/serial", "ours_pool_Submit_All"},
	}
	var b strings.Builder
	b.WriteString("| what | cpu | ours ns/op | allocs/op | floor | best peer | × floor | × best peer |\n|---|---|---|---|---|---|---|---|\n")
	for _, it := range items {
		t, r := lookup(tables, it.table, it.row)
		if r == nil {
			continue
		}
		cpu := t.cpus[len(t.cpus)-1]
		if slices.Contains(t.cpus, runtime.GOMAXPROCS(0)) {
			cpu = runtime.GOMAXPROCS(0)
		}
		c, ok := r.ns[cpu]
		if !ok {
			continue
		}
		floor, peer := t.floor(), t.bestPeer(cpu)
		fn, pn := "–", "–"
		if floor != nil {
			fn = fmt.Sprintf("`%s` %s", strings.TrimPrefix(floor.name, "floor_"), fmtNum(floor.ns[cpu].center))
		}
		if peer != nil {
			pn = fmt.Sprintf("`%s` %s", strings.TrimPrefix(peer.name, "peer_"), fmtNum(peer.ns[cpu].center))
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", it.what, cpu, fmtNum(c.center),
			joined(r.other["allocs/op"], []int{cpu}), fn, pn, ratioTo(c, floor, cpu), ratioTo(c, peer, cpu))
	}
	return b.String()
}

func renderJoinTrap(tables []*table) string {
	var b strings.Builder
	b.WriteString("| body | callers | GOMAXPROCS | semaphore `Do` ns/op | pool `Submit`+`Wait` ns/op | pool ÷ semaphore | pool − semaphore |\n|---|---|---|---|---|---|---|\n")
	n := 0
	for _, t := range tables {
		if groupOf(t.name) != "G5_JoinTrap" {
			continue
		}
		sem, pool := t.row("ours_semaphore_Do"), t.row("ours_pool_Submit_Wait")
		if sem == nil || pool == nil {
			continue
		}
		parts := strings.Split(t.name, "/")
		body, mode := parts[1], parts[2]
		for _, cpu := range t.cpus {
			s, ok1 := sem.ns[cpu]
			p, ok2 := pool.ns[cpu]
			if !ok1 || !ok2 {
				continue
			}
			callers := "1"
			if mode == "parallel" {
				callers = fmt.Sprint(8 * cpu)
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s |\n", body, callers, cpu, fmtNum(s.center), fmtNum(p.center),
				fmtRatio(p.center/s.center), fmtNum(p.center-s.center))
			n++
		}
	}
	if n == 0 {
		return "_Not measured: the last run had no group 5 rows for both `ours_semaphore_Do` and `ours_pool_Submit_Wait`._\n"
	}
	return b.String()
}

// A target from the issue, checked against the tables.
type target struct {
	what  string
	table string // a table name, or a prefix ending in "/" for serial and parallel
	row   string
	check func(t *table, r *row, cpu int) (measured string, ok bool, known bool)
}

func ratioBelow(ref string, max float64) func(*table, *row, int) (string, bool, bool) {
	return func(t *table, r *row, cpu int) (string, bool, bool) {
		var rr *row
		if ref == "floor" {
			rr = t.floor()
		} else {
			rr = t.row(ref)
		}
		if rr == nil {
			return "", false, false
		}
		a, ok1 := r.ns[cpu]
		c, ok2 := rr.ns[cpu]
		if !ok1 || !ok2 || c.center == 0 {
			return "", false, false
		}
		q := a.center / c.center
		return fmtRatio(q), q <= max, true
	}
}

func fasterThan(refs ...string) func(*table, *row, int) (string, bool, bool) {
	return func(t *table, r *row, cpu int) (string, bool, bool) {
		a, ok := r.ns[cpu]
		if !ok {
			return "", false, false
		}
		worst, worstName, known := 0.0, "", false
		for _, ref := range refs {
			rr := t.row(ref)
			if rr == nil {
				continue
			}
			c, ok := rr.ns[cpu]
			if !ok || c.center == 0 {
				continue
			}
			known = true
			if q := a.center / c.center; q > worst {
				worst, worstName = q, strings.TrimPrefix(ref, "peer_")
			}
		}
		if !known {
			return "", false, false
		}
		return fmt.Sprintf("%s of `%s`", fmtRatio(worst), worstName), worst < 1, true
	}
}

func metricAtMost(unit string, max float64) func(*table, *row, int) (string, bool, bool) {
	return func(t *table, r *row, cpu int) (string, bool, bool) {
		c, ok := r.other[unit][cpu]
		if !ok {
			return "", false, false
		}
		return fmtNum(c.center), c.center <= max, true
	}
}

// targets are the issues' targets: issue 12 (the second performance round)
// first, then those of issue 5 that it did not replace.
var targets = []target{
	{"#12 semaphore `Do`, permit granted: ≤ 1.2× the CAS floor", "G1_Guard/serial", "ours_semaphore_Do", ratioBelow("floor", 1.2)},
	{"#12 semaphore `Do`: 0 allocs", "G1_Guard/", "ours_semaphore_Do", metricAtMost("allocs/op", 0)},
	{"#12 semaphore `Do` ahead of x/sync `Weighted` (`TryAcquire`+`Release`, `Acquire`+`Release`)", "G1_Guard/", "ours_semaphore_Do",
		fasterThan("peer_xsync_TryAcquire", "peer_xsync_Acquire")},
	{"#12 semaphore rejection (`Do`): ≤ 0.85× the add-then-undo floor", "G2_Reject/", "ours_semaphore_Do", ratioBelow("base_atomicAdd", 0.85)},
	{"#12 semaphore rejection (`Do`): 0 allocs", "G2_Reject/", "ours_semaphore_Do", metricAtMost("allocs/op", 0)},
	{"#12 a blocked `Acquire` (semaphore `Do` in a line of 10,000): ≤ 2 allocs", "G8_Line", "ours_semaphore_Do", metricAtMost("allocs/op", 2)},
	{"#12 10,000 waiters: CPU per call no worse than x/sync `Acquire`", "G8_Line", "ours_semaphore_Do", metricRatioBelow("cpu-ns/op", "peer_xsync_Acquire", 1)},
	{"#12 configured path: semaphore `Do` within 3× the bare `Do`", "G7_Configured/semaphore/", "ours_Do_registry", ratioBelow("floor", 3)},
	{"#12 pool `Submit`+`Wait` ≤ 1.2× raw ants `Submit` + channel", "G3_Join/", "ours_pool_Submit_Wait", ratioBelow("peer_ants_Submit_chan", 1.2)},
	{"#12 pool `Submit`+`Wait` ahead of errgroup `SetLimit` (and pond, failsafe `GetAsync`)", "G3_Join/", "ours_pool_Submit_Wait",
		fasterThan("peer_errgroup_SetLimit", "peer_pond_Submit_Wait", "peer_failsafe_GetAsync")},
	{"#12 fan-out of 1,000 at GOMAXPROCS=2: ≤ 0.7× errgroup `SetLimit(64)`", "G4_FanOut/", "ours_pool_Submit_All", atCPU(2, ratioBelow("peer_errgroup_SetLimit", 0.7))},
	{"#5 semaphore `Do` ahead of a channel semaphore and failsafe `TryAcquirePermit`", "G1_Guard/", "ours_semaphore_Do",
		fasterThan("peer_chan", "peer_failsafe_TryAcquirePermit")},
	{"#5 semaphore `Do` ≥ 10× faster than `failsafe.Get` with a bulkhead", "G1_Guard/", "ours_semaphore_Do", ratioBelow("peer_failsafe_Get", 0.1)},
	{"#5 semaphore rejection (`TryAcquire`): 0 allocs", "G2_Reject/", "ours_semaphore_TryAcquire", metricAtMost("allocs/op", 0)},
	{"#5 semaphore rejection (`TryAcquire`) no slower than add-then-undo", "G2_Reject/", "ours_semaphore_TryAcquire", ratioBelow("base_atomicAdd", 1)},
	{"#5 semaphore rejection ahead of peers that count or report rejections (failsafe executor, pond)", "G2_Reject/", "ours_semaphore_Do",
		fasterThan("peer_failsafe_Get", "peer_pond_TrySubmit")},
	{"#5 pool rejection: 0 allocs", "G2_Reject/", "ours_pool_Submit", metricAtMost("allocs/op", 0)},
	{"#5 pool `Submit`+`Wait`: ≤ 3 allocs", "G3_Join/", "ours_pool_Submit_Wait", metricAtMost("allocs/op", 3)},
	{"#5 fan-out of 1,000 at or below raw ants blocking submit", "G4_FanOut/", "ours_pool_Submit_All", ratioBelow("peer_ants_Submit_blocking", 1)},
	{"#5 burst: the semaphore spawns no goroutine", "G6_Burst", "ours_semaphore_Do", metricAtMost("spawned-G/op", 0)},
	{"#5 burst: the pool spawns none per rejected call (at most its 8 workers)", "G6_Burst", "ours_pool_Submit_Wait", metricAtMost("spawned-G/op", 8)},
	{"#20 `pool.Group` fan-out of 1,000 no slower than errgroup `SetLimit(64)`", "G4_FanOut/", "ours_pool_Group", ratioBelow("peer_errgroup_SetLimit", 1)},
	{"#20 `pool.Group` fan-out of 1,000: ≤ 2 allocs per task", "G4_FanOut/", "ours_pool_Group", metricAtMost("allocs/op", 2*1000)},
	// In real time lookups 38 and 39 end in the same instant as 37, and count or not by a hair on
	// either side; TestNewcomerFanOut (virtual time) checks the exact count.
	{"#20 the newcomer's fan-out: lookups that did the work no more than errgroup's (within 1: 38 and 39 end with 37)", "G10_NewcomerFanOut", "ours_pool_Group",
		metricRatioBelow("worked/op", "peer_errgroup_SetLimit", 41.0/40)},
}

// metricRatioBelow checks a custom metric of the row against the same
// metric of row ref.
func metricRatioBelow(unit, ref string, max float64) func(*table, *row, int) (string, bool, bool) {
	return func(t *table, r *row, cpu int) (string, bool, bool) {
		rr := t.row(ref)
		if rr == nil {
			return "", false, false
		}
		a, ok1 := r.other[unit][cpu]
		c, ok2 := rr.other[unit][cpu]
		if !ok1 || !ok2 || c.center == 0 {
			return "", false, false
		}
		q := a.center / c.center
		return fmt.Sprintf("%s (%s vs %s)", fmtRatio(q), fmtNum(a.center), fmtNum(c.center)), q <= max, true
	}
}

// atCPU applies check only at GOMAXPROCS cpu.
func atCPU(cpu int, check func(*table, *row, int) (string, bool, bool)) func(*table, *row, int) (string, bool, bool) {
	return func(t *table, r *row, c int) (string, bool, bool) {
		if c != cpu {
			return "", false, false
		}
		return check(t, r, c)
	}
}

func renderTargets(tables []*table) string {
	var b strings.Builder
	b.WriteString("| target (issue) | table | measured | met |\n|---|---|---|---|\n")
	for _, tg := range targets {
		var matched []*table
		for _, t := range tables {
			if t.name == tg.table || (strings.HasSuffix(tg.table, "/") && strings.HasPrefix(t.name, tg.table)) {
				matched = append(matched, t)
			}
		}
		measuredAny := false
		for _, t := range matched {
			r := t.row(tg.row)
			if r == nil {
				continue
			}
			var parts []string
			all, known := true, false
			for _, cpu := range t.cpus {
				m, ok, k := tg.check(t, r, cpu)
				if !k {
					continue
				}
				known = true
				all = all && ok
				parts = append(parts, fmt.Sprintf("@%d %s", cpu, m))
			}
			if !known {
				continue
			}
			measuredAny = true
			verdict := "yes"
			if !all {
				verdict = "**NO**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", tg.what, t.name, strings.Join(parts, "; "), verdict)
		}
		if !measuredAny {
			fmt.Fprintf(&b, "| %s | %s | not measured | – |\n", tg.what, strings.TrimSuffix(tg.table, "/"))
		}
	}
	return b.String()
}

var markerRE = regexp.MustCompile(`(?s)(<!-- bench:begin ([a-z]+) -->\n).*?(<!-- bench:end ([a-z]+) -->)`)

// fillMarkers replaces the content of every marker block in path whose name
// is in blocks, and reports how many it replaced.
func fillMarkers(path string, blocks map[string]string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n := 0
	var bad error
	out := markerRE.ReplaceAllFunc(data, func(m []byte) []byte {
		sub := markerRE.FindSubmatch(m)
		name, end := string(sub[2]), string(sub[4])
		if name != end {
			bad = fmt.Errorf("%s: marker bench:begin %s is closed by bench:end %s", path, name, end)
			return m
		}
		content, ok := blocks[name]
		if !ok {
			return m
		}
		n++
		return append(append(append([]byte{}, sub[1]...), content...), sub[3]...)
	})
	if bad != nil {
		return 0, bad
	}
	if n == 0 {
		return 0, nil
	}
	return n, writeFileAtomic(path, out)
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
