#!/usr/bin/env bash
# Kept for old habits: the standard matrix is scripts/bench-matrix.sh, which
# writes docs/benchmarks.md. `scripts/bench.sh [DURATION_SEC]` runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/bench-matrix.sh ${1:+--duration "$1"}
