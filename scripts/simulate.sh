#!/usr/bin/env bash
# The long ("nightly") run of the deterministic cluster simulation:
#
#   scripts/simulate.sh [SEEDS] [FIRST_SEED]
#
# runs SEEDS seeds (default 100000) from FIRST_SEED (default 1) in a release
# build, as many at once as the machine has cores (SLUICE_SIM_THREADS to
# change that). The test command (scripts/test-all.sh) runs the first 1000.
# A failing seed prints its trace; replay it with
#   SLUICE_SIM_SEED=<seed> cargo test --release --test simulation -- --nocapture
# Output goes to stderr and to the log file printed at the start.
#
# At the end it prints the trace digest of the range: the first 16 hex
# digits of the SHA-256 of the "<seed> <trace-hash>" lines in seed order.
# Two runs of a range on different commits with the same digest ran the
# same simulations event for event (docs/reliability.md, "Bit for bit").
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${1:-100000}
FIRST=${2:-1}
LOG=${SLUICE_SIM_LOG_FILE:-$(mktemp /tmp/sluice-simulate.XXXXXX.log)}
echo "simulate: $SEEDS seeds from $FIRST; log $LOG" >&2
SLUICE_SIM_SEEDS=$SEEDS SLUICE_SIM_FIRST_SEED=$FIRST \
    cargo test --release --test simulation -- --test-threads=1 --nocapture \
    simulated_cluster_keeps_the_invariants_under_faults 2>&1 | tee "$LOG" | grep -v ': ok (' >&2
DIGEST=$({ grep -o 'trace-hash [0-9]* [0-9a-f]*' "$LOG" || true; } | awk '{print $2, $3}' | sort -n -u | sha256sum | cut -c1-16)
echo "simulate: trace digest of seeds $FIRST-$((FIRST + SEEDS - 1)): $DIGEST" >&2
