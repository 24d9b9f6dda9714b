// Package registry keeps a service's named bulkheads, loads their limits
// from YAML (the resilience4j section of a Spring Boot application.yml loads
// as is), exports them to Prometheus and serves a JSON status page.
//
// Use it when a service has more than a couple of dependencies, or when
// operators should tune limits in a file and watch saturation, rejections
// and queueing without reading code. A single bulkhead built with
// semaphore.New or pool.New needs none of this.
//
// A [Config] holds shared named configurations and instances for both kinds
// (semaphores: resilience4j.bulkhead; pools:
// resilience4j.thread-pool-bulkhead), which are two namespaces, as in
// Resilience4j: the same name may be a semaphore and a pool. [Load] and
// [LoadFile] read it from YAML, refusing unknown keys and bad values with
// an error that names the file, the line, the instance, the field and the
// value; it is also a plain struct to fill in from code. [New] builds a
// [Registry] and creates every listed instance; [Registry.Semaphore] and
// [Registry.Pool] get one by name, creating an unlisted one from the
// "default" configuration (or failing, with Config.Strict). Precedence, from
// strongest: the entry's own fields, its baseConfig chain (or "default" when
// it names none), then semaphore.DefaultConfig or pool.DefaultConfig.
// docs/configuration.md lists every key, and the adaptive: block, this
// package's extension to Resilience4j's keys, which attaches an adaptive
// controller (package adaptive) to a bulkhead.
//
// [Registry.RegisterMetrics] registers the bulkheads' metrics on a
// prometheus.Registerer you pass; docs/metrics.md lists them with useful
// PromQL. [Registry.Handler] serves every bulkhead's configuration,
// statistics and (with Config.RecordEvents) recent events as JSON, showing
// names and numbers only.
//
// Get each bulkhead once at start-up and keep it: Semaphore and Pool take a
// lock. Close the registry on shutdown; it closes the pools.
package registry
