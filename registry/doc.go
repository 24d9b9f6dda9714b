// Package registry keeps a service's named bulkheads, loads their limits
// from the resilience4j section of a Spring Boot application.yml (as is),
// exports them to Prometheus and serves a JSON status page.
//
// A [Config] holds shared configurations and instances of both kinds
// (semaphores and pools, two namespaces), read with [Load] or [LoadFile] or
// built in code. [New] creates every listed instance; [Registry.Semaphore]
// and [Registry.Pool] get one by name, creating an unlisted one from
// "default" unless Config.Strict. [Registry.RegisterMetrics] exports the
// metrics (docs/metrics.md), [Registry.Handler] serves the status page and
// [Registry.Follow] reloads a file. Get each bulkhead once at start-up and
// keep it; Close the registry on shutdown.
package registry
