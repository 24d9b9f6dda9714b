package semaphore

import (
	"sync"
	"testing"
)

// The finished count keeps its low 21 bits in the state word and carries
// into finishedHigh. Start just below a wrap, run calls on two goroutines
// while a third reads Stats: the counters never go backwards and end exact.
func TestFinishedCountSurvivesWrap(t *testing.T) {
	b, err := New("wrap", Config{MaxConcurrentCalls: 4})
	if err != nil {
		t.Fatal(err)
	}
	const before = 3<<fieldBits + fieldMask - 500 // three wraps done, the fourth 500 calls away
	b.finishedHigh.Store(before >> fieldBits)
	b.state.Add(uint64(before&fieldMask) << finShift)
	if s := b.Stats(); s.Finished != before || s.Permitted != before {
		t.Fatalf("setup: %+v", s)
	}

	const perWorker = 5000
	stop := make(chan struct{})
	reader := make(chan struct{})
	go func() {
		defer close(reader)
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			s := b.Stats()
			if s.Finished < last || s.Permitted < s.Finished || s.Finished > before+2*perWorker {
				t.Errorf("finished %d after %d, permitted %d", s.Finished, last, s.Permitted)
				return
			}
			last = s.Finished
		}
	}()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for i := 0; i < perWorker; {
				if b.TryAcquire() {
					b.Release()
					i++
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-reader
	s := b.Stats()
	if want := uint64(before + 2*perWorker); s.Finished != want || s.Permitted != want || s.InFlight != 0 {
		t.Fatalf("got %+v, want finished and permitted %d", s, want)
	}
	if b.finishedHigh.Load() != 4 {
		t.Fatalf("high bits %d, want 4 after the fourth wrap", b.finishedHigh.Load())
	}
}

// A Stats that reads N calls in flight while they finish and a concurrent
// Stats records their Finished must not record a Permitted that counts them
// twice: at rest Permitted == Finished.
func TestOverlappingStatsKeepPermittedExact(t *testing.T) {
	b, err := New("overlap", Config{MaxConcurrentCalls: 8})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	for range n {
		b.TryAcquire()
	}
	b.finishedSeen = n // the other Stats' record, landing inside this one's window
	_ = b.Stats()
	for range n {
		b.Release()
	}
	if s := b.Stats(); s.Permitted != n || s.Finished != n {
		t.Fatalf("at rest: Permitted %d, Finished %d; want %d and %d", s.Permitted, s.Finished, n, n)
	}
}
