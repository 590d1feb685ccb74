#!/usr/bin/env bash
# The latency/cost frontier of the WAL PUT budget, written into
# docs/benchmarks.md.
#
#   scripts/bench-frontier.sh [--duration SEC] [--no-docs] [--out DIR]
#
# Needs the S3 test server and DynamoDB Local (source .services/env after
# `scripts/services.sh up`). For each store — the S3 test server as it is,
# and the same server behind the S3-Standard-like latency model
# (`--store-latency-model s3-standard`, src/store/latency.rs) — each budget
# (`--wal-put-rate` off, 4 and 1 PUTs/s, burst 4) and each offered rate (1,
# 10 and 50 MiB/s of 1 KiB records from 16 Kafka producers, acks=all,
# linger 5 ms, 16 partitions), a fresh node runs `sluice bench produce
# --json`; the report carries WAL and data PUTs per GiB and the ack
# percentiles. Reports go to DIR/frontier.jsonl; unless --no-docs they are
# copied to docs/bench-frontier.jsonl and scripts/bench-frontier-report.py
# rewrites the frontier section of docs/benchmarks.md and
# docs/bench-frontier.svg. About 6 minutes at the default 15 s per point.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DUR=15
DOCS=1
OUT=
BUDGETS=(off 4 1)
RATES=(1 10 50)
MODELS=(none s3-standard)
while (($#)); do
    case $1 in
        --duration) DUR=$2; shift 2 ;;
        --no-docs) DOCS=0; shift ;;
        --out) OUT=$2; shift 2 ;;
        --budgets) read -ra BUDGETS <<<"$2"; shift 2 ;;
        --rates) read -ra RATES <<<"$2"; shift 2 ;;
        --models) read -ra MODELS <<<"$2"; shift 2 ;;
        *) echo "usage: $0 [--duration SEC] [--no-docs] [--out DIR] [--budgets 'off 4 1'] [--rates '1 10 50'] [--models 'none s3-standard']" >&2; exit 2 ;;
    esac
done
: "${SLUICE_TEST_S3_ENDPOINT:?source .services/env after scripts/services.sh up}"
: "${SLUICE_TEST_DYNAMODB_ENDPOINT:?source .services/env after scripts/services.sh up}"

source scripts/bench-lib.sh
release_bin
WORK=$(mktemp -d /tmp/sluice-frontier.XXXXXX)
OUT=${OUT:-$WORK/out}
mkdir -p "$OUT"
RESULTS=$OUT/frontier.jsonl
: >"$RESULTS"
PID=
cleanup() {
    stop_node
    rm -rf "$WORK/nodes"
}
trap cleanup EXIT

BUCKET=${SLUICE_TEST_S3_BUCKET:-sluice-test}
REGION=${SLUICE_TEST_S3_REGION:-us-east-1}
RUN=frontier-$(date +%s)-$RANDOM
N=0

# point MODEL BUDGET MIBS: one fresh node, one report.
point() {
    local model=$1 budget=$2 mibs=$3
    N=$((N + 1))
    local dir=$WORK/nodes/$N
    mkdir -p "$dir"
    local stores=(--object-store "s3://$BUCKET/$RUN-$N" --metadata "dynamodb://sluice-$RUN-$N"
        --s3-endpoint "$SLUICE_TEST_S3_ENDPOINT" --s3-region "$REGION"
        --dynamodb-endpoint "$SLUICE_TEST_DYNAMODB_ENDPOINT")
    "$BIN" init --node-id init "${stores[@]}" >/dev/null
    local http kafka
    http=$(free_port)
    kafka=$(free_port)
    "$BIN" serve --node-id frontier --data-dir "$dir/data" --http-addr "127.0.0.1:$http" \
        --kafka-addr "127.0.0.1:$kafka" --shutdown-drain-sec 0 "${stores[@]}" \
        --store-latency-model "$model" --wal-put-rate "$budget" --wal-put-burst 4 >"$dir/node.log" 2>&1 &
    PID=$!
    wait_ready "http://127.0.0.1:$http" "$dir/node.log"
    echo "== model $model, budget $budget, $mibs MiB/s offered" >&2
    "$BIN" bench produce --mode kafka --url "http://127.0.0.1:$http" --bootstrap "127.0.0.1:$kafka" \
        --topic f --partitions 16 --producers 16 --batch 100 --linger-ms 5 --acks all \
        --record-bytes 1024 --rate $((mibs * 1024)) --duration-sec "$DUR" --server-pid "$PID" --json \
        2> >(tail -n 1 >&2) |
        jq -c --arg model "$model" --arg budget "$budget" --argjson mibs "$mibs" \
            '. + {model: $model, budget: $budget, offered_mib_per_sec: $mibs}' >>"$RESULTS"
    stop_node
    rm -rf "$dir"
}

START=$SECONDS
for model in "${MODELS[@]}"; do
    for budget in "${BUDGETS[@]}"; do
        for mibs in "${RATES[@]}"; do
            point "$model" "$budget" "$mibs"
        done
    done
done
echo "frontier took $((SECONDS - START)) s; reports in $RESULTS" >&2
if [[ $DOCS == 1 ]]; then
    cp "$RESULTS" docs/bench-frontier.jsonl
    python3 scripts/bench-frontier-report.py --results docs/bench-frontier.jsonl \
        --doc docs/benchmarks.md --svg docs/bench-frontier.svg \
        --commit "$(git rev-parse --short HEAD)"
fi
