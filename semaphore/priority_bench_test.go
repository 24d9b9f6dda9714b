package semaphore_test

import (
	"context"
	"testing"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// BenchmarkPrioritizedDo is Do on a bulkhead with Priorities: below its
// lowest ceiling (Sheddable's), where it must cost what the plain Do does,
// and above it, where a Critical call reads its context and takes its
// permit by the ceiling in the settings; plain is the unprioritized Do
// with the same context.
func BenchmarkPrioritizedDo(b *testing.B) {
	fn := func(context.Context) error { return nil }
	b.Run("plain", func(b *testing.B) { // the same context, no Priorities
		s, _ := semaphore.New("b", semaphore.Config{MaxConcurrentCalls: 1 << 20})
		ctx := bulkhead.WithPriority(context.Background(), bulkhead.Sheddable)
		b.ReportAllocs()
		for b.Loop() {
			s.Do(ctx, fn)
		}
	})
	b.Run("below-ceiling", func(b *testing.B) {
		s, _ := semaphore.New("b", semaphore.Config{MaxConcurrentCalls: 1 << 20, Priorities: &bulkhead.Priorities{}})
		ctx := bulkhead.WithPriority(context.Background(), bulkhead.Sheddable)
		b.ReportAllocs()
		for b.Loop() {
			s.Do(ctx, fn)
		}
	})
	b.Run("above-ceiling", func(b *testing.B) {
		s, _ := semaphore.New("b", semaphore.Config{MaxConcurrentCalls: 4, Priorities: &bulkhead.Priorities{}})
		for range 2 { // Sheddable's ceiling: 2 of 4
			s.TryAcquire()
		}
		ctx := bulkhead.WithPriority(context.Background(), bulkhead.Critical)
		b.ReportAllocs()
		for b.Loop() {
			s.Do(ctx, fn)
		}
	})
}

// BenchmarkShadowDo is Do on a bulkhead with a shadow limit, whose every
// call takes the configured path and a shadow permit, against the plain Do.
func BenchmarkShadowDo(b *testing.B) {
	fn := func(context.Context) error { return nil }
	for _, c := range []struct {
		name   string
		shadow *semaphore.Shadow
	}{{"plain", nil}, {"shadowed", &semaphore.Shadow{MaxConcurrentCalls: 1 << 19}}} {
		b.Run(c.name, func(b *testing.B) {
			s, _ := semaphore.New("b", semaphore.Config{MaxConcurrentCalls: 1 << 20, Shadow: c.shadow})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				s.Do(ctx, fn)
			}
		})
	}
}
