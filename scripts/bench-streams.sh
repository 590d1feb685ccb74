#!/usr/bin/env bash
# 10,000 open streams on one node against a single hot stream's ack latency.
#
#   scripts/bench-streams.sh [--streams N] [--json]
#
# Starts its own node (embedded default, temp dir), measures a hot stream
# (one HTTP producer, 1000 B records, 500/s for 10 s), opens a topic of N
# partitions (default 10,000), measures the node's RSS and idle CPU with
# them open, then the hot stream again. Prints a summary, or with --json
# one JSON object (what `scripts/bench-matrix.sh` collects).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/sluice}
STREAMS=10000
JSON=false
while [[ $# -gt 0 ]]; do
    case $1 in
        --streams) STREAMS=$2; shift 2 ;;
        --json) JSON=true; shift ;;
        *) echo "usage: $0 [--streams N] [--json]" >&2; exit 2 ;;
    esac
done

D=$(mktemp -d /tmp/sluice-streams.XXXXXX)
source "$ROOT/scripts/bench-lib.sh"
HP=$(free_port)
KP=$(free_port)
URL=http://127.0.0.1:$HP
"$BIN" serve --node-id bench --data-dir "$D/data" --http-addr "127.0.0.1:$HP" \
    --kafka-addr "127.0.0.1:$KP" --shutdown-drain-sec 0 >"$D/log" 2>&1 &
PID=$!
cleanup() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$D"; }
trap cleanup EXIT
for _ in $(seq 100); do curl -sf "$URL/ready" >/dev/null && break; sleep 0.1; done
curl -sf "$URL/ready" >/dev/null || { echo "node did not start:" >&2; tail -n 20 "$D/log" >&2; exit 1; }

say() { echo "[streams] $*" >&2; }
rss_kib() { awk '/VmRSS/{print $2}' "/proc/$PID/status"; }
cpu_ticks() { awk '{print $14+$15}' "/proc/$PID/stat"; }
hot() {
    "$BIN" bench produce --url "$URL" --topic hot --producers 1 --record-bytes 1000 \
        --duration-sec 10 --rate 500 --json 2>/dev/null >"$D/$1.json"
}

hot base
RSS_BEFORE=$(rss_kib)
say "hot stream alone: $(python3 -c "import json;print(json.load(open('$D/base.json'))['latency_ms'])"); RSS ${RSS_BEFORE} KiB"
T0=$(date +%s.%N)
code=$(curl -s -XPOST "$URL/v1/topics" -H 'content-type: application/json' \
    -d "{\"name\":\"many\",\"partitions\":$STREAMS}" -o /dev/null -w '%{http_code}')
[[ $code == 201 || $code == 200 ]] || { echo "creating the topic answered $code" >&2; exit 1; }
OPEN=0
for _ in $(seq 600); do
    OPEN=$(curl -s "$URL/v1/topics/many" | python3 -c "import json,sys;d=json.load(sys.stdin);print(sum(1 for p in d['partition_info'] if p['state']=='open'))" || echo 0)
    [[ $OPEN == "$STREAMS" ]] && break
    sleep 0.5
done
OPEN_SEC=$(python3 -c "print(round($(date +%s.%N)-$T0,1))")
say "$OPEN of $STREAMS streams open after $OPEN_SEC s"
sleep 3
RSS_OPEN=$(rss_kib)
C0=$(cpu_ticks)
sleep 10
C1=$(cpu_ticks)
IDLE_CPU=$(python3 -c "print(round(($C1-$C0)/$(getconf CLK_TCK)/10*100,1))")
hot many
RSS_END=$(rss_kib)

python3 - "$D/base.json" "$D/many.json" <<EOF >"$D/report.json"
import json, sys
base, many = (json.load(open(p)) for p in sys.argv[1:3])
def pct(k):
    return round((many["latency_ms"][k] / base["latency_ms"][k] - 1) * 100, 1)
print(json.dumps({
    "streams": $STREAMS,
    "opened": $OPEN,
    "open_sec": $OPEN_SEC,
    "rss_before_kib": $RSS_BEFORE,
    "rss_open_kib": $RSS_OPEN,
    "rss_end_kib": $RSS_END,
    "rss_per_stream_kib": round(($RSS_OPEN - $RSS_BEFORE) / $STREAMS, 2),
    "idle_cpu_pct": $IDLE_CPU,
    "hot": {"rate": base["rate"], "record_bytes": base["record_bytes"], "duration_sec": base["duration_sec"],
            "alone_ms": base["latency_ms"], "with_streams_ms": many["latency_ms"],
            "alone_errors": base["errors"], "with_streams_errors": many["errors"]},
    "degradation_pct": {"p50": pct("p50"), "p99": pct("p99")},
}))
EOF
say "with $OPEN streams open: hot stream $(python3 -c "import json;d=json.load(open('$D/report.json'));print(d['hot']['with_streams_ms'], 'degradation', d['degradation_pct'])")"
if $JSON; then
    cat "$D/report.json"
else
    python3 -m json.tool "$D/report.json"
fi
