#!/usr/bin/env bash
# The standard benchmark matrix on the embedded default (local filesystem
# with fsync): the floor (a bare create-if-absent PUT), produce throughput and
# ack latency for 1 and 16 HTTP clients, end-to-end latency, and memory under
# a sustained overload. Prints a Markdown report on stdout.
#   scripts/bench.sh [DURATION_SEC]
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10}
cargo build --release --quiet
BIN=target/release/sluice
WORK=$(mktemp -d /tmp/sluice-bench.XXXXXX)
PORT=$((20000 + RANDOM % 20000))
URL=http://127.0.0.1:$PORT
cleanup() { [[ -n "${PID:-}" ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

start() {
  "$BIN" serve --node-id bench --data-dir "$WORK/data" --http-addr 127.0.0.1:$PORT --kafka-addr 127.0.0.1:$((PORT + 1)) "$@" >"$WORK/node.log" 2>&1 &
  PID=$!
  for _ in $(seq 100); do curl -sf "$URL/ready" >/dev/null && return; sleep 0.1; done
  echo "node did not start" >&2; cat "$WORK/node.log" >&2; exit 1
}
stop() { kill "$PID"; wait "$PID" || true; PID=; rm -rf "$WORK/data"; }

echo "## Run of $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
echo
echo "Disk under test: $(df -h "$WORK" | awk 'NR==2{print $1" ("$2")"}'). Embedded default: WAL, data objects and metadata log on the local filesystem with fsync."
echo
echo '```'
"$BIN" bench floor --store "file://$WORK/floor" --object-bytes 4096 --count 500
"$BIN" bench floor --store "file://$WORK/floor" --object-bytes 65536 --count 200
start
for producers in 1 16; do
  "$BIN" bench produce --url "$URL" --topic "p$producers" --partitions 4 --producers $producers --record-bytes 100 --duration-sec "$DUR" 2>/dev/null
done
"$BIN" bench produce --url "$URL" --topic big --partitions 4 --producers 16 --record-bytes 1000 --batch 100 --duration-sec "$DUR" 2>/dev/null
"$BIN" bench e2e --url "$URL" --topic e2e --record-bytes 100 --duration-sec "$DUR" 2>/dev/null
"$BIN" bench consume --url "$URL" --topic big --partitions 4 --duration-sec "$DUR" 2>/dev/null
stop
echo '```'
echo
# Memory under overload: a small buffer and large requests from many clients.
start --max-buffered-bytes 16777216 --max-request-bytes 1048576 --flush-interval-sec 3600 --flush-bytes 67108864
"$BIN" bench produce --url "$URL" --topic mem --partitions 8 --producers 32 --record-bytes 10000 --batch 100 --duration-sec "$DUR" --json 2>/dev/null >"$WORK/mem.json" &
BENCH=$!
PEAK=0
while kill -0 $BENCH 2>/dev/null; do
  RSS=$(awk '/VmRSS/{print $2}' /proc/$PID/status)
  (( RSS > PEAK )) && PEAK=$RSS
  sleep 0.2
done
THROTTLED=$(curl -s "$URL/metrics" | awk '/http_requests_total.*status="429"/{s+=$2} END{print s+0}')
echo "Memory under overload (--max-buffered-bytes 16 MiB, 32 producers x 1 MB requests, flushes only under pressure):"
echo "peak RSS $((PEAK / 1024)) MiB; $THROTTLED requests answered 429 throttled; $(python3 -c "import json;d=json.load(open('$WORK/mem.json'));print(f\"{d['records_per_sec']:.0f} records/s ({d['mib_per_sec']:.1f} MiB/s) accepted\")")"
stop
