#!/usr/bin/env bash
# Requests an idle node makes, per hour, by store and operation.
#
#   scripts/bench-idle.sh [--seconds N] [--bin PATH] [-- serve flags...]
#
# Starts one node (`sluice serve`, its own data dir, loopback ports; with
# no serve flags on the embedded default), waits for it to settle (10 s),
# then reads its /metrics twice, --seconds apart (default 120), with no
# client writing, and prints one JSON object: object-store requests per
# hour by store and operation, DynamoDB requests per hour by operation, the
# total without DELETEs, and DELETEs on their own (WAL truncation and GC
# work off what a load left behind; the issue counts them apart).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=120
BIN=
while (($#)); do
    case $1 in
        --seconds) SECS=$2; shift 2 ;;
        --bin) BIN=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "usage: $0 [--seconds N] [--bin PATH] [-- serve flags...]" >&2; exit 2 ;;
    esac
done
source scripts/bench-lib.sh
if [[ -z $BIN ]]; then
    release_bin
fi
WORK=$(mktemp -d /tmp/sluice-idle.XXXXXX)
PID=
cleanup() {
    stop_node
    rm -rf "$WORK"
}
trap cleanup EXIT
HTTP=$(free_port)
KAFKA=$(free_port)
"$BIN" serve --node-id idle --data-dir "$WORK/data" --http-addr "127.0.0.1:$HTTP" \
    --kafka-addr "127.0.0.1:$KAFKA" "$@" >"$WORK/node.log" 2>&1 &
PID=$!
wait_ready "http://127.0.0.1:$HTTP" "$WORK/node.log"
sleep 10
curl -sf "http://127.0.0.1:$HTTP/metrics" >"$WORK/m0"
sleep "$SECS"
curl -sf "http://127.0.0.1:$HTTP/metrics" >"$WORK/m1"
python3 - "$WORK/m0" "$WORK/m1" "$SECS" <<'EOF'
import json, re, sys
def load(path):
    out = {}
    for line in open(path):
        m = re.match(r'(sluice_object_store_requests_total|sluice_meta_requests_total)\{(.*)\} (\S+)$', line.strip())
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            key = (m.group(1), labels.get("store", "dynamodb"), labels["op"])
            out[key] = out.get(key, 0.0) + float(m.group(3))
    return out
a, b, secs = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
per_hour = {}
for key, v in b.items():
    d = (v - a.get(key, 0.0)) * 3600 / secs
    if d:
        per_hour[f"{key[1]} {key[2]}"] = round(d)
deletes = sum(v for k, v in per_hour.items() if k.endswith(" delete"))
print(json.dumps({
    "seconds": secs,
    "per_hour": dict(sorted(per_hour.items())),
    "total_per_hour_without_deletes": sum(per_hour.values()) - deletes,
    "deletes_per_hour": deletes,
}))
EOF
