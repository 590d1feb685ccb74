#!/usr/bin/env bash
# The standard benchmark matrix, written into docs/benchmarks.md.
#
#   scripts/bench-matrix.sh [--duration SEC] [--no-s3] [--no-docs] [--out DIR]
#
# Builds the release binary, then for every point of the matrix starts a
# fresh node (`sluice serve`, loopback ports picked free) and runs
# `sluice bench ... --json` against it with the floor measured in the same
# run (--floor-store on the node's own store) and the node's CPU and memory
# sampled (--server-pid). The matrix:
#
#   embedded default (local filesystem with fsync, temp dir):
#     HTTP produce, records of 100 B / 1 KiB / 16 KiB x
#       lone client (1 producer, 1 record per request, 1 partition),
#       16 clients (1 record per request, 4 partitions),
#       saturation (16 producers x 100 records per request, 4 partitions);
#     consume of the 1 KiB saturation topic (HTTP and Kafka);
#     Kafka produce, 1 KiB, acks=all, 4 partitions: unlimited, and a steady
#       2000 records/s with linger 5 ms; e2e at the steady rate (Kafka) and
#       for a lone HTTP client; memory under an HTTP overload (a 16 MiB
#       buffer, 32 producers of 1 MB requests: 429s expected);
#   S3 test server (radosgw, with DynamoDB Local for metadata), when
#   SLUICE_TEST_S3_ENDPOINT and SLUICE_TEST_DYNAMODB_ENDPOINT are set (source
#   .services/env after `scripts/services.sh up`), a smaller matrix: HTTP 1 KiB
#   lone / 16 clients / saturation, Kafka 1 KiB unlimited and steady;
#   on each backend, `sluice bench failover`: kill -9 and SIGTERM of a
#   partition owner in a 3-node cluster (--failover-rounds, default 3, with
#   100 background appends/s read back at the end) and WAL recovery of
#   --recovery-mib (default 256) MiB left unflushed;
#   on the embedded default, scripts/bench-streams.sh: a hot stream's ack
#   latency alone and with 10,000 open streams, and RSS per open stream.
#
# Every report goes to DIR/results.jsonl (default: a temp dir, printed);
# unless --no-docs, it is copied to docs/bench-matrix-results.jsonl (with
# docs/bench-matrix-machine.json) and scripts/bench-report.py rewrites the
# generated section of docs/benchmarks.md (between its marker comments) and
# docs/bench-latency.svg from them.
# SLUICE_BENCH_DURATION (or --duration) sets the seconds per point (default 5);
# the whole matrix takes about 6 minutes at 5 s (3 of them failover).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DUR=${SLUICE_BENCH_DURATION:-5}
FAILOVER_ROUNDS=3
RECOVERY_MIB=256
S3=1
DOCS=1
OUT=
while (($#)); do
    case $1 in
        --duration) DUR=$2; shift 2 ;;
        --failover-rounds) FAILOVER_ROUNDS=$2; shift 2 ;;
        --recovery-mib) RECOVERY_MIB=$2; shift 2 ;;
        --no-s3) S3=0; shift ;;
        --no-docs) DOCS=0; shift ;;
        --out) OUT=$2; shift 2 ;;
        *) echo "usage: $0 [--duration SEC] [--failover-rounds N] [--recovery-mib MIB] [--no-s3] [--no-docs] [--out DIR]" >&2; exit 2 ;;
    esac
done

source scripts/bench-lib.sh
release_bin
WORK=$(mktemp -d /tmp/sluice-matrix.XXXXXX)
OUT=${OUT:-$WORK/out}
mkdir -p "$OUT"
RESULTS=$OUT/results.jsonl
FAILOVER=$OUT/failover.jsonl
STREAMS_REPORT=$OUT/streams.json
: >"$RESULTS"
: >"$FAILOVER"
PID=
cleanup() {
    stop_node
    rm -rf "$WORK/nodes"
}
trap cleanup EXIT

