package future

import (
	"sync/atomic"
	"testing"
)

// The interleaving of a stress of it, made
// deterministic: settle stores "complete", an OnComplete on another
// goroutine links A and (complete, nothing before it) runs runHooks
// itself; settle's head.Load then sees A, so the completer runs runHooks
// too (done here by hand, as complete does with settle's result). Its take
// finds &firing, takes nothing and stores nil over the sentinel while A
// still runs; B, added then, runs at once, before A has returned.
func TestCompleterRunHooksAfterOnDoneFiresKeepsTheOrder(t *testing.T) {
	p := NewPromise[int](nil)
	f := p.Future()
	d, _ := f.settle(1, nil) // "complete" stored; head still nil, so d is nil here
	if d != nil {
		t.Fatal("no hook was linked yet")
	}
	aStarted, aRelease, aReturned := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var aDone atomic.Bool
	go func() {
		defer close(aReturned)
		f.OnComplete(func(int, error) { close(aStarted); <-aRelease; aDone.Store(true) })
	}()
	<-aStarted
	runHooks(f) // the completer, whose settle's head.Load saw A
	bEarly := false
	f.OnComplete(func(int, error) { bEarly = !aDone.Load() })
	close(aRelease)
	<-aReturned
	if bEarly {
		t.Error("B, added while A ran, ran before A returned (the completer's runHooks cleared the firing sentinel)")
	}
}
