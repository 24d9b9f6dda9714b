package reliability

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// semModel is the semaphore bulkhead as a few lines of sequential code: a
// limit, the permits in use and a line of waiters with deadlines, FIFO or
// LIFO, bounded or not.
type semModel struct {
	limit     int
	wait      time.Duration
	lifo      bool // QueueOrder LIFO
	waiting   int  // MaxWaitingCalls
	inUse     int
	line      []*semWaiter
	permitted uint64
	rejected  uint64
	by        [len(bulkhead.Reasons) + 1]uint64 // rejections by reason
	cancelled uint64
	finished  uint64
	failed    uint64
}

// semWaiter is one Acquire running on its own goroutine.
type semWaiter struct {
	id       int
	deadline time.Time
	cancel   context.CancelFunc
	got      chan error
	want     string // "": still waiting; else "granted", "rejected", "cancelled"
	checked  bool
}

// grant hands free permits to the oldest waiters (the newest, LIFO).
func (m *semModel) grant() {
	for len(m.line) > 0 && m.inUse < m.limit {
		w := m.line[0]
		if m.lifo {
			w = m.line[len(m.line)-1]
		}
		m.remove(w)
		m.inUse++
		m.permitted++
		w.want = "granted"
	}
}

// reject counts a rejection for reason r.
func (m *semModel) reject(r bulkhead.Reason) {
	m.rejected++
	m.by[r]++
}

func (m *semModel) remove(w *semWaiter) {
	for i, x := range m.line {
		if x == w {
			m.line = append(m.line[:i:i], m.line[i+1:]...)
			return
		}
	}
}

// FuzzSemaphoreStateMachine decodes its input into operations (try, acquire,
// release, reconfigure, cancel a waiter, let time pass, Do, acquire with a
// done context) on a semaphore bulkhead and on semModel, and compares the
// two after every step: Stats, and the result of every waiting Acquire. Time
// is synctest's, so waiting and expiry are exact. CI runs it briefly with
//
//	go test -run '^$' -fuzz '^FuzzSemaphoreStateMachine$' -fuzztime 10s ./reliability
func FuzzSemaphoreStateMachine(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 0, 2, 0, 2, 0, 2, 0})
	f.Add([]byte{3, 0x12, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 4, 1, 5, 3, 2, 0, 2, 0, 2, 0})
	f.Add([]byte{3, 0x32, 1, 0, 1, 0, 1, 0, 1, 0, 3, 0x34, 3, 0x30, 2, 0, 5, 9, 2, 0, 2, 0, 7, 0, 6, 1, 6, 2})
	f.Add([]byte{3, 0x20, 1, 0, 1, 0, 3, 0x00, 1, 0, 5, 7, 3, 0x24, 4, 0, 2, 0, 6, 0, 2, 0})
	f.Add([]byte{3, 0xd0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 4, 0, 2, 0, 3, 0x50, 1, 0, 1, 0, 2, 0, 5, 11, 2, 0, 2, 0})
	f.Add([]byte{3, 0xa1, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 2, 0, 3, 0xe1, 1, 0, 1, 0, 1, 0, 2, 0, 5, 11, 6, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 400 {
			data = data[:400]
		}
		defer kickScheduler()()
		synctest.Test(t, func(t *testing.T) { runSemaphoreModel(t, data) })
	})
}

