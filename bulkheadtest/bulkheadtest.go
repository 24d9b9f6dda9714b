package bulkheadtest

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkhead-go/bulkhead"
)

// Burst is one dependency's part in the proof: Workers concurrent calls to
// the dependency through its bulkhead.
type Burst struct {
	// Name names the dependency in results and messages. It must be unique
	// within a run.
	Name string
	// Workers is how many calls the burst makes at once, one per worker
	// goroutine; at least 1.
	Workers int
	// Limit is the number of concurrent calls the dependency's bulkhead is
	// meant to allow (its MaxConcurrentCalls); at least 1. [Check] expects
	// min(Workers, Limit) calls accepted and the rest rejected.
	Limit int
	// Gate is the gate inside this dependency's stub, passed by every call
	// that the bulkhead lets through. Each burst needs its own gate.
	Gate *Gate
	// Call makes one call to the dependency through its bulkhead. It returns
	// nil on success and the bulkhead's error (or an error wrapping it) on
	// rejection. It must return soon after ctx ends.
	Call func(ctx context.Context) error
	// Bulkhead, if set, is the bulkhead Call goes through. Run then refuses
	// at once a pool bulkhead with a queue: its queued tasks would never
	// reach the gate, so the burst could not settle (give the pool
	// QueueCapacity 0 for the proof).
	Bulkhead bulkhead.Instance
}

// Result is what one burst's workers saw.
type Result struct {
	// Name, Workers and Limit are copied from the burst.
	Name    string
	Workers int
	Limit   int
	// Accepted counts calls that returned nil.
	Accepted int
	// Rejected counts calls whose error matched [bulkhead.ErrBulkheadFull]
	// anywhere in its chain.
	Rejected int
	// Other counts every other outcome: other errors, a panic (reported as
	// a [*bulkhead.PanicError]) or runtime.Goexit.
	Other int
	// MaxConcurrent is the largest number of the burst's calls held at its
	// gate at one time: the peak of concurrent permitted calls, measured
	// inside the dependency.
	MaxConcurrent int
	// OtherErr is the first outcome counted in Other, for messages; nil
	// when Other is 0.
	OtherErr error
}

// String describes the result in one line, e.g.
// "payment: 2 accepted, 4 rejected, 0 other, peak 2 (limit 2, 6 workers)".
func (r Result) String() string {
	return fmt.Sprintf("%s: %d accepted, %d rejected, %d other, peak %d (limit %d, %d workers)",
		r.Name, r.Accepted, r.Rejected, r.Other, r.MaxConcurrent, r.Limit, r.Workers)
}

// Run runs the bursts together: every worker
// of every burst waits on one latch, and the latch opens once all are
// waiting. The gates hold the accepted calls until every worker has settled,
// that is, is held at its gate or has returned; then they open, and Run
// returns once every worker has returned. The results are in the order of
// bursts.
//
// Run returns an error, and no results, if a burst is invalid or its gate is
// in use by another run. If ctx ends before the workers settle (a bulkhead
// with MaxWaitDuration > 0 keeps its callers waiting that long), Run opens
// the gates, waits for the workers, and returns the results so far with an
// error saying how far each burst got. A run that never settles usually
// means a permitted call is stuck before its gate, for example in a client
// whose own connection limit is below the bulkhead's.
//
// A nil ctx is a bug in the caller: Run panics.
func Run(ctx context.Context, bursts ...Burst) ([]Result, error) {
	if ctx == nil {
		panic("bulkheadtest: Run called with a nil Context")
	}
	return run(ctx, false, bursts)
}

// RunInOrder is like [Run] but releases the bursts one after another: each
// burst starts once the bursts before it have settled, with their accepted
// calls still held at their gates. Use it to model traffic that arrives
// while a slow dependency is already saturated; the outcome of a burst then
// depends only on what came before it, never on scheduling.
func RunInOrder(ctx context.Context, bursts ...Burst) ([]Result, error) {
	if ctx == nil {
		panic("bulkheadtest: RunInOrder called with a nil Context")
	}
	return run(ctx, true, bursts)
}