# start LABEL [serve flags...]: a fresh node with its own data dir.
start() {
    local label=$1; shift
    NODE_DIR=$WORK/nodes/$label
    mkdir -p "$NODE_DIR"
    # The previous point may have left gigabytes of dirty pages; their
    # writeback would stall this point's fsyncs (one such stall put an
    # embedded steady-rate p99 at 92 ms where quiet runs measure 10-14 ms).
    sync
    HTTP_PORT=$(free_port)
    KAFKA_PORT=$(free_port)
    URL=http://127.0.0.1:$HTTP_PORT
    BOOTSTRAP=127.0.0.1:$KAFKA_PORT
    "$BIN" serve --node-id bench --data-dir "$NODE_DIR/data" \
        --http-addr "127.0.0.1:$HTTP_PORT" --kafka-addr "$BOOTSTRAP" \
        --shutdown-drain-sec 0 "$@" >"$NODE_DIR/node.log" 2>&1 &
    PID=$!
    wait_ready "$URL" "$NODE_DIR/node.log"
}

stop() {
    stop_node
    rm -rf "$NODE_DIR"
}

# point BACKEND NAME FLOOR_STORE bench-args...: one report, labelled, appended
# (FLOOR_STORE "-": no floor, for reads).
point() {
    local backend=$1 name=$2 floor=$3; shift 3
    echo "== $backend: $name" >&2
    local floor_args=()
    if [[ $floor != - ]]; then floor_args=(--floor-store "$floor" "${FLOOR_FLAGS[@]}"); fi
    "$BIN" bench "$@" --url "$URL" --bootstrap "$BOOTSTRAP" --duration-sec "$DUR" \
        --server-pid "$PID" --json "${floor_args[@]}" \
        2> >(tail -n 1 >&2) |
        jq -c --arg backend "$backend" --arg name "$name" '. + {backend: $backend, point: $name}' >>"$RESULTS"
}

# failover BACKEND [serve flags...]: `sluice bench failover` (its own 3-node
# cluster and its own recovery node), one report, labelled, appended.
failover() {
    local backend=$1; shift
    echo "== $backend: failover (kill -9, SIGTERM, WAL recovery)" >&2
    local serve=()
    for f in "$@"; do serve+=("--serve-arg=$f"); done
    mkdir -p "$WORK/failover"
    "$BIN" bench failover --rounds "$FAILOVER_ROUNDS" --recovery-mib "$RECOVERY_MIB" \
        --data-dir "$WORK/failover" "${serve[@]}" --json 2> >(tail -n 3 >&2) |
        jq -c --arg backend "$backend" '. + {backend: $backend}' >>"$FAILOVER"
}

SIZES=(100 1024 16384)
size_name() { case $1 in 100) echo "100 B" ;; 1024) echo "1 KiB" ;; 16384) echo "16 KiB" ;; esac; }