func runSemaphoreModel(t *testing.T, data []byte) {
	m := &semModel{limit: 2, wait: time.Millisecond}
	b, err := semaphore.New("fuzz", semaphore.Config{MaxConcurrentCalls: m.limit, MaxWaitDuration: m.wait})
	if err != nil {
		t.Fatal(err)
	}
	var all []*semWaiter
	var trace strings.Builder
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("after %s: %s", trace.String(), fmt.Sprintf(format, args...))
	}
	check := func() {
		t.Helper()
		synctest.Wait() // every goroutine has done what it can
		for _, w := range all {
			if w.checked {
				continue
			}
			select {
			case err := <-w.got:
				var fe *bulkhead.FullError
				switch {
				case w.want == "":
					fail("waiter %d returned %v while the model says it still waits", w.id, err)
				case w.want == "granted" && err != nil,
					w.want == "rejected" && !(errors.As(err, &fe) && fe.Waited),
					w.want == "cancelled" && err != context.Canceled:
					fail("waiter %d returned %v, model says %s", w.id, err, w.want)
				}
				w.checked = true
			default:
				if w.want != "" {
					fail("waiter %d still waits, model says %s", w.id, w.want)
				}
			}
		}
		s := b.Stats()
		want := bulkhead.Stats{Name: "fuzz", Kind: bulkhead.Semaphore, MaxConcurrentCalls: m.limit,
			AvailableConcurrentCalls: max(0, m.limit-m.inUse), InFlight: m.inUse, Waiting: len(m.line),
			Permitted: m.permitted, Rejected: m.rejected, RejectedBy: m.by, LIFO: m.lifo, Cancelled: m.cancelled, Finished: m.finished, Failed: m.failed}
		if s != want {
			fail("stats\n got %+v\nwant %+v", s, want)
		}
	}
	// admitNow is the model's answer for a call arriving now.
	admitNow := func() bool { return len(m.line) == 0 && m.inUse < m.limit }

	for i := 0; i+1 < len(data); i += 2 {
		op, arg := data[i]%8, data[i+1]
		switch op {
		case 0: // TryAcquire
			fmt.Fprintf(&trace, "try ")
			want := admitNow()
			if got := b.TryAcquire(); got != want {
				fail("TryAcquire = %v, model says %v", got, want)
			}
			if want {
				m.inUse++
				m.permitted++
			} else {
				m.reject(bulkhead.ReasonFull)
			}
		case 1: // Acquire on its own goroutine
			ctx, cancel := context.WithCancel(context.Background())
			w := &semWaiter{id: len(all), cancel: cancel, got: make(chan error, 1)}
			fmt.Fprintf(&trace, "acquire#%d ", w.id)
			all = append(all, w)
			switch {
			case admitNow():
				m.inUse++
				m.permitted++
				w.want = "granted"
			case m.wait == 0:
				m.reject(bulkhead.ReasonFull)
				w.want = "immediate-rejection"
			case m.waiting > 0 && len(m.line) >= m.waiting && !m.lifo:
				m.reject(bulkhead.ReasonWaiters)
				w.want = "immediate-rejection"
			default:
				for m.waiting > 0 && len(m.line) >= m.waiting { // LIFO: the oldest make room
					old := m.line[0]
					m.remove(old)
					m.reject(bulkhead.ReasonWaiters)
					old.want = "rejected"
				}
				w.deadline = time.Now().Add(m.wait)
				m.line = append(m.line, w)
			}
			go func() { w.got <- b.Acquire(ctx) }()
			if w.want == "immediate-rejection" {
				synctest.Wait()
				err := <-w.got
				var fe *bulkhead.FullError
				if !errors.As(err, &fe) || fe.Waited {
					fail("acquire#%d = %v, want an immediate rejection", w.id, err)
				}
				w.checked = true
			}
		case 2: // Release
			fmt.Fprintf(&trace, "release ")
			panicked := func() (p bool) {
				defer func() { p = recover() != nil }()
				b.Release()
				return false
			}()
			if panicked != (m.inUse == 0) {
				fail("Release panicked=%v with %d permits in use", panicked, m.inUse)
			}
			if !panicked {
				m.inUse--
				m.finished++
				m.grant()
			}
		case 3: // Reconfigure; the top bits, with a wait: LIFO, and at most 2 waiting
			cfg := semaphore.Config{MaxConcurrentCalls: 1 + int(arg&0x0f)%5,
				MaxWaitDuration: []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond}[arg>>4%4]}
			if cfg.MaxWaitDuration > 0 {
				if arg&0x40 != 0 {
					cfg.QueueOrder = bulkhead.LIFO
				}
				if arg&0x80 != 0 {
					cfg.MaxWaitingCalls = 2
				}
			}
			fmt.Fprintf(&trace, "reconfigure(%d,%v,%v,%d) ", cfg.MaxConcurrentCalls, cfg.MaxWaitDuration, cfg.QueueOrder, cfg.MaxWaitingCalls)
			if err := b.Reconfigure(cfg); err != nil {
				fail("Reconfigure: %v", err)
			}
			m.limit, m.wait = cfg.MaxConcurrentCalls, cfg.MaxWaitDuration
			m.lifo, m.waiting = cfg.QueueOrder == bulkhead.LIFO, cfg.MaxWaitingCalls
			m.grant()
		case 4: // cancel a waiter
			if len(m.line) == 0 {
				continue
			}
			w := m.line[int(arg)%len(m.line)]
			fmt.Fprintf(&trace, "cancel#%d ", w.id)
			w.cancel()
			m.remove(w)
			m.cancelled++
			w.want = "cancelled"
		case 5: // let time pass: waiters past their deadline are rejected
			d := time.Duration(1+arg%12) * time.Millisecond
			fmt.Fprintf(&trace, "sleep(%v) ", d)
			end := time.Now().Add(d)
			time.Sleep(d)
			for _, w := range append([]*semWaiter(nil), m.line...) {
				if !w.deadline.After(end) {
					m.remove(w)
					m.reject(bulkhead.ReasonTimeout)
					w.want = "rejected"
				}
			}
		case 6: // Do: returns, fails or panics when admitted at once
			if !admitNow() && m.wait > 0 {
				continue // it would wait; waiting is op 1's job
			}
			how := arg % 3
			fmt.Fprintf(&trace, "do(%d) ", how)
			ran := false
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil && r != "fuzz" {
						fail("Do panicked with %v", r)
					}
				}()
				err = b.Do(context.Background(), func(context.Context) error {
					ran = true
					switch how {
					case 1:
						return errWork
					case 2:
						panic("fuzz")
					}
					return nil
				})
			}()
			if ran != admitNow() {
				fail("Do ran=%v, model says %v", ran, admitNow())
			}
			if !ran {
				if !errors.Is(err, bulkhead.ErrBulkheadFull) {
					fail("Do on a full bulkhead = %v", err)
				}
				m.reject(bulkhead.ReasonFull)
				break
			}
			m.permitted++
			m.finished++
			if how != 0 {
				m.failed++
			}
		case 7: // a context already done takes nothing and counts nothing
			fmt.Fprintf(&trace, "acquire(done) ")
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := b.Acquire(ctx); err != context.Canceled {
				fail("Acquire(done ctx) = %v", err)
			}
		}
		check()
	}

	// Wind down: cancel every waiter, return every permit, and the bulkhead
	// must be at rest with every call accounted for.
	fmt.Fprintf(&trace, "| wind down")
	for _, w := range append([]*semWaiter(nil), m.line...) {
		w.cancel()
		m.remove(w)
		m.cancelled++
		w.want = "cancelled"
	}
	synctest.Wait() // the cancelled waiters have left before permits come back
	for m.inUse > 0 {
		b.Release()
		m.inUse--
		m.finished++
	}
	check()
	for _, w := range all {
		w.cancel()
	}
	if s := b.Stats(); s.Permitted+s.Rejected+s.Cancelled != m.permitted+m.rejected+m.cancelled || s.Permitted != s.Finished {
		fail("not every call accounted for: %+v", s)
	}
}
