#!/usr/bin/env bash
# Sluice and the open-source peer tansu side by side, on the same S3 test
# server, with the same librdkafka producer (scripts/bench-kafka.py).
#
#   scripts/bench-peer.sh [--duration SEC] [--rate N] [--out DIR] [--docs]
#
# The S3 server is moto (PyPI), started fresh for each broker: tansu's
# object-store engine commits its metadata with `If-Match` PUTs, which the
# Ceph radosgw the other tests use (16.2, Debian) answers with 412 whatever
# the ETag, so tansu cannot run there. moto enforces both `If-Match` and
# `If-None-Match: *`. Its access log counts each broker's requests by method.
# Sluice keeps its metadata in DynamoDB Local (source .services/env after
# `scripts/services.sh up`); tansu keeps everything in its bucket.
#
# Installs, unless there already (SLUICE_PEER_ROOT moves it; nothing lands
# in the repository): tansu 0.6.0 with its object-store engine (`cargo
# install tansu@0.6.0 --features dynostore --locked`, 8-12 minutes on two
# cores) and moto[server] 5.1.18, into ~/.cache/sluice-peer.
#
# Each broker gets a topic of 4 partitions created through Kafka
# CreateTopics; the producer is confluent-kafka with 1 KiB records,
# acks=all, enable.idempotence=true, linger.ms=5: a flood (as fast as
# acknowledgements allow) and a paced run at --rate records/s (default
# 2000) for ack latency, --duration seconds each (default 15). Sluice runs
# twice: with its defaults (the WAL PUT budget of s3://) and with
# `--wal-put-rate off` (latency first). One JSON line per run goes to
# DIR/peer.jsonl; scripts/bench-peer-report.py prints the table with the
# ratios (--docs: writes it into docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DUR=15
RATE=2000
OUT=
DOCS=0
while (($#)); do
    case $1 in
        --duration) DUR=$2; shift 2 ;;
        --rate) RATE=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --docs) DOCS=1; shift ;;
        *) echo "usage: $0 [--duration SEC] [--rate N] [--out DIR] [--docs]" >&2; exit 2 ;;
    esac
done
: "${SLUICE_TEST_DYNAMODB_ENDPOINT:?source .services/env after scripts/services.sh up}"
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-peer} AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-peer}
REGION=us-east-1

PEER_ROOT=${SLUICE_PEER_ROOT:-$HOME/.cache/sluice-peer}
TANSU=$PEER_ROOT/bin/tansu
if [[ ! -x $TANSU ]]; then
    echo "installing tansu 0.6.0 into $PEER_ROOT (about 8 minutes)" >&2
    cargo install tansu@0.6.0 --features dynostore --locked --root "$PEER_ROOT" >&2
fi
MOTO=$PEER_ROOT/moto
if [[ ! -d $MOTO/moto ]]; then
    echo "installing moto[server] 5.1.18 into $MOTO" >&2
    python3 -m pip install -q --target "$MOTO" 'moto[server]==5.1.18' >&2
fi

source scripts/bench-lib.sh
release_bin
WORK=$(mktemp -d /tmp/sluice-peer.XXXXXX)
OUT=${OUT:-$WORK/out}
mkdir -p "$OUT"
RESULTS=$OUT/peer.jsonl
: >"$RESULTS"
PID=
MOTO_PID=
stop_moto() {
    if [[ -n $MOTO_PID ]]; then kill "$MOTO_PID" 2>/dev/null || true; wait "$MOTO_PID" 2>/dev/null || true; fi
    MOTO_PID=
}
cleanup() {
    stop_node
    stop_moto
}
trap cleanup EXIT

# start_moto NAME BUCKET: a fresh moto server with BUCKET; sets S3.
start_moto() {
    local port
    port=$(free_port)
    PYTHONPATH=$MOTO python3 -m moto.server -H 127.0.0.1 -p "$port" >"$WORK/moto-$1.log" 2>&1 &
    MOTO_PID=$!
    S3=http://127.0.0.1:$port
    for _ in $(seq 100); do
        curl -sf -o /dev/null "$S3/" && break
        sleep 0.1
    done
    local code
    code=$(curl -s -o /dev/null -w '%{http_code}' -m 10 -X PUT "$S3/$2")
    [[ $code == 200 ]] || { echo "could not create bucket $2 (HTTP $code)" >&2; exit 1; }
}

# measure NAME: the same producer runs against $PORT; one JSON line, with
# the S3 requests moto served during the runs, by method.
measure() {
    echo "== $1: flood, then $RATE records/s" >&2
    local before
    before=$(wc -l <"$WORK/moto-$1.log")
    python3 scripts/bench-kafka.py --bootstrap "127.0.0.1:$PORT" --topic peer --partitions 4 \
        --kafka-create --idempotent --linger-ms 5 --record-bytes 1024 --duration "$DUR" \
        --rate "$RATE" --server-pid "$PID" --json >"$WORK/$1.json"
    stop_node
    local requests
    requests=$(tail -n +"$((before + 1))" "$WORK/moto-$1.log" |
        grep -oE '"(GET|PUT|POST|DELETE|HEAD) ' | tr -d '" ' | sort | uniq -c |
        jq -Rn '[inputs | capture("(?<n>[0-9]+) (?<m>[A-Z]+)") | {(.m): (.n | tonumber)}] | add // {}')
    jq -c --arg broker "$1" --argjson requests "$requests" '. + {broker: $broker, s3_requests: $requests}' \
        "$WORK/$1.json" >>"$RESULTS"
    stop_moto
}

STAMP=$(date +%s)
# run_sluice NAME [serve flags...]
run_sluice() {
    local name=$1; shift
    start_moto "$name" sluice
    PORT=$(free_port)
    local http stores
    http=$(free_port)
    stores=(--object-store "s3://sluice/$name" --metadata "dynamodb://sluice-$name-$STAMP"
        --s3-endpoint "$S3" --s3-region "$REGION" --dynamodb-endpoint "$SLUICE_TEST_DYNAMODB_ENDPOINT")
    "$BIN" init --node-id init "${stores[@]}" >/dev/null
    "$BIN" serve --node-id peer --data-dir "$WORK/$name" --http-addr "127.0.0.1:$http" \
        --kafka-addr "127.0.0.1:$PORT" --shutdown-drain-sec 0 "${stores[@]}" "$@" >"$WORK/$name.log" 2>&1 &
    PID=$!
    wait_port "$PORT" "$WORK/$name.log"
    measure "$name"
}

run_sluice sluice
run_sluice sluice-no-budget --wal-put-rate off

start_moto tansu tansu
PORT=$(free_port)
AWS_ENDPOINT=$S3 AWS_ALLOW_HTTP=true AWS_DEFAULT_REGION=$REGION \
    "$TANSU" broker --kafka-cluster-id peer \
    --kafka-listener-url "tcp://127.0.0.1:$PORT" --kafka-advertised-listener-url "tcp://127.0.0.1:$PORT" \
    --storage-engine "s3://tansu/" >"$WORK/tansu.log" 2>&1 &
PID=$!
wait_port "$PORT" "$WORK/tansu.log"
measure tansu

if [[ $DOCS == 1 ]]; then
    cp "$RESULTS" docs/bench-peer.jsonl
    python3 scripts/bench-peer-report.py --results docs/bench-peer.jsonl --doc docs/benchmarks.md \
        --commit "$(git rev-parse --short HEAD)"
else
    python3 scripts/bench-peer-report.py --results "$RESULTS"
fi
echo "reports in $RESULTS" >&2
