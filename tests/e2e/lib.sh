# tests/e2e/lib.sh — the end-to-end harness: real broker, real workers, real
# client, on 127.0.0.1. Source it, then use the functions below. Everything
# started is killed on exit; every test is bounded in time.
#
#   e2e_start_broker [ARGS...]   sets BROKER_PID, URL, WORKERS_EP (retries ports);
#                                with E2E_HTTP=1 also --http, and HTTP_PORT, HTTP_URL
#   e2e_restart_broker [ARGS...] same ports, new process
#   e2e_start_worker [ARGS...]   sets LAST_PID
#   e2e_wait_workers N           until the broker has N workers (or fails)
#   e2e_start_redis              a redis-server on 127.0.0.1:$RPORT (picked the first
#                                time; the same port again after a kill), sets REDIS_PID
#   check NAME EXPECTED ACTUAL   counts a pass or a failure
#   e2e_finish                   prints "N passed, N failed"; exit status 1 on failure
set -u
: "${JRPC_BIN:?set JRPC_BIN to the build/bin directory}"
E2E_TMP=$(mktemp -d /tmp/jrpc-e2e.XXXXXX)
E2E_PIDS=()
E2E_PASS=0
E2E_FAIL=0
BROKER_PID=
JRPC="$JRPC_BIN/jrpc"

# shellcheck source=own.sh
source "$(dirname "${BASH_SOURCE[0]}")/own.sh"

