package bench

// pool.Group (issue 20) beside errgroup: the fan-out of group 4, and the
// newcomer's program of issue 20 (group 10): 200 lookups of 2 ms on 8
// workers, lookup 37 failing.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bulkhead-go/bulkhead/future"
	"github.com/bulkhead-go/bulkhead/pool"
)

func init() {
	fanOutCases = append(fanOutCases,
		opCase{oursKind, "pool_Group", func(b *testing.B) func() {
			// The group's default limit is the pool's 64 workers, as
			// errgroup_SetLimit's 64.
			p := newPool(b, joinWorkers, fanOut*runtime.GOMAXPROCS(0))
			return func() {
				g := pool.NewGroup[int](bg, p)
				for range fanOut {
					g.Go(answer)
				}
				res, _ := g.Wait()
				sink.Store(int64(res[fanOut-1]))
			}
		}},
		opCase{oursKind, "pool_Group_NoLimit", func(b *testing.B) func() {
			// The same without the group's limit (SetLimit(-1)): the tasks
			// wait in the pool's queue, not in Go, and a worker starts the
			// next one in the same frame. What the default limit costs is
			// this row's difference to pool_Group (docs/pool.md "Cost").
			p := newPool(b, joinWorkers, fanOut*runtime.GOMAXPROCS(0))
			return func() {
				g := pool.NewGroup[int](bg, p)
				g.SetLimit(-1)
				for range fanOut {
					g.Go(answer)
				}
				res, _ := g.Wait()
				sink.Store(int64(res[fanOut-1]))
			}
		}},
	)
}

const (
	newcomerLookups = 200
	newcomerWorkers = 8
	newcomerQueue   = 50
	newcomerFails   = 37
	newcomerLatency = 2 * time.Millisecond
)

var errNotFound = errors.New("not found")

