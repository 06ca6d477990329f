#!/usr/bin/env bash
# The Python worker SDK (worker/python) against the real broker, beside a C
# jrpc-worker, all over CURVE: one batch served half by each (methods only
# one of them has), a Python handler's error object reaching the client
# unchanged, -32603 for a handler's bug, the traceparent reaching a Python
# handler, and SIGTERM of a Python worker mid-load losing nothing (its held
# calls drain and are answered, the rest go to the other Python worker).
# The package (jrpc.worker) as installed by tests/py_install.sh: JRPC_PY is
# that venv's python.
source "$JRPC_E2E_LIB"
: "${JRPC_PY:?set JRPC_PY to the python of the venv tests/py_install.sh makes}"
[ -x "$JRPC_PY" ] || { echo "no $JRPC_PY: run bash tests/py_install.sh first"; exit 1; }
PY=$JRPC_PY
EXAMPLE="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../worker/python" && pwd)/examples/example_worker.py"

K="$E2E_TMP/keys"
mkdir -p "$K"
for who in broker cworker pyworker client; do "$JRPC" keygen "$K/$who" >/dev/null 2>&1; done
cat "$K/cworker.pub" "$K/pyworker.pub" >"$K/workers.allow"
cat "$K/client.pub" >"$K/clients.allow"

BROKER_ARGS=(--heartbeat-ms 200 --liveness 10 --max-depth 1024 --curve-secret "$K/broker"
             --client-keys "$K/clients.allow" --worker-keys "$K/workers.allow")
export E2E_HTTP=1
e2e_start_broker "${BROKER_ARGS[@]}"
CURVE_CLIENT=(--curve-secret "$K/client" --server-key "$K/broker.pub")
e2e_start_worker --heartbeat-ms 200 --curve-secret "$K/cworker" --broker-key "$K/broker.pub"

PYN=0
start_py() {
    PYN=$((PYN + 1))
    "$PY" -m jrpc.worker --connect "$WORKERS_EP" --curve-secret "$K/pyworker" \
        --broker-key "$K/broker.pub" --name "py$PYN" "$@" "$EXAMPLE" \
        >>"$E2E_TMP/py$PYN.log" 2>&1 &
    LAST_PID=$!
    E2E_PIDS+=("$LAST_PID")
}
start_py --credit 8
PY1=$LAST_PID
e2e_wait_workers 2
check "the Python worker's READY: its methods, 5 idempotent" 1 \
    "$(grep -c 'event=worker_ready.*credit=8 .*methods=9 idempotent=5' "$E2E_TMP/broker.log")"
check "... and it adopted the broker's heartbeat (200 ms, 10 beats)" 1 \
    "$(grep -c 'event=heartbeat_adopted .*heartbeat_ms=200 liveness=10' "$E2E_TMP/py1.log")"

send() { printf '%s' "$1" | "$JRPC" "${CURVE_CLIENT[@]}" send; }

# 60 calls, alternating methods only the Python worker serves (py.mul,
# py.concat) and ones only the C worker serves (add, subtract).
body='[' expected='['
for ((i = 0; i < 60; i++)); do
    [ $i -gt 0 ] && { body+=','; expected+=','; }
    case $((i % 4)) in
    0) body+="{\"jsonrpc\":\"2.0\",\"method\":\"py.mul\",\"params\":[$i,3],\"id\":$i}"
       expected+="{\"jsonrpc\":\"2.0\",\"result\":$((i * 3)),\"id\":$i}" ;;
    1) body+="{\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[$i,1000],\"id\":$i}"
       expected+="{\"jsonrpc\":\"2.0\",\"result\":$((i + 1000)),\"id\":$i}" ;;
    2) body+="{\"jsonrpc\":\"2.0\",\"method\":\"py.concat\",\"params\":[\"n\",\"$i\"],\"id\":$i}"
       expected+="{\"jsonrpc\":\"2.0\",\"result\":\"n$i\",\"id\":$i}" ;;
    3) body+="{\"jsonrpc\":\"2.0\",\"method\":\"subtract\",\"params\":{\"minuend\":$i,\"subtrahend\":1},\"id\":$i}"
       expected+="{\"jsonrpc\":\"2.0\",\"result\":$((i - 1)),\"id\":$i}" ;;
    esac
done
body+=']' expected+=']'
check "one batch, half Python methods, half C methods: every id once, right results" \
    "$expected" "$(send "$body")"

check "a Python handler's error object reaches the client unchanged" \
    '{"jsonrpc":"2.0","error":{"code":4001,"message":"Insufficient funds","data":{"balance":3,"need":[5,"EUR"]}},"id":"e"}' \
    "$(send '{"jsonrpc":"2.0","method":"py.fail","params":{"code":4001,"message":"Insufficient funds","data":{"balance":3,"need":[5,"EUR"]}},"id":"e"}')"
check "a Python handler's bug is -32603, and the worker goes on" \
    '[{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error"},"id":1},{"jsonrpc":"2.0","result":6,"id":2}]' \
    "$(send '[{"jsonrpc":"2.0","method":"py.crash","id":1},{"jsonrpc":"2.0","method":"py.mul","params":[2,3],"id":2}]')"
check "wrong params for a Python handler: -32602" \
    '{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params"},"id":1}' \
    "$(send '{"jsonrpc":"2.0","method":"py.mul","params":[1,2,3],"id":1}')"
check "an async Python handler" \
    '{"jsonrpc":"2.0","result":20,"id":1}' \
    "$(send '{"jsonrpc":"2.0","method":"py.sleep","params":{"ms":20},"id":1}')"
