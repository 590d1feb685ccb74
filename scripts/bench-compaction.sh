#!/usr/bin/env bash
# Compaction throughput and its effect on a concurrent producer.
#
# Each point is a fresh node on the embedded default (local directory)
# with a `compact` topic (min_cleanable_dirty_ratio 0.1), loaded by
# `sluice bench produce` with keyed 1 KiB records over 10,000 keys at a
# steady rate over HTTP. The points differ only in the compactor:
#
#   off        --compaction-interval-sec 0 (never compacts)
#   default    --compaction-interval-sec 1, default I/O rate (32 MiB/s)
#   unlimited  --compaction-interval-sec 1 --compaction-bytes-per-sec 1 GiB
#
# Prints one line per point (ack p50/p99/p999 and what the compactor did,
# from the node's /metrics) and a markdown table at the end.
#
# Usage: scripts/bench-compaction.sh [--duration SEC] [--rate RECORDS_PER_SEC] [--rounds N]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DUR=30
RATE=4000
ROUNDS=2
while (($#)); do
    case $1 in
        --duration) DUR=$2; shift 2 ;;
        --rate) RATE=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        *) echo "usage: $0 [--duration SEC] [--rate RECORDS_PER_SEC] [--rounds N]" >&2; exit 2 ;;
    esac
done

source scripts/bench-lib.sh
release_bin
WORK=$(mktemp -d /tmp/sluice-compaction-bench.XXXXXX)
RESULTS=$WORK/results.jsonl
: >"$RESULTS"
PID=
cleanup() {
    stop_node
    rm -rf "$WORK/node"
}
trap cleanup EXIT

# point NAME [serve flags...]
point() {
    local name=$1; shift
    rm -rf "$WORK/node"
    mkdir -p "$WORK/node"
    sync
    local http kafka url
    http=$(free_port)
    kafka=$(free_port)
    url=http://127.0.0.1:$http
    "$BIN" serve --node-id bench --data-dir "$WORK/node/data" \
        --http-addr "127.0.0.1:$http" --kafka-addr "127.0.0.1:$kafka" \
        --shutdown-drain-sec 0 "$@" >"$WORK/node/node.log" 2>&1 &
    PID=$!
    wait_ready "$url" "$WORK/node/node.log"
    curl -sf -X POST "$url/v1/topics" -H 'content-type: application/json' \
        -d '{"name": "kv", "partitions": 4, "config": {"cleanup_policy": "compact", "min_cleanable_dirty_ratio": 0.1}}' >/dev/null
    echo "== $name" >&2
    "$BIN" bench produce --url "$url" --topic kv --producers 4 --record-bytes 1024 \
        --batch 16 --rate "$RATE" --keys 10000 --duration-sec "$DUR" --server-pid "$PID" --json \
        2> >(tail -n 1 >&2) |
        jq -c --arg point "$name" '. + {point: $point}' | tee -a "$RESULTS" |
        jq -r '"  \(.point): \(.records) records, ack p50 \(.latency_ms.p50) ms, p99 \(.latency_ms.p99) ms, p999 \(.latency_ms.p999) ms; compaction \(.compaction // "none")"' >&2
    stop_node
}

for round in $(seq "$ROUNDS"); do
    point off --compaction-interval-sec 0
    point default --compaction-interval-sec 1
    point unlimited --compaction-interval-sec 1 --compaction-bytes-per-sec 1073741824
done

echo
echo "| compactor | round | records acked | ack p50 ms | ack p99 ms | ack p99.9 ms | compaction input MB | output MB | s in runs | MB/s of input |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
jq -r -s 'to_entries | .[] | .key as $i | .value |
    "| \(.point) | \(($i / 3 | floor) + 1) | \(.records) | \(.latency_ms.p50) | \(.latency_ms.p99) | \(.latency_ms.p999) | " +
    (if .compaction then
        "\(.compaction.bytes_in / 1e6 * 10 | round / 10) | \(.compaction.bytes_out / 1e6 * 10 | round / 10) | \(.compaction.seconds * 100 | round / 100) | \(.compaction.mb_per_sec_in * 10 | round / 10) |"
     else "- | - | - | - |" end)' "$RESULTS"
echo
echo "results: $RESULTS" >&2
