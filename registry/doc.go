// Package registry keeps a service's named bulkheads, loads their limits
// from the resilience4j section of a Spring Boot application.yml (as is),
// exports them to Prometheus and serves a JSON status page.
//
// A [Config], read with [Load] or [LoadFile] or built in code, holds shared
// configurations and instances of both kinds (semaphores and pools, two
// namespaces). [New] creates every listed instance, and [Registry.Semaphore]
// and [Registry.Pool] get one by name: get each once at start-up and keep
// it, and Close the registry on shutdown.
package registry
