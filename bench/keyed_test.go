package bench

// Keyed semaphore rows, in group 7's semaphore table, whose floor is the bare
// Do: the target is a keyed Do at most 3x the plain one.

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/bulkhead-go/bulkhead/semaphore"
)

func newKeyed(b *testing.B, perKey int) *semaphore.Keyed[string] {
	k, err := semaphore.NewKeyed[string]("bench", semaphore.KeyedConfig{
		PerKey: semaphore.Config{MaxConcurrentCalls: perKey}, MaxConcurrentCalls: bigLimit})
	if err != nil {
		b.Fatal(err)
	}
	return k
}

// keyedDo calls k for one of keys picked at random (rand's per-thread
// generator: the op is shared by the parallel rows' goroutines, and a
// shared counter would add an atomic to every call).
func keyedDo(k *semaphore.Keyed[string], keys []string) func() {
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	if len(keys) == 1 {
		return func() { _ = k.Do(ctx, keys[0], fn) }
	}
	return func() { _ = k.Do(ctx, keys[rand.IntN(len(keys))], fn) }
}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(i)
	}
	return keys
}

func init() {
	configuredSemaphoreCases = append(configuredSemaphoreCases,
		// The plain Do with the random pick of KeyedDo_1k_keys, which costs
		// about 110 instructions of its own: the reference for that row
		// (BENCH_REF=base_Do_random_pick).
		opCase{baseKind, "Do_random_pick", func(b *testing.B) func() {
			s, keys := newSemaphore(b, bigLimit), benchKeys(1000)
			return func() {
				if len(keys[rand.IntN(len(keys))]) == 0 {
					panic("empty key")
				}
				_ = s.Do(bg, noop)
			}
		}},
		opCase{oursKind, "KeyedDo_hot_key", func(b *testing.B) func() {
			return keyedDo(newKeyed(b, bigLimit), []string{"tenant-1"})
		}},
		opCase{oursKind, "KeyedDo_1k_keys", func(b *testing.B) func() {
			k, keys := newKeyed(b, 2), benchKeys(1000)
			for _, key := range keys { // every key holds a permit all along
				if _, ok := k.TryAcquire(key); !ok {
					b.Fatal(key)
				}
			}
			return keyedDo(k, keys)
		}},
		opCase{oursKind, "KeyedDo_churn_100k_keys", func(b *testing.B) func() {
			k, keys := newKeyed(b, 2), benchKeys(100_000)
			for _, key := range keys[:1000] {
				if _, ok := k.TryAcquire(key); !ok {
					b.Fatal(key)
				}
			}
			return keyedDo(k, keys[1000:])
		}},
	)
}
