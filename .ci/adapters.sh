#!/usr/bin/env bash
# CI for the adapter modules bulkheadgrpc/ and bulkheadotel/: each is a
# nested module with its own go.mod, so the main module's go.mod never
# requires grpc or OpenTelemetry. Each requires the main module at the
# version it is to be tagged with (v0.3.0); the go.work at the root makes
# this checkout that version. For each: gofmt, go mod tidy unchanged, build,
# vet, tests under -race, and the gRPC example run end to end. Needs only
# Go; about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
root=$(pwd)

# go mod tidy ignores go.work and would fetch the main module's tag, which
# may not exist yet: tidy a copy of go.mod and go.sum that takes the main
# module from this checkout, and compare it, less that replace, with them.
tidy_unchanged() {
  local tmp; tmp=$(mktemp -d)
  cp go.mod go.sum "$tmp/"
  go mod edit -modfile="$tmp/go.mod" -replace=github.com/bulkhead-go/bulkhead="$root"
  GOWORK=off go mod tidy -modfile="$tmp/go.mod"
  go mod edit -modfile="$tmp/go.mod" -dropreplace=github.com/bulkhead-go/bulkhead
  diff -u go.mod "$tmp/go.mod" && diff -u go.sum "$tmp/go.sum" || {
    echo "go mod tidy would change $(basename "$(pwd)")/go.mod or go.sum"; rm -rf "$tmp"; exit 1; }
  rm -rf "$tmp"
}

for m in bulkheadgrpc bulkheadotel; do
  echo "== $m"
  (
    cd "$m"
    unformatted=$(gofmt -l .)
    if [ -n "$unformatted" ]; then
      echo "gofmt would change:"; echo "$unformatted"; exit 1
    fi
    tidy_unchanged
    go build ./...
    go vet ./...
    go test -race -count=1 ./...
  )
done

echo "== go blocks about the adapters in README.md and docs/*.md compile in their module"
# Blocks that name the module's package, and every block of the module's own
# page (docs/grpc.md for bulkheadgrpc), are compiled inside that module. A
# block that starts with a package clause is a whole file; any other is a
# fragment, compiled as a function body under the imports listed (each line:
# name, import path, an expression that keeps the import used).
check_blocks() { # module directory, its own page or "", the imports
  local mod=$1 page=$2 imports=$3 dir="$1/_doccheck" n=0 f pkg all
  rm -rf "$dir" && mkdir -p "$dir"
  for f in README.md docs/*.md; do
    all=0; [ "$f" = "$page" ] && all=1
    awk -v dir="$dir" -v word="$mod" -v all="$all" -v src="$(basename "$f" .md)" '
      /^```go[[:space:]]*$/ { inblock = 1; body = ""; next }
      inblock && /^```[[:space:]]*$/ {
        inblock = 0
        if (!all && index(body, word ".") == 0) next
        n++; file = dir "/" src "_" n ".txt"
        printf "%s", body > file; close(file); next
      }
      inblock { body = body $0 "\n" }
    ' "$f"
  done
  for f in "$dir"/*.txt; do
    [ -e "$f" ] || continue
    n=$((n + 1))
    pkg="$dir/b$n"
    mkdir -p "$pkg"
    if grep -qE '^package ' "$f"; then
      cp "$f" "$pkg/main.go"
    else
      {
        echo "package doccheck"
        echo "import ("
        echo "$imports" | awk 'NF { print $1, "\"" $2 "\"" }'
        echo ")"
        echo "$imports" | awk 'NF { print "var _ = " $3 }'
        echo "func _() {"
        cat "$f"
        echo "}"
      } > "$pkg/doc.go"
    fi
    echo "  $(basename "$f" .txt)"
    (cd "$mod" && go vet "./_doccheck/b$n") || { rm -rf "$dir"; exit 1; }
  done
  rm -rf "$dir"
  echo "  $mod: $n block(s) compiled"
}
check_blocks bulkheadgrpc docs/grpc.md '
context context context.Background
errors errors errors.Is
fmt fmt fmt.Println
log log log.Fatal
time time time.Second
bulkhead github.com/bulkhead-go/bulkhead bulkhead.ErrBulkheadFull
bulkheadgrpc github.com/bulkhead-go/bulkhead/bulkheadgrpc bulkheadgrpc.All
registry github.com/bulkhead-go/bulkhead/registry registry.Config{}
semaphore github.com/bulkhead-go/bulkhead/semaphore semaphore.New
grpc google.golang.org/grpc grpc.NewClient
codes google.golang.org/grpc/codes codes.OK
insecure google.golang.org/grpc/credentials/insecure insecure.NewCredentials
status google.golang.org/grpc/status status.Code
'
check_blocks bulkheadotel '' '
context context context.Background
log log log.Fatal
bulkhead github.com/bulkhead-go/bulkhead bulkhead.ErrBulkheadFull
bulkheadotel github.com/bulkhead-go/bulkhead/bulkheadotel bulkheadotel.Register
registry github.com/bulkhead-go/bulkhead/registry registry.Config{}
semaphore github.com/bulkhead-go/bulkhead/semaphore semaphore.New
metric go.opentelemetry.io/otel/metric metric.WithUnit
otel go.opentelemetry.io/otel otel.GetMeterProvider
attribute go.opentelemetry.io/otel/attribute attribute.String
'

echo "== bulkheadgrpc example, end to end"
(cd bulkheadgrpc && go run ./example)

echo "== the main module requires neither grpc nor opentelemetry"
if grep -E 'google.golang.org/grpc|go.opentelemetry.io' go.mod; then
  echo "the main module's go.mod must not require the adapters' dependencies"; exit 1
fi
