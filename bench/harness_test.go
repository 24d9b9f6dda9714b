package bench

import (
	"context"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The limits each group uses. They are shared by every approach so that the
// rows of a table do the same work.
const (
	bigLimit     = 1 << 20 // group 1: a limit never reached
	heldLimit    = 8       // groups 2 and 6: the limit that is full
	joinWorkers  = 64      // groups 3 and 4: workers of every pool
	trapLimit    = 1024    // group 5: nothing is ever rejected
	fanOut       = 1000    // group 4: tasks per batch
	burstCallers = 10000   // group 6: callers released together
	spinFor      = 50 * time.Microsecond
	// burstBody is the dependency's latency in the burst. It sleeps so that
	// admitted callers park as they would on I/O and the rest of the burst
	// meets a full limit; 2 ms is well above the runtime's ~1 ms timer
	// resolution, so the sleep is on time for every approach.
	burstBody = 2 * time.Millisecond
)

// kind says what a row is; the runner reads it from the name prefix.
type kind int

const (
	floorKind kind = iota // the reference floor of a table (exactly one)
	baseKind              // another reference point, not a competitor
	oursKind              // this library
	peerKind              // another library or a common idiom
)

var kindPrefix = [...]string{"floor_", "base_", "ours_", "peer_"}

// opCase is one approach in groups 1 to 4: setup builds what the approach
// needs (and registers its cleanup with b.Cleanup) and returns one operation,
// safe for concurrent use.
type opCase struct {
	kind  kind
	name  string
	setup func(b *testing.B) func()
}

// trapCase is one approach in group 5: the operation runs body once, guarded
// on the caller's goroutine or handed off and waited for.
type trapCase struct {
	kind  kind
	name  string
	setup func(b *testing.B, body func()) func()
}

// burstCase is one approach in group 6: call is made once by each of the
// burst's callers, runs body if admitted, and reports whether it was.
type burstCase struct {
	kind  kind
	name  string
	setup func(b *testing.B, body func()) (call func() bool)
}

// Each family file appends its approaches to these in an init function, so a
// family that does not build can be left out without touching the others.
var (
	guardCases  []opCase    // group 1: guard a no-op, limit never reached
	rejectCases []opCase    // group 2: rejection, limit held
	joinCases   []opCase    // group 3: submit one task and wait
	fanOutCases []opCase    // group 4: 1,000 tasks, then wait for all
	trapCases   []trapCase  // group 5: the join trap
	burstCases  []burstCase // group 6: 10,000 callers against a limit of 8
)

func byKind[C any](cases []C, k func(C) kind) []C {
	out := slices.Clone(cases)
	slices.SortStableFunc(out, func(a, b C) int { return int(k(a)) - int(k(b)) })
	return out
}

var bg = context.Background()

// sink keeps results alive so the compiler cannot drop the work.
var sink atomic.Int64

//go:noinline
func noop(context.Context) error { return nil }

//go:noinline
func answer(context.Context) (int, error) { return 42, nil }

// spin busy-waits for d on the CPU. The join trap and the burst use it
// instead of time.Sleep: a sub-millisecond sleep measures the runtime's
// timer resolution on Linux (about 1 ms when idle), not the library.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

func spinBody() { spin(spinFor) }

func noopBody() {}

// runOps runs each case serially and under b.RunParallel. parallelism > 0
// sets b.SetParallelism.
func runOps(b *testing.B, cases []opCase, parallelism int) {
	cases = byKind(cases, func(c opCase) kind { return c.kind })
	b.Run("serial", func(b *testing.B) {
		for _, c := range cases {
			b.Run(kindPrefix[c.kind]+c.name, func(b *testing.B) {
				op := c.setup(b)
				b.ReportAllocs()
				for b.Loop() {
					op()
				}
			})
		}
	})
	b.Run("parallel", func(b *testing.B) {
		for _, c := range cases {
			b.Run(kindPrefix[c.kind]+c.name, func(b *testing.B) {
				op := c.setup(b)
				if parallelism > 0 {
					b.SetParallelism(parallelism)
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						op()
					}
				})
			})
		}
	})
}