# ---------------------------------------------------------------- embedded default
FLOOR_FLAGS=()
embedded() {
    for size in "${SIZES[@]}"; do
        local s; s=$(size_name "$size")
        start "lone-$size"
        point embedded "HTTP $s lone client" "file://$NODE_DIR/data/floor" produce --mode http \
            --topic lone --partitions 1 --producers 1 --batch 1 --record-bytes "$size"
        stop
        start "c16-$size"
        point embedded "HTTP $s 16 clients" "file://$NODE_DIR/data/floor" produce --mode http \
            --topic c16 --partitions 4 --producers 16 --batch 1 --record-bytes "$size"
        stop
        start "sat-$size"
        point embedded "HTTP $s saturation" "file://$NODE_DIR/data/floor" produce --mode http \
            --topic sat --partitions 4 --producers 16 --batch 100 --record-bytes "$size"
        if [[ $size == 1024 ]]; then
            point embedded "HTTP consume (1 KiB saturation topic)" - consume \
                --mode http --topic sat --record-bytes "$size"
            point embedded "Kafka consume (1 KiB saturation topic)" - consume \
                --mode kafka --topic sat --record-bytes "$size"
        fi
        stop
    done
    start kafka-unlimited
    point embedded "Kafka 1 KiB acks=all unlimited" "file://$NODE_DIR/data/floor" produce --mode kafka \
        --topic k --partitions 4 --producers 1 --batch 500 --max-in-flight 5 --acks all --record-bytes 1024
    stop
    start kafka-steady
    point embedded "Kafka 1 KiB acks=all steady 2000/s" "file://$NODE_DIR/data/floor" produce --mode kafka \
        --topic k --partitions 4 --producers 1 --batch 100 --linger-ms 5 --rate 2000 --acks all --record-bytes 1024
    stop
    start kafka-e2e
    point embedded "Kafka 1 KiB e2e steady 2000/s" "file://$NODE_DIR/data/floor" e2e --mode kafka \
        --topic k --partitions 4 --producers 1 --batch 100 --linger-ms 5 --rate 2000 --acks all --record-bytes 1024
    stop
    start http-e2e
    point embedded "HTTP 1 KiB e2e lone client" "file://$NODE_DIR/data/floor" e2e --mode http \
        --topic e --partitions 1 --producers 1 --batch 1 --record-bytes 1024
    stop
    # Memory under overload: a small buffer, flushes only under pressure,
    # and more than the node can take; expect 429s and a bounded RSS.
    start overload --max-buffered-bytes 16777216 --max-request-bytes 1048576 \
        --flush-interval-sec 3600 --flush-bytes 67108864
    point embedded "HTTP 10 kB overload, 16 MiB buffer" \
        "file://$NODE_DIR/data/floor" produce --mode http \
        --topic mem --partitions 8 --producers 32 --batch 100 --record-bytes 10000
    stop
    echo "== embedded: 10,000 open streams against a hot stream" >&2
    sync
    BIN=$BIN scripts/bench-streams.sh --json >"$STREAMS_REPORT"
    failover embedded
}

# ---------------------------------------------------------------- S3 test server
s3() {
    local bucket=${SLUICE_TEST_S3_BUCKET:-sluice-test}
    local region=${SLUICE_TEST_S3_REGION:-us-east-1}
    local run; run=bench-$(date +%s)-$RANDOM
    local n=0
    FLOOR_FLAGS=(--s3-endpoint "$SLUICE_TEST_S3_ENDPOINT" --s3-region "$region")
    s3_start() {
        n=$((n + 1))
        local flags=(--object-store "s3://$bucket/$run-$n" --metadata "dynamodb://sluice-$run-$n"
            --s3-endpoint "$SLUICE_TEST_S3_ENDPOINT" --s3-region "$region"
            --dynamodb-endpoint "$SLUICE_TEST_DYNAMODB_ENDPOINT")
        "$BIN" init --node-id init "${flags[@]}" >/dev/null
        start "s3-$1" "${flags[@]}"
    }
    local floor="s3://$bucket/$run-floor"
    s3_start lone
    point s3 "HTTP 1 KiB lone client" "$floor" produce --mode http \
        --topic lone --partitions 1 --producers 1 --batch 1 --record-bytes 1024
    stop
    s3_start c16
    point s3 "HTTP 1 KiB 16 clients" "$floor" produce --mode http \
        --topic c16 --partitions 4 --producers 16 --batch 1 --record-bytes 1024
    stop
    s3_start sat
    point s3 "HTTP 1 KiB saturation" "$floor" produce --mode http \
        --topic sat --partitions 4 --producers 16 --batch 100 --record-bytes 1024
    stop
    s3_start kafka-unlimited
    point s3 "Kafka 1 KiB acks=all unlimited" "$floor" produce --mode kafka \
        --topic k --partitions 4 --producers 1 --batch 500 --max-in-flight 5 --acks all --record-bytes 1024
    stop
    s3_start kafka-steady
    point s3 "Kafka 1 KiB acks=all steady 2000/s" "$floor" produce --mode kafka \
        --topic k --partitions 4 --producers 1 --batch 100 --linger-ms 5 --rate 2000 --acks all --record-bytes 1024
    stop
    FLOOR_FLAGS=()
    # One table for every failover scenario; `{run}` keeps each scenario's
    # cluster apart within it.
    "$BIN" init --node-id init --metadata "dynamodb://sluice-$run-failover" \
        --dynamodb-endpoint "$SLUICE_TEST_DYNAMODB_ENDPOINT" --object-store "s3://$bucket/$run-failover-init" \
        --s3-endpoint "$SLUICE_TEST_S3_ENDPOINT" --s3-region "$region" >/dev/null
    failover s3 "--object-store=s3://$bucket/{run}" "--metadata=dynamodb://sluice-$run-failover/{run}" \
        "--s3-endpoint=$SLUICE_TEST_S3_ENDPOINT" "--s3-region=$region" \
        "--dynamodb-endpoint=$SLUICE_TEST_DYNAMODB_ENDPOINT"
}