// Check reports whether results show isolation: every burst had exactly
// min(Workers, Limit) calls accepted, the rest rejected, no other outcome,
// and all its accepted calls at its gate at the same time, never more than
// Limit. It returns nil if so, and otherwise an error listing every burst
// that broke the rule and how.
//
// No results prove nothing: Check panics if results is empty, as it is
// when Run failed (check Run's error first).
func Check(results []Result) error {
	if len(results) == 0 {
		panic("bulkheadtest: Check called with no results")
	}
	var b strings.Builder
	for _, r := range results {
		var p []string
		want := min(r.Workers, r.Limit)
		if r.Accepted != want {
			p = append(p, fmt.Sprintf("%d accepted, want %d", r.Accepted, want))
		}
		if r.Rejected != r.Workers-want {
			p = append(p, fmt.Sprintf("%d rejected, want %d", r.Rejected, r.Workers-want))
		}
		if r.Other != 0 {
			p = append(p, fmt.Sprintf("%d other outcomes, want 0 (first: %v)", r.Other, r.OtherErr))
		}
		switch {
		case r.MaxConcurrent > r.Limit:
			p = append(p, fmt.Sprintf("peak of %d concurrent calls is above the limit %d", r.MaxConcurrent, r.Limit))
		case r.MaxConcurrent < r.Accepted:
			p = append(p, fmt.Sprintf("peak of %d concurrent calls for %d accepted: does every call pass the burst's Gate?", r.MaxConcurrent, r.Accepted))
		}
		if len(p) > 0 {
			fmt.Fprintf(&b, "\n\t%s\n\t\t%s", r, strings.Join(p, "; "))
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return errors.New("bulkheadtest: isolation broken:" + b.String())
}

// guard bounds AssertIsolated's run; it only keeps a broken test from
// hanging and plays no part in the judgement.
const guard = time.Minute

// AssertIsolated runs the bursts together, as [Run] does, and fails tb
// unless [Check] finds isolation. It stops the test (tb.Fatal) if the run
// cannot complete within a minute, saying how far each burst got. It
// returns the results for further checks, such as the bulkheads' Stats
// after the burst. A nil tb is a bug in the caller: AssertIsolated panics.
func AssertIsolated(tb testing.TB, bursts ...Burst) []Result {
	if tb == nil {
		panic("bulkheadtest: AssertIsolated called with a nil testing.TB")
	}
	tb.Helper()
	return AssertIsolatedWithin(tb, guard, bursts...)
}

// AssertIsolatedWithin is [AssertIsolated] with limit, instead of a minute,
// as the longest the run may take before the test stops; it must be
// positive.
func AssertIsolatedWithin(tb testing.TB, limit time.Duration, bursts ...Burst) []Result {
	if tb == nil {
		panic("bulkheadtest: AssertIsolatedWithin called with a nil testing.TB")
	}
	tb.Helper()
	if limit <= 0 {
		tb.Fatalf("bulkheadtest: AssertIsolatedWithin: limit must be > 0, got %v", limit)
		return nil
	}
	ctx, cancel := context.WithTimeout(tb.Context(), limit)
	defer cancel()
	results, err := Run(ctx, bursts...)
	if err != nil {
		tb.Fatalf("%v", err)
		return results
	}
	if err := Check(results); err != nil {
		tb.Errorf("%v", err)
	}
	return results
}

func validate(bursts []Burst) error {
	if len(bursts) == 0 {
		return errors.New("bulkheadtest: no bursts to run")
	}
	names := make(map[string]bool, len(bursts))
	gates := make(map[*Gate]string, len(bursts))
	for i, b := range bursts {
		switch {
		case b.Name == "":
			return fmt.Errorf("bulkheadtest: burst %d: Name is empty", i)
		case names[b.Name]:
			return fmt.Errorf("bulkheadtest: burst %q: Name is used by two bursts", b.Name)
		case b.Workers < 1:
			return fmt.Errorf("bulkheadtest: burst %q: Workers must be >= 1, got %d", b.Name, b.Workers)
		case b.Limit < 1:
			return fmt.Errorf("bulkheadtest: burst %q: Limit must be >= 1, got %d", b.Name, b.Limit)
		case b.Gate == nil:
			return fmt.Errorf("bulkheadtest: burst %q: Gate is nil; put a Gate inside the stub dependency", b.Name)
		case b.Call == nil:
			return fmt.Errorf("bulkheadtest: burst %q: Call is nil", b.Name)
		}
		if b.Bulkhead != nil {
			if s := b.Bulkhead.Stats(); s.Kind == bulkhead.Pool && s.QueueCapacity > 0 {
				return fmt.Errorf("bulkheadtest: burst %q: pool %q has a queue (QueueCapacity %d): queued tasks never reach the Gate, so the burst cannot settle; prove isolation with QueueCapacity 0",
					b.Name, s.Name, s.QueueCapacity)
			}
		}
		if other, ok := gates[b.Gate]; ok {
			return fmt.Errorf("bulkheadtest: bursts %q and %q share a Gate; give each burst its own", other, b.Name)
		}
		names[b.Name] = true
		gates[b.Gate] = b.Name
	}
	return nil
}

// errGoexit stands for a Call that ended its goroutine with runtime.Goexit.
var errGoexit = errors.New("bulkheadtest: Call called runtime.Goexit")

func run(ctx context.Context, inOrder bool, bursts []Burst) ([]Result, error) {
	if err := validate(bursts); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := len(bursts)
	wake := make(chan struct{}, 1)
	sessions := make([]*session, n)
	for i, b := range bursts {
		s, ok := b.Gate.arm(wake)
		if !ok {
			for j := range i {
				bursts[j].Gate.end(sessions[j])
			}
			return nil, fmt.Errorf("bulkheadtest: burst %q: its Gate is in use by another run", b.Name)
		}
		sessions[i] = s
	}

	var (
		mu       sync.Mutex
		results  = make([]Result, n)
		returned = make([]int, n)
		start    = make([]chan struct{}, n)
		skip     = make([]bool, n) // written before start[i] is closed
		ready    sync.WaitGroup
		done     sync.WaitGroup
	)
	record := func(i int, err error) {
		mu.Lock()
		r := &results[i]
		switch {
		case err == nil:
			r.Accepted++
		case errors.Is(err, bulkhead.ErrBulkheadFull):
			r.Rejected++
		default:
			r.Other++
			if r.OtherErr == nil {
				r.OtherErr = err
			}
		}
		returned[i]++
		mu.Unlock()
		notify(wake)
	}
	for i, b := range bursts {
		results[i] = Result{Name: b.Name, Workers: b.Workers, Limit: b.Limit}
		start[i] = make(chan struct{})
		for range b.Workers {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				ready.Done()
				<-start[i]
				if skip[i] {
					return
				}
				var err error
				finished := false
				defer func() {
					if !finished {
						if v := recover(); v != nil {
							err = &bulkhead.PanicError{Value: v, Stack: debug.Stack()}
						} else {
							err = errGoexit
						}
					}
					record(i, err)
				}()
				err = b.Call(ctx)
				finished = true
			}()
		}
	}

	// settled reports whether every worker of the first k bursts is held at
	// its gate or has returned. It reads returned before the gate: a worker
	// leaves its gate before it returns, so it is never counted twice.
	settled := func(k int) bool {
		for i := range k {
			mu.Lock()
			r := returned[i]
			mu.Unlock()
			if r+bursts[i].Gate.inside(sessions[i]) < bursts[i].Workers {
				return false
			}
		}
		return true
	}
	waitSettled := func(k int) error {
		for !settled(k) {
			select {
			case <-wake:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}

	ready.Wait()
	released := 0
	var err error
	if inOrder {
		for released < n {
			close(start[released])
			released++
			if err = waitSettled(released); err != nil {
				break
			}
		}
	} else {
		for released < n {
			close(start[released])
			released++
		}
		err = waitSettled(n)
	}
	if err != nil {
		err = stalled(bursts, sessions, &mu, returned, released, err)
	}
	for i := released; i < n; i++ {
		skip[i] = true
		close(start[i])
	}
	for i, s := range sessions {
		bursts[i].Gate.open(s)
	}
	done.Wait()
	for i, s := range sessions {
		results[i].MaxConcurrent = bursts[i].Gate.end(s)
	}
	return results, err
}

// stalled builds Run's error for a run whose context ended before its
// workers settled.
func stalled(bursts []Burst, sessions []*session, mu *sync.Mutex, returned []int, released int, cause error) error {
	var b strings.Builder
	b.WriteString("bulkheadtest: workers had not settled when the context ended:")
	for i, burst := range bursts {
		if i >= released {
			fmt.Fprintf(&b, " %s: not started;", burst.Name)
			continue
		}
		mu.Lock()
		r := returned[i]
		mu.Unlock()
		fmt.Fprintf(&b, " %s: %d of %d returned, %d at the gate;", burst.Name, r, burst.Workers, burst.Gate.inside(sessions[i]))
	}
	// The counts were read after ctx ended, when stuck calls may have
	// returned already; name the usual places where calls get stuck.
	return fmt.Errorf("%s (a call that neither returns nor reaches its gate waits somewhere: in a pool's queue,"+
		" which a task never leaves for the gate while the others hold their workers (prove pools with QueueCapacity 0),"+
		" for a semaphore permit (MaxWaitDuration), or in a client whose own limit is below the bulkhead's): %w",
		strings.TrimSuffix(b.String(), ";"), cause)
}