// BenchmarkG1_Guard guards a no-op call on the caller's goroutine with a
// limit that is never reached.
func BenchmarkG1_Guard(b *testing.B) { runOps(b, guardCases, 0) }

// BenchmarkG2_Reject measures a rejection while all 8 permits or workers are
// held.
func BenchmarkG2_Reject(b *testing.B) { runOps(b, rejectCases, 0) }

// BenchmarkG3_Join submits one task (return 42) and waits for its result.
func BenchmarkG3_Join(b *testing.B) { runOps(b, joinCases, 0) }

// BenchmarkG4_FanOut submits 1,000 tasks, then waits for all of them; ns/op
// is per batch.
func BenchmarkG4_FanOut(b *testing.B) { runOps(b, fanOutCases, 0) }

// BenchmarkG5_JoinTrap runs the same body guarded on the caller and
// submitted-then-waited, for a no-op body and a 50µs CPU spin. Parallel rows
// run 8 callers per P, so nothing waits for a worker only because callers
// outnumber Ps.
func BenchmarkG5_JoinTrap(b *testing.B) {
	cases := byKind(trapCases, func(c trapCase) kind { return c.kind })
	bodies := []struct {
		name string
		fn   func()
	}{{"noop", noopBody}, {"spin50us", spinBody}}
	for _, body := range bodies {
		ops := make([]opCase, len(cases))
		for i, c := range cases {
			ops[i] = opCase{c.kind, c.name, func(b *testing.B) func() { return c.setup(b, body.fn) }}
		}
		b.Run(body.name, func(b *testing.B) { runOps(b, ops, 8) })
	}
}

// BenchmarkG6_Burst releases 10,000 parked callers at once against a limit of
// 8 with no wait; an admitted call sleeps 2 ms, like a slow dependency. ns/op is the wall time of one burst, from the release to the
// last caller's return. spawned-G/op counts the goroutines created during the
// burst (the callers exist before it starts), admitted/op the calls that ran
// the body.
func BenchmarkG6_Burst(b *testing.B) {
	for _, c := range byKind(burstCases, func(c burstCase) kind { return c.kind }) {
		b.Run(kindPrefix[c.kind]+c.name, func(b *testing.B) {
			call := c.setup(b, func() { time.Sleep(burstBody) })
			b.ReportAllocs()
			var spawned, admitted uint64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				start := make(chan struct{})
				var ready, done sync.WaitGroup
				var ok atomic.Uint64
				ready.Add(burstCallers)
				done.Add(burstCallers)
				for range burstCallers {
					go func() {
						ready.Done()
						<-start
						if call() {
							ok.Add(1)
						}
						done.Done()
					}()
				}
				ready.Wait()
				runtime.Gosched()
				before := goroutinesCreated()
				b.StartTimer()
				close(start)
				done.Wait()
				b.StopTimer()
				spawned += goroutinesCreated() - before
				admitted += ok.Load()
				b.StartTimer()
			}
			b.ReportMetric(float64(spawned)/float64(b.N), "spawned-G/op")
			b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
		})
	}
}

var createdSample = []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}

// goroutinesCreated returns how many goroutines the process has created.
func goroutinesCreated() uint64 {
	metrics.Read(createdSample)
	if createdSample[0].Value.Kind() != metrics.KindUint64 {
		panic("runtime/metrics: /sched/goroutines-created:goroutines is not supported by this Go version")
	}
	return createdSample[0].Value.Uint64()
}

// occupy submits n tasks with submit, each blocking until the benchmark's
// cleanup, and returns once all n are running. Register the pool's own
// cleanup before calling it: cleanups run last in, first out.
func occupy(b *testing.B, n int, submit func(task func())) {
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(n)
	for range n {
		submit(func() {
			running.Done()
			<-release
		})
	}
	running.Wait()
	b.Cleanup(func() { close(release) })
}
