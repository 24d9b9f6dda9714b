package adaptive_test

import (
	"context"
	"fmt"
	"time"

	"github.com/bulkhead-go/bulkhead/adaptive"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

func ExampleAttach() {
	b, err := semaphore.New("inventory", semaphore.Config{MaxConcurrentCalls: 50})
	if err != nil {
		panic(err)
	}
	cfg := adaptive.DefaultConfig() // vegas, between 1 and 200
	cfg.MinLimit, cfg.MaxLimit, cfg.InitialLimit = 5, 100, 20
	c, err := adaptive.Attach(b, cfg)
	if err != nil {
		panic(err)
	}
	defer c.Detach()

	// Calls go through the bulkhead as before; the controller watches them.
	_ = b.Do(context.Background(), func(ctx context.Context) error {
		time.Sleep(time.Millisecond) // call the inventory service here
		return nil
	})

	s := c.State()
	fmt.Println(s.Algorithm, s.Limit, b.Config().MaxConcurrentCalls)
	// Output: vegas 20 20
}

// slowStart doubles the limit while the dependency keeps up and halves it
// when it pushes back: an Algorithm of your own.
type slowStart struct{}

func (slowStart) Update(limit float64, w adaptive.Window) adaptive.Decision {
	switch {
	case w.Overloaded():
		return adaptive.Decision{Limit: limit / 2, Reason: "pushed back"}
	case w.Limited():
		return adaptive.Decision{Limit: limit * 2, Reason: "keeping up"}
	}
	return adaptive.Decision{Limit: limit, Reason: "limit not reached"}
}

func ExampleConfig_custom() {
	b, _ := semaphore.New("search", semaphore.Config{MaxConcurrentCalls: 4})
	c, err := adaptive.Attach(b, adaptive.Config{Custom: slowStart{}, MinLimit: 1, MaxLimit: 64})
	if err != nil {
		panic(err)
	}
	defer c.Detach()
	fmt.Println(c.State().Algorithm, b.Config().MaxConcurrentCalls)
	// Output: custom 4
}
