# tests/e2e/failover_lib.sh — what py_failover.sh and c_failover.sh share:
# three brokers on one Redis, each with its own Python worker recording
# every run (py_failover_worker.py: W<N> serves B<N> only, so a run is
# attributed to the broker that dispatched it), and a signing key. Source it
# after lib.sh. Sets HERE, KEY_FILE, and per broker N: BPID, HTTPP (HTTP
# port), WEP (workers' endpoint), ZEP (clients' ZeroMQ endpoint), ADMP
# (--admin port, /metrics). Heartbeats every second: at 200 ms a loaded
# machine (ASan, 8 clients starting at once) cost a worker its session now
# and then, and the call it held -32004.
: "${JRPC_PY:?set JRPC_PY to the python of the venv tests/py_install.sh makes}"
[ -x "$JRPC_PY" ] || { echo "no $JRPC_PY: run bash tests/py_install.sh first"; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server is required"; exit 1; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
e2e_start_redis
printf 'loadkey s3cr3t-load-s3cr3t-load\n' > "$E2E_TMP/keys"
chmod 600 "$E2E_TMP/keys"
export KEY_FILE=$E2E_TMP/keys

declare -A BPID HTTPP WEP ZEP ADMP
start_b() { # N: broker N on fresh ports (retried on a collision)
    local n=$1 try zp
    for try in 1 2 3 4 5 6; do
        zp=$(e2e_pick_port)
        HTTPP[$n]=$((zp + 2)); WEP[$n]="tcp://127.0.0.1:$((zp + 1))"; ZEP[$n]="tcp://127.0.0.1:$zp"
        ADMP[$n]=$((zp + 3))
        : > "$E2E_TMP/b$n.log"
        "$JRPC_BIN/jrpc-broker" --zmq "tcp://127.0.0.1:$zp" --workers "${WEP[$n]}" \
            --http "127.0.0.1:${HTTPP[$n]}" --keys "$E2E_TMP/keys" \
            --redis "redis://127.0.0.1:$RPORT" --redis-timeout-ms 2000 --timeout-ms 3000 --heartbeat-ms 1000 \
            --admin "127.0.0.1:${ADMP[$n]}" >>"$E2E_TMP/b$n.log" 2>&1 &
        BPID[$n]=$!; E2E_PIDS+=("${BPID[$n]}")
        e2e_wait_for "[ \$(grep -c event=listening '$E2E_TMP/b$n.log') -ge 4 ]" 10 && return 0
        kill -9 "${BPID[$n]}" 2>/dev/null; wait "${BPID[$n]}" 2>/dev/null
    done
    echo "could not start broker $n"; exit 1
}
start_w() { # N: W<N> serving B<N> only; W1 takes W1_EXTRA_MS more a call
    local extra=0
    [ "$1" = 1 ] && extra=${W1_EXTRA_MS:-0}
    REC_FILE=$E2E_TMP/runs REC_NAME=w$1 REC_EXTRA_MS=$extra "$JRPC_PY" -m jrpc.worker \
        --connect "${WEP[$1]}" --heartbeat-ms 1000 --credit 8 "$HERE/py_failover_worker.py" \
        >>"$E2E_TMP/w$1.log" 2>&1 &
    E2E_PIDS+=("$!")
}
ready() { grep -q 'event=worker_ready' "$E2E_TMP/b$1.log"; }
stop_all() { # every process but Redis
    local p
    for p in "${E2E_PIDS[@]}"; do
        [ "$p" = "$REDIS_PID" ] || { kill -9 "$p"; wait "$p"; } 2>/dev/null
    done
    E2E_PIDS=("$REDIS_PID")
}
# Two calls, not one: with one, the kill sometimes came just as that call's
# answer left (a fresh-clone run under ASan saw no call lost with B1); two
# finishing within the few ms between the reading and the kill is rarer by
# twenty times (W1 takes 200 ms a call).
kill_b1() { # SIGKILLs B1 while it holds calls (its /metrics: two calls at its worker)
    e2e_wait_for "curl -s 'http://127.0.0.1:${ADMP[1]}/metrics' |
                  awk '\$1 == \"jrpc_calls_inflight\" { n = \$2 } END { exit !(n >= 2) }'" 30 ||
        echo "B1 never held two calls"
    kill -9 "${BPID[1]}"
    wait "${BPID[1]}" 2>/dev/null
}
