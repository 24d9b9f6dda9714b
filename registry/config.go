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

// Config is a registry's configuration: a plain value, built in code or
// read from a Spring Boot file with [Load] or [LoadFile]. Its fields, and
// those of [SemaphoreSpec] and [PoolSpec], are documented in
// docs/configuration.md ("From Go code"):
//
//   - SemaphoreConfigs and PoolConfigs: shared configurations by name
//     (Spring's configs); Semaphores and Pools: the instances New creates.
//   - Strict: Semaphore and Pool fail with [ErrNotConfigured] for a name the
//     configuration does not list, instead of creating it from "default".
//   - RecordEvents: every bulkhead keeps its last events for the Handler.
//   - Warnings: what Load accepted but does not do as Spring would.
//
// The two kinds are two namespaces, as in Resilience4j. In each kind, the
// shared configuration "default" applies to every instance and every other
// shared configuration that names no BaseConfig. A nil field is unset and
// inherited up the BaseConfig chain; whatever is still unset takes
// semaphore.DefaultConfig() or pool.DefaultConfig(). Validate checks every
// value, name and BaseConfig reference; the error joins one [*ConfigError]
// per problem.
type Config = config.Config

// SemaphoreSpec configures a semaphore bulkhead or a shared semaphore
// configuration: BaseConfig, MaxConcurrentCalls, MaxWaitDuration,
// EventBufferSize (0 to 10000, 100 if unset) and Adaptive (an
// adaptive.Config, inherited as a whole). Nil fields are unset.
type SemaphoreSpec = config.SemaphoreSpec

// PoolSpec configures a pool bulkhead or a shared pool configuration:
// BaseConfig, MaxWorkers (Spring's maxThreadPoolSize), CoreWorkers (no
// effect on a Go pool; above MaxWorkers it is refused), QueueCapacity,
// QueueTimeout (maxWaitDuration), KeepAlive, EventBufferSize and Adaptive.
type PoolSpec = config.PoolSpec

// ConfigError is the error of an invalid configuration: File, Line (1-based,
// 0 for values built in code), Path (a key path, or a Go expression such as
// `Semaphores["payment"].MaxConcurrentCalls`), Profile (the profile
// expression of the document it is in) and Msg, which names the instance,
// the field and the value.
type ConfigError = config.Error

// Load reads a YAML configuration, as Spring Boot binds an application.yml:
// resilience4j.bulkhead (semaphore bulkheads) and
// resilience4j.thread-pool-bulkhead (pool bulkheads), each with
// configs.<name> and instances.<name> (or backends.<name>), in nested or
// dotted keys at any depth, with or without the resilience4j prefix. Keys
// may be written in camelCase, kebab-case or snake_case; anchors, aliases
// and merge keys (<<) work. Documents (---) apply in order, later over
// earlier, key by key; one with spring.config.activate.on-profile (or the
// legacy spring.profiles) applies only when its profiles are active
// (spring.profiles.active, overridden by the environment's
// SPRING_PROFILES_ACTIVE). Placeholders ${NAME} and ${NAME:default} resolve
// from the environment, then from the file's properties. Other sections
// are ignored.
//
// Inside the bulkhead sections an unknown key is an error (with the key it
// was probably meant to be), and so is an invalid value or a placeholder
// that resolves to nothing. A file that configures no bulkhead is an error.
// The error joins one [*ConfigError] per problem (up to 20, in line order).
// Load reads at most 4 MiB, and refuses a file whose aliases and merge
// keys expand it beyond one key per byte plus 10,000. docs/configuration.md
// lists every key. A nil r is a bug in the caller: Load panics.
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

// LoadFile reads the configuration in the named file as [Load] does, or as
// a Spring application.properties if its name ends in .properties, and the
// profile files beside it for each active profile ("default" if none):
// config/application.yml reads config/application-prod.yaml, .yml and
// .properties, later over earlier, for profile prod, as Spring does.
func LoadFile(path string) (Config, error) {
	c, _, err := config.LoadFile(path, os.LookupEnv)
	return c, err
}

// spec is what a configuration resolves for one bulkhead: the config of
// its kind (that of the other kind is unused).
type spec struct {
	sem      semaphore.Config
	pool     pool.Config
	size     int              // event buffer size
	adaptive *adaptive.Config // nil: no controller
}

// specOf resolves k's spec from res, and whether res lists it.
func specOf(res *config.Resolved, k key) (spec, bool) {
	if k.kind == bulkhead.Pool {
		c, x, ok := res.Pool(k.name)
		return spec{pool: c, size: x.Buffer, adaptive: x.Adaptive}, ok
	}
	c, x, ok := res.Semaphore(k.name)
	return spec{sem: c, size: x.Buffer, adaptive: x.Adaptive}, ok
}

// limit is sp's MaxConcurrentCalls or MaxWorkers.
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

// newBulkhead creates the bulkhead of kind k that sp describes, with the
// limit n if not 0.
func newBulkhead(k key, sp spec, n int) (handle, error) {
	sp = sp.withLimit(n)
	if k.kind == bulkhead.Pool {
		return pool.New(k.name, sp.pool)
	}
	return semaphore.New(k.name, sp.sem)
}

// syncBulkhead gives b the config sp with the limit n (if not 0), and
// reports whether that changed it.
func syncBulkhead(b handle, sp spec, n int) (bool, error) {
	sp = sp.withLimit(n)
	var err error
	switch b := b.(type) {
	case semaphoreHandle:
		if sp.sem == b.Config() {
			return false, nil
		}
		err = b.Reconfigure(sp.sem)
	case poolHandle:
		if sp.pool == b.Config() {
			return false, nil
		}
		err = b.Reconfigure(sp.pool)
	}
	return err == nil, err
}

// semaphoreHandle and poolHandle are the two kinds of handle as sync uses
// them (tests wrap a bulkhead to hold its Reconfigure).
type (
	semaphoreHandle interface {
		Config() semaphore.Config
		Reconfigure(semaphore.Config) error
	}
	poolHandle interface {
		Config() pool.Config
		Reconfigure(pool.Config) error
	}
)
