#!/usr/bin/env bash
# Sluice and the open-source peer tansu side by side, on the same S3 test
# server, with the same librdkafka producer (scripts/bench-kafka.py).
#
#   scripts/bench-peer.sh [--duration SEC] [--rate N] [--out DIR]
#
# Needs the S3 test server and DynamoDB Local (source .services/env after
# `scripts/services.sh up`). Installs tansu 0.6.0 with its object-store
# engine (`cargo install tansu@0.6.0 --features dynostore --locked`, about
# 8 minutes on two cores) into ~/.cache/sluice-peer unless it is there
# already (SLUICE_PEER_ROOT moves it); nothing lands in the repository.
#
# Each broker gets its own bucket on the same radosgw and a topic of 4
# partitions created through Kafka CreateTopics; the producer is
# confluent-kafka with 1 KiB records, acks=all, enable.idempotence=true,
# linger.ms=5: a flood (as fast as acknowledgements allow) and a paced
# run at --rate records/s (default 2000) for ack latency, --duration
# seconds each (default 15). Sluice keeps its metadata in DynamoDB Local;
# tansu keeps everything in its bucket. One JSON line per broker goes to
# DIR/peer.jsonl, and a summary with the ratios to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DUR=15
RATE=2000
OUT=
while (($#)); do
    case $1 in
        --duration) DUR=$2; shift 2 ;;
        --rate) RATE=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        *) echo "usage: $0 [--duration SEC] [--rate N] [--out DIR]" >&2; exit 2 ;;
    esac
done
: "${SLUICE_TEST_S3_ENDPOINT:?source .services/env after scripts/services.sh up}"
: "${SLUICE_TEST_DYNAMODB_ENDPOINT:?source .services/env after scripts/services.sh up}"
: "${AWS_ACCESS_KEY_ID:?}" "${AWS_SECRET_ACCESS_KEY:?}"
REGION=${SLUICE_TEST_S3_REGION:-us-east-1}

PEER_ROOT=${SLUICE_PEER_ROOT:-$HOME/.cache/sluice-peer}
TANSU=$PEER_ROOT/bin/tansu
if [[ ! -x $TANSU ]]; then
    echo "installing tansu 0.6.0 into $PEER_ROOT (about 8 minutes)" >&2
    cargo install tansu@0.6.0 --features dynostore --locked --root "$PEER_ROOT" >&2
fi

source scripts/bench-lib.sh
release_bin
WORK=$(mktemp -d /tmp/sluice-peer.XXXXXX)
OUT=${OUT:-$WORK/out}
mkdir -p "$OUT"
RESULTS=$OUT/peer.jsonl
: >"$RESULTS"
PID=
cleanup() { stop_node; }
trap cleanup EXIT

create_bucket() {
    local code
    code=$(curl -s -o /dev/null -w '%{http_code}' -m 10 -X PUT \
        --aws-sigv4 "aws:amz:$REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
        -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
        "$SLUICE_TEST_S3_ENDPOINT/$1")
    [[ $code == 200 || $code == 409 ]] || { echo "could not create bucket $1 (HTTP $code)" >&2; exit 1; }
}

# measure NAME: the same producer runs against $PORT; one JSON line.
measure() {
    echo "== $1: flood, then $RATE records/s" >&2
    python3 scripts/bench-kafka.py --bootstrap "127.0.0.1:$PORT" --topic peer --partitions 4 \
        --kafka-create --idempotent --linger-ms 5 --record-bytes 1024 --duration "$DUR" \
        --rate "$RATE" --server-pid "$PID" --json |
        jq -c --arg broker "$1" '. + {broker: $broker}' >>"$RESULTS"
    stop_node
}

STAMP=$(date +%s)
# ---------------------------------------------------------------- Sluice
PORT=$(free_port)
HTTP=$(free_port)
BUCKET=${SLUICE_TEST_S3_BUCKET:-sluice-test}
STORES=(--object-store "s3://$BUCKET/peer-$STAMP" --metadata "dynamodb://sluice-peer-$STAMP"
    --s3-endpoint "$SLUICE_TEST_S3_ENDPOINT" --s3-region "$REGION"
    --dynamodb-endpoint "$SLUICE_TEST_DYNAMODB_ENDPOINT")
"$BIN" init --node-id init "${STORES[@]}" >/dev/null
"$BIN" serve --node-id peer --data-dir "$WORK/sluice" --http-addr "127.0.0.1:$HTTP" \
    --kafka-addr "127.0.0.1:$PORT" --shutdown-drain-sec 0 "${STORES[@]}" >"$WORK/sluice.log" 2>&1 &
PID=$!
wait_port "$PORT" "$WORK/sluice.log"
measure sluice

# ---------------------------------------------------------------- tansu
PORT=$(free_port)
PROM=$(free_port)
create_bucket "tansu-peer-$STAMP"
AWS_ENDPOINT=$SLUICE_TEST_S3_ENDPOINT AWS_ALLOW_HTTP=true AWS_DEFAULT_REGION=$REGION \
    "$TANSU" broker --kafka-cluster-id peer \
    --kafka-listener-url "tcp://127.0.0.1:$PORT" --kafka-advertised-listener-url "tcp://127.0.0.1:$PORT" \
    --prometheus-listener-url "tcp://127.0.0.1:$PROM" \
    --storage-engine "s3://tansu-peer-$STAMP/" >"$WORK/tansu.log" 2>&1 &
PID=$!
wait_port "$PORT" "$WORK/tansu.log"
measure tansu

python3 - "$RESULTS" <<'EOF'
import json, sys
runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[r["broker"]] = {x["mode"]: x for x in r["results"]}
def g(b, mode, key, sub=None):
    x = runs.get(b, {}).get(mode, {})
    v = x.get(key)
    return v.get(sub) if sub and isinstance(v, dict) else v
print("| | Sluice | tansu 0.6.0 | Sluice / tansu |")
print("|---|---:|---:|---:|")
for label, mode, key, sub in [
    ("flood, records/s", "unlimited", "records_per_sec", None),
    ("flood, MiB/s", "unlimited", "mib_per_sec", None),
    ("paced, ack p50 ms", "steady", "latency_ms", "p50"),
    ("paced, ack p99 ms", "steady", "latency_ms", "p99"),
    ("paced, records/s achieved", "steady", "records_per_sec", None),
]:
    a, b = g("sluice", mode, key, sub), g("tansu", mode, key, sub)
    ratio = f"{a / b:.2f}" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else "–"
    fa = f"{a:,.1f}" if isinstance(a, (int, float)) else "–"
    fb = f"{b:,.1f}" if isinstance(b, (int, float)) else "–"
    print(f"| {label} | {fa} | {fb} | {ratio} |")
EOF
echo "reports in $RESULTS" >&2
