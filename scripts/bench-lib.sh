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

# wait_ready URL LOG: until URL/ready answers; if the node dies or never
# answers, show the end of LOG and exit.
wait_ready() {
    for _ in $(seq 200); do
        curl -sf "$1/ready" >/dev/null && return
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "the node did not start:" >&2
    tail -n 30 "$2" >&2
    exit 1
}

# wait_port PORT LOG: until something listens on PORT (for brokers that have
# no /ready); as wait_ready otherwise.
wait_port() {
    for _ in $(seq 300); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $1), 1)" 2>/dev/null && return
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "nothing listened on port $1:" >&2
    tail -n 30 "$2" >&2
    exit 1
}
