package bench

// Group 8: many callers waiting in line for a few permits.

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	ours "github.com/bulkhead-go/bulkhead/semaphore"
)

const (
	lineCallers = 10000            // group 8: callers, all waiting for a permit
	lineBody    = time.Microsecond // group 8: what an admitted call does (a spin)
)

// lineCase is one approach in group 8: call waits for a permit (as long as
// it takes), runs body, and gives the permit back.
type lineCase struct {
	kind  kind
	name  string
	setup func(b *testing.B, body func()) (call func())
}

var lineCases = []lineCase{
	{floorKind, "chan", func(_ *testing.B, body func()) func() {
		s := make(chan struct{}, heldLimit)
		return func() {
			s <- struct{}{}
			body()
			<-s
		}
	}},
	{peerKind, "xsync_Acquire", func(_ *testing.B, body func()) func() {
		w := semaphore.NewWeighted(heldLimit)
		return func() {
			if w.Acquire(bg, 1) == nil {
				body()
				w.Release(1)
			}
		}
	}},
	{oursKind, "semaphore_Do", func(b *testing.B, body func()) func() {
		s, err := ours.New("bench", ours.Config{MaxConcurrentCalls: heldLimit, MaxWaitDuration: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		fn := func(context.Context) error { body(); return nil }
		return func() {
			if err := s.Do(bg, fn); err != nil {
				panic(err)
			}
		}
	}},
}

// BenchmarkG8_Line runs 10,000 callers, each calling in a loop, against a
// limit of 8 with waiting allowed (a minute for us); an admitted call spins
// 1µs and yields, so that the others queue up even at GOMAXPROCS=1. The
// first 10,000 calls fill the line; the b.N calls that complete after them
// are timed, while the line stays full: ns/op is wall time per call,
// cpu-ns/op the CPU time of the whole process per call (user + system),
// which is what waiting costs.
func BenchmarkG8_Line(b *testing.B) {
	for _, c := range byKind(lineCases, func(c lineCase) kind { return c.kind }) {
		b.Run(kindPrefix[c.kind]+c.name, func(b *testing.B) {
			call := c.setup(b, func() {
				spin(lineBody)
				runtime.Gosched()
			})
			b.ReportAllocs()
			b.StopTimer()
			runtime.GC() // start every row from the same heap, whatever ran before
			const warm = lineCallers
			calls := int64(warm + b.N + lineCallers) // the line is still full when the b.N-th timed call completes
			var made, finished atomic.Int64
			warmed, measured := make(chan struct{}), make(chan struct{})
			var done sync.WaitGroup
			for range lineCallers {
				done.Go(func() {
					for made.Add(1) <= calls {
						call()
						switch finished.Add(1) {
						case warm:
							close(warmed)
						case warm + int64(b.N):
							close(measured)
						}
					}
				})
			}
			<-warmed
			cpu0 := cpuTime()
			b.StartTimer()
			<-measured
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			done.Wait()
		})
	}
}

// cpuTime returns the CPU time the process has used, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
