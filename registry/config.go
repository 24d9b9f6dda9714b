package registry

import (
	"fmt"
	"io"
	"os"

	"github.com/bulkhead-go/bulkhead"
	"github.com/bulkhead-go/bulkhead/adaptive"
	"github.com/bulkhead-go/bulkhead/pool"
	"github.com/bulkhead-go/bulkhead/registry/internal/config"
	"github.com/bulkhead-go/bulkhead/semaphore"
)

// Config is a registry's configuration, built in code or read with [Load]
// or [LoadFile]: SemaphoreConfigs and PoolConfigs (shared, by name),
// Semaphores and Pools (the instances New creates), Strict (an unlisted name
// is [ErrNotConfigured]), RecordEvents (keep recent events for the Handler)
// and Warnings (what Load does not do as Spring would). A nil field is
// inherited from the BaseConfig chain (or "default"), then the kind's
// DefaultConfig(); docs/configuration.md has the details.
type Config = config.Config

// SemaphoreSpec configures a semaphore or a shared semaphore configuration:
// BaseConfig, MaxConcurrentCalls, MaxWaitDuration, EventBufferSize (0 to
// 10000, 100 if unset), Adaptive (inherited whole) and the [Line]'s fields.
type SemaphoreSpec = config.SemaphoreSpec

// PoolSpec configures a pool or a shared pool configuration: BaseConfig,
// MaxWorkers (maxThreadPoolSize), CoreWorkers (no effect), QueueCapacity,
// QueueTimeout (maxWaitDuration), KeepAlive, EventBufferSize, Adaptive, the
// [Line]'s fields, Priorities, Displace and Shadow (docs/pool.md).
type PoolSpec = config.PoolSpec

// Line is the shedding rules of a bulkhead's line of waiters, inside
// SemaphoreSpec and PoolSpec: MaxWaitingCalls, LIFOThreshold,
// MinDeadlineSlack, QueueOrder and CoDel, each inherited on its own
// (docs/shedding.md).
type Line = config.Line

// Extras is a semaphore's Priorities, Shadow and Observe, inside
// SemaphoreSpec (docs/priorities.md, docs/semaphore.md).
type Extras = config.Extras

// ConfigError is one problem of a configuration: File, Line (0 for values
// built in code), Path, Profile (of its document) and Msg, which names the
// entry, field and value.
type ConfigError = config.Error

// Load reads the resilience4j.bulkhead and resilience4j.thread-pool-bulkhead
// sections of a Spring Boot YAML file (at most 4 MiB) as Spring binds them,
// with profiles and placeholders (docs/configuration.md). An unknown key, a
// bad value or a file that configures nothing is an error joining up to 20
// [*ConfigError].
func Load(r io.Reader) (Config, error) {
	if r == nil {
		panic("registry: Load called with a nil io.Reader")
	}
	data, err := io.ReadAll(io.LimitReader(r, config.MaxFileSize+1))
	if err != nil {
		return Config{}, fmt.Errorf("registry: reading configuration: %w", err)
	}
	return config.Load(data, "", os.LookupEnv)
}

// LoadFile reads the named file as [Load] does (or as .properties, by its
// extension) and, for each active profile, the profile files beside it:
// application-prod.yaml, .yml and .properties for application.yml.
func LoadFile(path string) (Config, error) {
	c, _, err := config.LoadFile(path, os.LookupEnv)
	return c, err
}

// spec is what a configuration resolves for one bulkhead: the config of its
// kind, the others unused.
type spec struct {
	sem       semaphore.Config
	pool      pool.Config
	keyed     *semaphore.KeyedConfig // a keyed semaphore's; nil: not keyed
	keyedPool *pool.KeyedConfig      // a keyed pool's; nil: not keyed
	size      int                    // event buffer size
	adaptive  *adaptive.Config       // nil: no controller
}

// specOf resolves k's spec from res, and whether res lists it.
func specOf(res *config.Resolved, k key) (spec, bool) {
	if k.kind == bulkhead.Pool {
		c, x, ok := res.Pool(k.name)
		return spec{pool: c, keyedPool: x.KeyedPool, size: x.Buffer, adaptive: x.Adaptive}, ok
	}
	c, x, ok := res.Semaphore(k.name)
	return spec{sem: c, keyed: x.Keyed, size: x.Buffer, adaptive: x.Adaptive}, ok
}

func (sp spec) isKeyed() bool { return sp.keyed != nil || sp.keyedPool != nil }

func (sp spec) limit(k bulkhead.Kind) int {
	if k == bulkhead.Pool {
		return sp.pool.MaxWorkers
	}
	return sp.sem.MaxConcurrentCalls
}

// withLimit returns sp with its limit set to n, or as it is if n is 0.
func (sp spec) withLimit(n int) spec {
	if n > 0 {
		sp.sem.MaxConcurrentCalls, sp.pool.MaxWorkers = n, n
	}
	return sp
}

// newBulkhead creates the bulkhead sp describes, with the limit n if not 0.
func newBulkhead(k key, sp spec, n int) (handle, error) {
	sp = sp.withLimit(n)
	switch {
	case sp.keyedPool != nil:
		return pool.NewKeyed[string](k.name, *sp.keyedPool)
	case k.kind == bulkhead.Pool:
		return pool.New(k.name, sp.pool)
	case sp.keyed != nil:
		return semaphore.NewKeyed[string](k.name, *sp.keyed)
	}
	return semaphore.New(k.name, sp.sem)
}

// kindError says why k, keyed or not as isKeyed says, cannot be returned
// by a call for the other form.
func kindError(k key, isKeyed bool) error {
	keys, get := "maxConcurrentCallsPerKey", "Semaphore"
	if k.kind == bulkhead.Pool {
		keys, get = "maxRunningPerKey or queueCapacityPerKey", "Pool"
	}
	if isKeyed {
		return fmt.Errorf("registry: %s %q is keyed (%s): get it with Keyed%s", k.kind, k.name, keys, get)
	}
	return fmt.Errorf("registry: %s %q is not keyed (no %s): get it with %s", k.kind, k.name, keys, get)
}
