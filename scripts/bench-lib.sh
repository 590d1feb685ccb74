# Shared by the bench scripts: `source scripts/bench-lib.sh` after `cd` to
# the repository. The node under test is $PID (empty when none runs).

# A free TCP port on loopback.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Build the release binary once and set BIN to it.
release_bin() {
    cargo build --release --quiet
    BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/sluice
}

# Stop the node under test, if any.
stop_node() {
    if [[ -n ${PID:-} ]]; then
        kill "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    fi
    PID=
}

# wait_for LOG WHAT CMD...: run CMD every 0.1 s (for up to 30 s) until it
# succeeds; if the node dies or time runs out, say WHAT, show the end of
# LOG and exit.
wait_for() {
    local log=$1 what=$2
    shift 2
    for _ in $(seq 300); do
        "$@" 2>/dev/null && return
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "$what:" >&2
    tail -n 30 "$log" >&2
    exit 1
}

# wait_ready URL LOG: until URL/ready answers.
wait_ready() { wait_for "$2" "the node did not start" curl -sf -o /dev/null "$1/ready"; }

# wait_port PORT LOG: until something listens on PORT (for brokers that have
# no /ready).
wait_port() {
    wait_for "$2" "nothing listened on port $1" \
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $1), 1)"
}
