package registry

import (
	"fmt"
	"io"
	"os"

	"github.com/bulkhead-go/bulkhead"
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

// SemaphoreSpec configures a semaphore or a shared semaphore configuration
// (docs/configuration.md lists its fields and their keys).
type SemaphoreSpec = config.SemaphoreSpec

// PoolSpec configures a pool or a shared pool configuration
// (docs/configuration.md lists its fields and their keys).
type PoolSpec = config.PoolSpec

// Line is the shedding rules of a bulkhead's line of waiters, each field
// inherited on its own (docs/configuration.md, docs/shedding.md).
type Line = config.Line

// Extras is a semaphore's Priorities, Shadow and Observe, inside
// SemaphoreSpec (docs/priorities.md, docs/semaphore.md).
type Extras = config.Extras

// ConfigError is one problem of a configuration: its File, Line, Path,
// Profile and a Msg naming the entry, field and value.
type ConfigError = config.Error

// Load reads the resilience4j sections of a Spring Boot YAML file (at most
// 4 MiB) as Spring binds them, with profiles and placeholders
// (docs/configuration.md). An unknown key, a bad value or a file that
// configures nothing is an error joining up to 20 [*ConfigError].
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

// spec is what a configuration resolves for one bulkhead (sem or pool by kind).
type spec struct {
	sem  semaphore.Config
	pool pool.Config
	config.Extra
}

// specOf also reports whether res lists k.
func specOf(res *config.Resolved, k key) (spec, bool) {
	if k.kind == bulkhead.Pool {
		c, x, ok := res.Pool(k.name)
		return spec{pool: c, Extra: x}, ok
	}
	c, x, ok := res.Semaphore(k.name)
	return spec{sem: c, Extra: x}, ok
}

func (sp spec) isKeyed() bool { return sp.Keyed != nil || sp.KeyedPool != nil }

// form is what Reconfigure cannot change in a live bulkhead (docs/configuration.md).
func (sp spec) form(k bulkhead.Kind) string {
	f := map[bool]string{true: "keyed", false: "plain"}[sp.isKeyed()]
	if k == bulkhead.Pool {
		f += map[bool]string{true: " with priorities", false: " without priorities"}[sp.pool.Priorities != nil]
	}
	return f
}

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

func newBulkhead(k key, sp spec) (handle, error) {
	switch {
	case sp.KeyedPool != nil:
		return pool.NewKeyed[string](k.name, *sp.KeyedPool)
	case k.kind == bulkhead.Pool:
		return pool.New(k.name, sp.pool)
	case sp.Keyed != nil:
		return semaphore.NewKeyed[string](k.name, *sp.Keyed)
	}
	return semaphore.New(k.name, sp.sem)
}

// kindError says why k cannot be returned by a call for the other form.
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
