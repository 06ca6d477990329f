#!/usr/bin/env bash
# The Python client (jrpc.Client, jrpc.AsyncClient; worker/python) against
# the real broker, a C jrpc-worker and the Python example worker
# (python -m jrpc.worker), with the package installed in a fresh venv
# (tests/py_install.sh; JRPC_PY is its python). Three brokers in turn:
#   signed: --keys and Redis; tcp://, http://, ws://: calls, named params,
#     error objects (code, message, data), batches matched by id,
#     notifications, deadlines (-32003), streams (SSE, NDJSON, ZeroMQ frames,
#     WebSocket) in arrival order, traceparent, asyncio, the numbers rule,
#     unsigned/bad secret/ACL refusals, fresh nonces, bearer keys (http, ws),
#     idempotency keys (the C worker's count ran once), dns+tcp://localhost:PORT;
#   curve: CURVE on tcp://: a call and a stream; an unlisted key and a
#     client without CURVE get TransportError;
#   open: ipc://, https:// and wss:// (a test CA): the same calls; an
#     untrusted certificate; several URLs with some down.
# The checks themselves are in py_client_check.py. The Python worker of the
# signed phase also shows the worker's config file, JRPC_* variables, json
# logs and --admin metrics.
source "$JRPC_E2E_LIB"
: "${JRPC_PY:?set JRPC_PY to the python of the venv tests/py_install.sh makes}"
[ -x "$JRPC_PY" ] || { echo "no $JRPC_PY: run bash tests/py_install.sh first"; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server is required"; exit 1; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
EXAMPLE="$HERE/../../worker/python/examples/example_worker.py"

run_checks() { # PHASE: runs the Python checks, counts each line with check()
    local line name exp act
    timeout 240 "$JRPC_PY" "$HERE/py_client_check.py" "$1" >"$E2E_TMP/checks.out" 2>"$E2E_TMP/checks.err"
    local rc=$?
    while IFS=$'\t' read -r line name exp act; do
        [ "$line" = CHECK ] && check "$name" "$exp" "$act"
    done <"$E2E_TMP/checks.out"
    check "$1: the check script ran to its end" 0 "$rc"
    [ "$rc" = 0 ] || tail -n 20 "$E2E_TMP/checks.err"
}
PYW=
start_workers() { # ARGS for both workers (CURVE)
    e2e_start_worker --heartbeat-ms 200 "$@"
    CW=$LAST_PID
    : >"$E2E_TMP/pyworker.log"
    "$JRPC_PY" -m jrpc.worker --connect "$WORKERS_EP" --heartbeat-ms 200 "$@" "$EXAMPLE" \
        >>"$E2E_TMP/pyworker.log" 2>&1 &
    PYW=$!
    E2E_PIDS+=("$PYW")
    e2e_wait_workers 2
}
stop_workers() { { kill -9 "$CW" "$PYW"; wait "$CW" "$PYW"; } 2>/dev/null; }

# ---- signed ----------------------------------------------------------------
e2e_start_redis
printf 'demo s3cr3t-s3cr3t-s3cr3t\nlimited s3cr3t-limited-key1 add\n' >"$E2E_TMP/keys"
export BEARER=$("$JRPC" bearer-key bear "$E2E_TMP/keys" 2>/dev/null)
export KEYS=$E2E_TMP/keys
E2E_HTTP=1 e2e_start_broker --keys "$KEYS" --redis "redis://127.0.0.1:$RPORT" --heartbeat-ms 200
# Here the Python worker takes its options as jrpc-worker does: a config file
# (JRPC_CONFIG) shared with the C worker's keys, and JRPC_* variables.
e2e_start_worker --heartbeat-ms 200
CW=$LAST_PID
APORT=$(( $(e2e_pick_port) ))
cat >"$E2E_TMP/worker.conf" <<CONF
heartbeat-ms = 200
[jrpc-broker]
zmq = tcp://127.0.0.1:1
[jrpc-worker]
connect = $WORKERS_EP
json = off
[jrpc-py-worker]
admin = 127.0.0.1:$APORT
CONF
: >"$E2E_TMP/pyworker.log"
JRPC_CONFIG=$E2E_TMP/worker.conf JRPC_LOG_FORMAT=json JRPC_CREDIT=16 JRPC_ZMQ=x \
    "$JRPC_PY" -m jrpc.worker "$EXAMPLE" >>"$E2E_TMP/pyworker.log" 2>&1 &
PYW=$!
E2E_PIDS+=("$PYW")
e2e_wait_workers 2
check "python -m jrpc.worker: the config file's connect, JRPC_CREDIT=16" 1 \
    "$(grep -c 'event=worker_ready.*credit=16 .*methods=9' "$E2E_TMP/broker.log")"
check "... JRPC_LOG_FORMAT=json: every line a JSON object of the C programs' keys" yes \
    "$("$JRPC_PY" -c 'import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
print("yes" if lines and all(list(o)[:5] == ["ts", "level", "proc", "comp", "event"]
      and o["proc"] == "jrpc-py-worker" for o in lines) else "no")' "$E2E_TMP/pyworker.log")"
check "... JRPC_ZMQ (the broker's) is ignored and named once" 1 \
    "$(grep -c '"event":"env_ignored","names":"[A-Z0-9_,]*JRPC_ZMQ[,"]' "$E2E_TMP/pyworker.log")"
export ZMQ=$URL HTTP=$HTTP_URL WS=ws://127.0.0.1:$HTTP_PORT/rpc
run_checks signed
metric() { curl -s "http://127.0.0.1:$APORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
check "--admin (from [jrpc-py-worker]): /readyz 200 with a broker up" 200 \
    "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$APORT/readyz")"
check "... /metrics: answers and error answers counted, one broker connected" "yes yes 1" \
    "$([ "$(metric jrpc_pyworker_calls_total)" -gt 10 ] && echo yes) $([ "$(metric jrpc_pyworker_call_errors_total)" -ge 3 ] && echo yes) $(metric jrpc_pyworker_brokers_connected)"
stop_workers
check "... /readyz fails once the worker is gone" 000 \
    "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$APORT/readyz")"

# ---- CURVE -----------------------------------------------------------------
K=$E2E_TMP/curve
mkdir -p "$K"
for who in broker worker client other; do "$JRPC" keygen "$K/$who" >/dev/null 2>&1; done
export CURVE_CLIENT=$K/client CURVE_BROKER=$K/broker.pub CURVE_OTHER=$K/other
E2E_HTTP=1 e2e_restart_broker --heartbeat-ms 200 --curve-secret "$K/broker" \
    --client-keys "$K/client.pub" --worker-keys "$K/worker.pub"
start_workers --curve-secret "$K/worker" --broker-key "$K/broker.pub"
run_checks curve
stop_workers

# ---- open: ipc://, https://, wss:// ----------------------------------------
C=$E2E_TMP/tls
mkdir -p "$C"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$C/ca.key" -out "$C/ca.pem" -days 2 \
    -subj /CN=jrpc-test-ca >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -keyout "$C/server.key" -out "$C/server.csr" \
    -subj /CN=127.0.0.1 >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1\n' >"$C/ext"
openssl x509 -req -in "$C/server.csr" -CA "$C/ca.pem" -CAkey "$C/ca.key" -CAcreateserial \
    -out "$C/server.pem" -days 2 -extfile "$C/ext" >/dev/null 2>&1
export IPC=ipc://$E2E_TMP/broker.sock CA=$C/ca.pem
E2E_HTTP=1 e2e_restart_broker --heartbeat-ms 200 --zmq "$IPC" \
    --tls-cert "$C/server.pem" --tls-key "$C/server.key"
start_workers
export HTTPS=https://127.0.0.1:$HTTP_PORT WSS=wss://127.0.0.1:$HTTP_PORT/rpc
export DOWN=tcp://127.0.0.1:$(e2e_free_port)
run_checks open
e2e_finish