e2e_cleanup() {
    for p in "${E2E_PIDS[@]}"; do e2e_own "$p" && kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    if [ "$E2E_FAIL" -gt 0 ] || [ -n "${E2E_KEEP:-}" ]; then
        for f in "$E2E_TMP"/*.log; do
            [ -f "$f" ] || continue
            echo "---- $f (last 40 lines)"; tail -n 40 "$f"
        done
    fi
    rm -rf "$E2E_TMP"
}
trap e2e_cleanup EXIT
trap 'exit 3' INT TERM

check() {
    local name=$1 expected=$2 actual=$3
    if [ "$expected" == "$actual" ]; then
        E2E_PASS=$((E2E_PASS + 1))
        echo "ok   $name"
    else
        E2E_FAIL=$((E2E_FAIL + 1))
        echo "FAIL $name"
        echo "  expected: $expected"
        echo "  actual:   $actual"
    fi
}

# Waits up to $2 seconds (default 10) for the command in $1 to succeed.
e2e_wait_for() {
    local cond=$1 secs=${2:-10} i
    for ((i = 0; i < secs * 20; i++)); do
        eval "$cond" && return 0
        sleep 0.05
    done
    return 1
}

# Below Linux's ephemeral range (32768-60999), so that no client's own
# port can take it; the start functions retry on a collision anyway.
e2e_pick_port() {
    echo $((10000 + (RANDOM * 32768 + RANDOM + $$) % 22000))
}

# A port the kernel just gave and took back (its ephemeral range, where no
# test's broker listens): for "nothing listens there", or for a server
# that cannot be told to bind port 0.
e2e_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

e2e_broker_up() {
    local want=2
    [ -n "${E2E_HTTP:-}" ] && want=3
    kill -0 "$BROKER_PID" 2>/dev/null &&
        [ "$(grep -c 'event=listening' "$E2E_TMP/broker.log" 2>/dev/null)" -ge $want ]
}

e2e_launch_broker() {
    : > "$E2E_TMP/broker.log"
    local http=(--http none)
    [ -n "${E2E_HTTP:-}" ] && http=(--http "127.0.0.1:$HTTP_PORT")
    "$JRPC_BIN/jrpc-broker" --zmq "$URL" --workers "$WORKERS_EP" "${http[@]}" \
        --log-level "${E2E_LOG_LEVEL:-info}" "$@" >>"$E2E_TMP/broker.log" 2>&1 &
    BROKER_PID=$!
    E2E_PIDS+=("$BROKER_PID")
    e2e_wait_for e2e_broker_up 10
}

# A _libzmq variant (JRPC_ZMQ_ENGINE or JRPC_WORKERS_ENGINE=libzmq) that
# ran on the native engine would test nothing: its broker must say so.
e2e_check_engines() {
    local side var
    for side in workers front_zmq; do
        var=JRPC_WORKERS_ENGINE
        [ $side = front_zmq ] && var=JRPC_ZMQ_ENGINE
        [ -n "${!var:-}" ] || continue
        check "$var: comp=$side listens on engine=${!var}" 1 \
            "$(grep -c "comp=$side event=listening .*engine=${!var}" "$E2E_TMP/broker.log")"
    done
}

e2e_start_broker() {
    local try
    for try in 1 2 3 4 5 6 7 8; do
        local zp wp
        zp=$(e2e_pick_port); wp=$((zp + 1))
        URL="tcp://127.0.0.1:$zp"
        WORKERS_EP="tcp://127.0.0.1:$wp"
        HTTP_PORT=$((zp + 2))
        HTTP_URL="http://127.0.0.1:$HTTP_PORT"
        export JRPC_URL=$URL
        if e2e_launch_broker "$@"; then e2e_check_engines; return 0; fi
        kill -9 "$BROKER_PID" 2>/dev/null; wait "$BROKER_PID" 2>/dev/null
    done
    echo "could not start the broker"; cat "$E2E_TMP/broker.log"; exit 1
}

# The admin listener's URL, from the broker's log: start it with
# --admin 127.0.0.1:0 (the kernel's port; a picked one may be another test's).
e2e_admin_url() {
    echo "http://$(grep -o 'comp=admin event=listening endpoint=admin://[0-9.]*:[0-9]*' \
        "$E2E_TMP/broker.log" | tail -n 1 | sed 's|.*admin://||')"
}

e2e_restart_broker() {
    kill -9 "$BROKER_PID" 2>/dev/null; wait "$BROKER_PID" 2>/dev/null
    local try
    for try in 1 2 3 4 5 6 7 8 9 10; do
        e2e_launch_broker "$@" && return 0
        kill -9 "$BROKER_PID" 2>/dev/null; wait "$BROKER_PID" 2>/dev/null
        sleep 0.2
    done
    echo "could not restart the broker"; cat "$E2E_TMP/broker.log"; exit 1
}

E2E_NWORKERS=0
e2e_start_worker() {
    E2E_NWORKERS=$((E2E_NWORKERS + 1))
    "$JRPC_BIN/jrpc-worker" --connect "$WORKERS_EP" "$@" \
        >>"$E2E_TMP/worker$E2E_NWORKERS.log" 2>&1 &
    LAST_PID=$!
    E2E_PIDS+=("$LAST_PID")
}

# The broker logs workers=N whenever a worker comes or goes; the last counts.
e2e_workers() {
    grep -o 'event=worker_[a-z]* .*workers=[0-9]*' "$E2E_TMP/broker.log" 2>/dev/null |
        tail -n 1 | sed 's/.*workers=//'
}

e2e_wait_workers() {
    e2e_wait_for "[ \"\$(e2e_workers)\" = $1 ]" 15 ||
        { echo "broker did not see $1 workers"; E2E_FAIL=$((E2E_FAIL + 1)); exit 1; }
}

e2e_start_redis() {
    # Ready when its own log says so (a PONG could come from another test's
    # Redis on a port ours failed to bind). A port picked here that another
    # process holds: another port (up to five); a port already in use by
    # this test (a restart) is kept.
    local try picked=
    [ -z "${RPORT:-}" ] && picked=1
    for try in 1 2 3 4 5; do
        : "${RPORT:=$(e2e_pick_port)}"
        redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no \
            >>"$E2E_TMP/redis.log" 2>&1 &
        REDIS_PID=$!
        E2E_PIDS+=("$REDIS_PID")
        local ready="grep -q '^$REDIS_PID:M .*Ready to accept connections' '$E2E_TMP/redis.log' 2>/dev/null"
        e2e_wait_for "$ready || ! kill -0 $REDIS_PID 2>/dev/null" 10
        eval "$ready" && return 0
        kill -9 "$REDIS_PID" 2>/dev/null; wait "$REDIS_PID" 2>/dev/null
        [ -n "$picked" ] || return 1
        echo "# redis-server could not listen on $RPORT: another port"
        RPORT=
    done
    return 1
}

e2e_finish() {
    echo "$E2E_PASS passed, $E2E_FAIL failed"
    [ "$E2E_FAIL" -eq 0 ]
    exit $?
}
