#!/usr/bin/env bash
# Runs the comparison benchmarks and regenerates the tables in
# docs/performance.md, the headline in README.md and the figures in docs/choosing.md.
#
#   ./run.sh                      # the default run: 6 interleaved rounds, -cpu=1,2 (+8 for contention)
#   BENCH_COUNT=2 BENCH_TIME=10ms BENCH_FILTER='G1|G6' BENCH_DOCS=none ./run.sh   # a quick look
#
# Environment (flags of cmd/benchrun take the same names in lower case):
#   BENCH_COUNT   rounds (default 6; benchstat needs 6 for a confidence interval)
#   BENCH_TIME    -test.benchtime of each run (default 50ms)
#   BENCH_FILTER  -test.bench pattern (default .)
#   BENCH_CPU     -test.cpu list (default 1,2)
#   BENCH_CONTENTION  pattern also run at -cpu=8 (default ^BenchmarkG[12]_/parallel/; none skips)
#   BENCH_OUT     output directory (default results; with BENCH_DOCS=none a new temporary
#                 directory, so that a quick look never overwrites the committed results/)
#   BENCH_DOCS    files whose <!-- bench:begin NAME --> blocks are rewritten (default
#                 ../docs/performance.md,../docs/choosing.md,../README.md; none skips)
set -euo pipefail
cd "$(dirname "$0")"

gobin="$(go env GOBIN)"
[ -n "$gobin" ] || gobin="$(go env GOPATH | cut -d: -f1)/bin"
export PATH="$gobin:$PATH"
if ! command -v benchstat >/dev/null 2>&1; then
	echo "installing benchstat" >&2
	go install golang.org/x/perf/cmd/benchstat@latest
fi

go run ./cmd/benchrun "$@"
