#!/usr/bin/env bash
# CI for the adapter modules bulkheadgrpc/ and bulkheadotel/: each is a
# nested module with its own go.mod (a replace points at the main module),
# so the main module's go.mod never requires grpc or OpenTelemetry. For each:
# gofmt, go mod tidy unchanged, build, vet, tests under -race, and the gRPC
# example run end to end. Needs only Go; about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

for m in bulkheadgrpc bulkheadotel; do
  echo "== $m"
  (
    cd "$m"
    unformatted=$(gofmt -l .)
    if [ -n "$unformatted" ]; then
      echo "gofmt would change:"; echo "$unformatted"; exit 1
    fi
    go mod tidy -diff
    go build ./...
    go vet ./...
    go test -race -count=1 ./...
  )
done

echo "== bulkheadgrpc example, end to end"
(cd bulkheadgrpc && go run ./example)

echo "== the main module requires neither grpc nor opentelemetry"
if grep -E 'google.golang.org/grpc|go.opentelemetry.io' go.mod; then
  echo "the main module's go.mod must not require the adapters' dependencies"; exit 1
fi