// newcomerStock is the newcomer's lookup: 2 ms of work unless its context
// ends first; sku 37 is not found. worked counts the lookups that did the
// work.
func newcomerStock(worked *atomic.Int64) func(context.Context, int) (int, error) {
	return func(ctx context.Context, sku int) (int, error) {
		t := time.NewTimer(newcomerLatency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		worked.Add(1)
		if sku == newcomerFails {
			return 0, fmt.Errorf("sku %d: %w", sku, errNotFound)
		}
		return sku, nil
	}
}

// The fan-out parts (between the markers) are what TestNewcomerFanOut
// counts: from the first statement of the fan-out to the report of the
// failed lookup, as in the newcomer's notes.

func groupFanOut(ctx context.Context, lookups *pool.Bulkhead, skus []int,
	stock func(context.Context, int) (int, error), report func(int, error)) []int {
	// fan-out begin
	g := pool.NewGroup[int](ctx, lookups)
	for _, sku := range skus {
		g.Go(func(ctx context.Context) (int, error) { return stock(ctx, sku) })
	}
	counts, err := g.Wait()
	if te, ok := errors.AsType[*future.TaskError](err); ok {
		report(te.Index, te.Err)
	}
	// fan-out end
	return counts
}

// indexedError is what errgroup needs to name the failed lookup.
type indexedError struct {
	i   int
	err error
}

func (e *indexedError) Error() string { return fmt.Sprintf("lookup %d: %v", e.i, e.err) }
func (e *indexedError) Unwrap() error { return e.err }

func errgroupFanOut(ctx context.Context, skus []int,
	stock func(context.Context, int) (int, error), report func(int, error)) []int {
	// fan-out begin
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(newcomerWorkers)
	counts := make([]int, len(skus))
	for i, sku := range skus {
		g.Go(func() error {
			n, err := stock(ctx, sku)
			if err != nil {
				return &indexedError{i, err}
			}
			counts[i] = n
			return nil
		})
	}
	err := g.Wait()
	if ie, ok := errors.AsType[*indexedError](err); ok {
		report(ie.i, ie.err)
	}
	// fan-out end
	return counts
}

// submitWaitFanOut is the fan-out docs/pool.md showed before Group: a
// pool.Go loop, then future.All.
func submitWaitFanOut(ctx context.Context, lookups *pool.Bulkhead, skus []int,
	stock func(context.Context, int) (int, error), report func(int, error)) []int {
	// fan-out begin
	var fs []*future.Future[int]
	for _, sku := range skus {
		f, err := pool.Go(ctx, lookups, func(ctx context.Context) (int, error) { return stock(ctx, sku) })
		if err != nil {
			report(len(fs), err)
			return nil
		}
		fs = append(fs, f)
	}
	counts, err := future.All(ctx, fs...)
	if te, ok := errors.AsType[*future.TaskError](err); ok {
		report(te.Index, te.Err)
	}
	// fan-out end
	return counts
}

// newcomerCase is one version of the newcomer's program; run returns how
// many lookups did the work and which one was reported failed.
type newcomerCase struct {
	kind kind
	name string
	run  func(lookups *pool.Bulkhead) (worked int64, failed int)
}

func newcomerSkus() []int {
	skus := make([]int, newcomerLookups)
	for i := range skus {
		skus[i] = i
	}
	return skus
}

var newcomerCases = []newcomerCase{
	{oursKind, "pool_Group", func(lookups *pool.Bulkhead) (int64, int) {
		var worked atomic.Int64
		failed := -1
		groupFanOut(bg, lookups, newcomerSkus(), newcomerStock(&worked), func(i int, _ error) { failed = i })
		return worked.Load(), failed
	}},
	{baseKind, "pool_Go_All", func(lookups *pool.Bulkhead) (int64, int) {
		var worked atomic.Int64
		failed := -1
		submitWaitFanOut(bg, lookups, newcomerSkus(), newcomerStock(&worked), func(i int, _ error) { failed = i })
		return worked.Load(), failed
	}},
	{peerKind, "errgroup_SetLimit", func(*pool.Bulkhead) (int64, int) {
		var worked atomic.Int64
		failed := -1
		errgroupFanOut(bg, newcomerSkus(), newcomerStock(&worked), func(i int, _ error) { failed = i })
		return worked.Load(), failed
	}},
}

func newcomerPool(tb testing.TB) *pool.Bulkhead {
	p, err := pool.New("lookups", pool.Config{MaxWorkers: newcomerWorkers, QueueCapacity: newcomerQueue})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// BenchmarkG10_NewcomerFanOut runs the newcomer's program of issue 20 in
// real time: ns/op is the wall time of the fan-out, worked/op the lookups
// that did their 2 ms of work (of 200; 38 is the floor: lookups 0 to 37).
func BenchmarkG10_NewcomerFanOut(b *testing.B) {
	for _, c := range byKind(newcomerCases, func(c newcomerCase) kind { return c.kind }) {
		b.Run(kindPrefix[c.kind]+c.name, func(b *testing.B) {
			lookups := newcomerPool(b)
			b.Cleanup(func() { _ = lookups.Close(bg) })
			b.ReportAllocs()
			var worked int64
			for b.Loop() {
				w, failed := c.run(lookups)
				if failed != newcomerFails {
					b.Fatalf("lookup %d reported failed, want %d", failed, newcomerFails)
				}
				worked += w
			}
			b.ReportMetric(float64(worked)/float64(b.N), "worked/op")
		})
	}
}

// TestNewcomerFanOut runs the newcomer's program with every version in
// synctest's virtual time, where the schedule is exact: the Group's lookups
// that do the work after the failure are no more than errgroup's, and its
// fan-out part takes at most 8 lines (issue 20).
func TestNewcomerFanOut(t *testing.T) {
	worked := map[string]int64{}
	for _, c := range newcomerCases {
		synctest.Test(t, func(t *testing.T) {
			lookups := newcomerPool(t)
			w, failed := c.run(lookups)
			if failed != newcomerFails {
				t.Errorf("%s: lookup %d reported failed, want %d", c.name, failed, newcomerFails)
			}
			worked[c.name] = w
			if err := lookups.Close(bg); err != nil {
				t.Fatal(err)
			}
		})
	}
	lines := map[string]int{}
	for _, fn := range []string{"groupFanOut", "errgroupFanOut", "submitWaitFanOut"} {
		lines[fn] = fanOutLines(t, "group_test.go", fn)
	}
	t.Logf("lookups that did the work (of %d): Group %d, errgroup %d, pool.Go+All %d; fan-out lines: %d, %d, %d",
		newcomerLookups, worked["pool_Group"], worked["errgroup_SetLimit"], worked["pool_Go_All"],
		lines["groupFanOut"], lines["errgroupFanOut"], lines["submitWaitFanOut"])
	if worked["pool_Group"] > worked["errgroup_SetLimit"] {
		t.Errorf("the Group's lookups did %d works, errgroup's %d", worked["pool_Group"], worked["errgroup_SetLimit"])
	}
	if lines["groupFanOut"] > 8 {
		t.Errorf("the Group's fan-out takes %d lines, want at most 8", lines["groupFanOut"])
	}
}

// fanOutLines counts the non-blank, non-comment lines between the fan-out
// markers of function fn in file.
func fanOutLines(t *testing.T, file, fn string) int {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, inFn, in := 0, false, false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "func "+fn+"("):
			inFn = true
		case inFn && line == "// fan-out begin":
			in = true
		case in && line == "// fan-out end":
			return n
		case in && line != "" && !strings.HasPrefix(line, "//"):
			n++
		}
	}
	t.Fatalf("%s: no fan-out markers in %s", file, fn)
	return 0
}