# ---------------------------------------------------------------- machine
machine() {
    local dev
    dev=$(df --output=source "$WORK" | tail -n 1)
    jq -n \
        --arg date "$(date -u +%Y-%m-%dT%H:%MZ)" \
        --arg commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
        --arg cpu "$(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)" \
        --argjson cores "$(nproc)" \
        --argjson mem_gib "$(awk '/MemTotal/{printf "%.1f", $2/1048576}' /proc/meminfo)" \
        --arg disk "$dev ($(df -h --output=size "$WORK" | tail -n 1 | tr -d ' '), $(df --output=fstype "$WORK" | tail -n 1), rotational=$(cat "/sys/block/$(basename "$dev" | sed 's/[0-9]*$//')/queue/rotational" 2>/dev/null || echo '?'))" \
        --arg kernel "$(uname -r)" \
        --arg rustc "$(rustc --version)" \
        --argjson duration "$DUR" \
        --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
        --arg s3 "${SLUICE_TEST_S3_ENDPOINT:+radosgw (Ceph $(ceph --version 2>/dev/null | awk '{print $3}'), memstore OSD) at $SLUICE_TEST_S3_ENDPOINT with DynamoDB Local}" \
        '{date: $date, commit: $commit, cpu: $cpu, cores: $cores, mem_gib: $mem_gib, disk: $disk, kernel: $kernel, rustc: $rustc, duration_sec: $duration, s3: $s3, load_start: $load}'
}

START=$SECONDS
machine >"$OUT/machine.json"
embedded
if [[ $S3 == 1 && -n ${SLUICE_TEST_S3_ENDPOINT:-} && -n ${SLUICE_TEST_DYNAMODB_ENDPOINT:-} ]]; then
    s3
elif [[ $S3 == 1 ]]; then
    echo "S3 test server not configured (source .services/env after scripts/services.sh up): embedded default only" >&2
fi
jq --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" --argjson took $((SECONDS - START)) \
    '. + {load_end: $load, took_sec: $took}' "$OUT/machine.json" >"$OUT/machine.json.tmp"
mv "$OUT/machine.json.tmp" "$OUT/machine.json"
echo "matrix took $((SECONDS - START)) s; reports in $RESULTS" >&2
if [[ $DOCS == 1 ]]; then
    # The raw reports stay beside the doc, so it can be regenerated from them.
    cp "$RESULTS" docs/bench-matrix-results.jsonl
    cp "$FAILOVER" docs/bench-matrix-failover.jsonl
    cp "$STREAMS_REPORT" docs/bench-matrix-streams.json
    cp "$OUT/machine.json" docs/bench-matrix-machine.json
    python3 scripts/bench-report.py --results docs/bench-matrix-results.jsonl \
        --failover docs/bench-matrix-failover.jsonl \
        --streams docs/bench-matrix-streams.json \
        --machine docs/bench-matrix-machine.json --doc docs/benchmarks.md --svg docs/bench-latency.svg
fi