# Params as deep as --max-depth 1024 admits (the body object is one level):
# beyond msgpack-python's 1024 levels in the message, decoded all the same.
deep=$(printf '%.0s[' $(seq 1023))$(printf '%.0s]' $(seq 1023))
check "params nested 1023 deep reach a Python handler" \
    '{"jsonrpc":"2.0","result":1023,"id":1}' \
    "$(send "{\"jsonrpc\":\"2.0\",\"method\":\"py.depth\",\"params\":$deep,\"id\":1}")"
TPV=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
check "the client's traceparent reaches the Python handler" \
    "{\"jsonrpc\":\"2.0\",\"result\":\"$TPV\",\"id\":1}" \
    "$(curl -s -H "traceparent: $TPV" -H 'Content-Type: application/json' \
        --data '{"jsonrpc":"2.0","method":"py.trace","id":1}' "$HTTP_URL/")"

# The broker restarts under the running workers: the Python worker's next
# message is answered DISCONNECT ("I do not know you") and it comes back
# with a fresh socket, by itself.
e2e_restart_broker "${BROKER_ARGS[@]}"
e2e_wait_workers 2
check "after a broker restart the Python worker serves again, unrestarted" \
    '[{"jsonrpc":"2.0","result":12,"id":1},{"jsonrpc":"2.0","result":7,"id":2}]' \
    "$(kill -0 "$PY1" && send '[{"jsonrpc":"2.0","method":"py.mul","params":[3,4],"id":1},{"jsonrpc":"2.0","method":"add","params":[3,4],"id":2}]')"

# SIGHUP, as for jrpc-worker: logged and ignored (a closed terminal must not
# kill a worker).
kill -HUP "$PY1"
e2e_wait_for "grep -q 'event=signal signal=HUP action=ignored' '$E2E_TMP/py1.log'" 5
check "SIGHUP: logged and ignored, the Python worker still serves" '{"jsonrpc":"2.0","result":12,"id":1}' \
    "$(kill -0 "$PY1" && send '{"jsonrpc":"2.0","method":"py.mul","params":[3,4],"id":1}')"

# SIGTERM mid-load: 48 calls of py.block (not idempotent: a lost one would
# be -32004) over two Python workers with credit 8. The first one leaves
# while it holds calls: it sends DISCONNECT, finishes and answers them, and
# the broker sends the rest to the second.
start_py --credit 8
PY2=$LAST_PID
e2e_wait_workers 3
body='[' expected='['
for ((i = 0; i < 48; i++)); do
    [ $i -gt 0 ] && { body+=','; expected+=','; }
    body+="{\"jsonrpc\":\"2.0\",\"method\":\"py.block\",\"params\":{\"ms\":150},\"id\":$i}"
    expected+="{\"jsonrpc\":\"2.0\",\"result\":{\"ms\":150,\"pid\":PID},\"id\":$i}"
done
body+=']' expected+=']'
printf '%s' "$body" >"$E2E_TMP/load.json"
"$JRPC" "${CURVE_CLIENT[@]}" send "$E2E_TMP/load.json" >"$E2E_TMP/load.out" 2>&1 &
LOAD=$!
sleep 0.3
kill -TERM "$PY1"
wait "$LOAD"
check "SIGTERM mid-load: the client's batch came back" 0 $?
check "... every id answered once, with a result (nothing lost, no -32004)" "$expected" \
    "$(sed -E 's/"pid":[0-9]+/"pid":PID/g' "$E2E_TMP/load.out")"
e2e_wait_for "! kill -0 $PY1 2>/dev/null" 10
wait "$PY1"
check "... the leaving worker exited 0" 0 $?
check "... after draining what it held" 1 "$(grep -c 'event=drained reason=done' "$E2E_TMP/py1.log")"
served1=$(grep -o "\"pid\":$PY1" "$E2E_TMP/load.out" | wc -l)
served2=$(grep -o "\"pid\":$PY2" "$E2E_TMP/load.out" | wc -l)
check "... both Python workers served part of the load" "48 yes" \
    "$((served1 + served2)) $([ "$served1" -gt 0 ] && [ "$served2" -gt 0 ] && echo yes)"
held=$(grep -o 'event=draining held=[0-9]*' "$E2E_TMP/py1.log" | sed 's/.*held=//')
check "... it held calls when the signal came" yes "$([ "${held:-0}" -gt 0 ] && echo yes)"

# A drain that times out: the handler still runs in its thread, yet the
# process exits (as the C worker does) and the broker answers the call
# -32004 (py.block is not idempotent: it may have run).
kill -TERM "$PY2"; wait "$PY2"
start_py --credit 2 --drain-timeout-ms 300
PY3=$LAST_PID
e2e_wait_for "grep -q 'event=worker_ready.*credit=2 ' '$E2E_TMP/broker.log'" 10
"$JRPC" "${CURVE_CLIENT[@]}" -t 8000 call py.block '{"ms":5000}' >"$E2E_TMP/stuck.out" 2>&1 &
STUCK=$!
sleep 0.5
kill -TERM "$PY3"
t0=$(date +%s%N)
e2e_wait_for "! kill -0 $PY3 2>/dev/null" 5
wait "$PY3"
check "drain timeout: the worker exits 0 with a handler still running" 0 $?
# (the handler blocks 5 s: an exit before 4 s is the drain timeout's, with
# room for a loaded machine)
check "... within 4 s of SIGTERM, before the 5 s handler ends" yes \
    "$([ $(( ($(date +%s%N) - t0) / 1000000 )) -lt 4000 ] && echo yes)"
check "... after giving up on what it held" 1 "$(grep -c 'event=drained reason=timeout abandoned=1' "$E2E_TMP/py3.log")"
wait "$STUCK"
check "... and the broker answers that call -32004" '-32004' \
    "$(sed -E 's/.*"code":(-?[0-9]+).*/\1/' "$E2E_TMP/stuck.out")"
e2e_finish
