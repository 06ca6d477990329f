#!/usr/bin/env bash
# Processes coming and going: a worker started after the broker is used at
# once; a broker restarted under running workers is used again by them; a
# worker killed mid-call yields -32004, not a hang; SIGTERM answers what is in
# flight and exits 0.
source "$JRPC_E2E_LIB"
e2e_start_broker --heartbeat-ms 200
send() { printf '%s' "$1" | "$JRPC" send; }

check "no worker yet: method not found" \
    '{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":1}' \
    "$(send '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}')"

e2e_start_worker --heartbeat-ms 200
W1=$LAST_PID
e2e_wait_workers 1
check "worker started after the broker is used at once" '{"jsonrpc":"2.0","result":3,"id":1}' \
    "$(send '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}')"

# Sent the moment the new broker listens, before the worker has found it:
# the call waits out the start-up grace (heartbeat x liveness) for the
# worker, instead of -32601.
e2e_restart_broker --heartbeat-ms 200 --liveness 10
check "restarted broker: a call before the worker is back waits for it" \
    '{"jsonrpc":"2.0","result":5,"id":2}' \
    "$(send '{"jsonrpc":"2.0","method":"add","params":[2,3],"id":2}')"
e2e_wait_workers 1
check "the worker was not restarted" 0 "$(kill -0 "$W1" 2>/dev/null; echo $?)"

# A worker killed while it holds a call: the call fails at once (heartbeat
# expiry), it does not wait for the 30 s deadline.
( sleep 0.3; kill -9 "$W1" ) &
start=$(date +%s)
out=$(send '{"jsonrpc":"2.0","method":"sleep","params":{"ms":20000},"id":3}')
check "worker killed mid-call: -32004" \
    '{"jsonrpc":"2.0","error":{"code":-32004,"message":"Worker failed"},"id":3}' "$out"
check "answered well before the deadline" 1 "$(( $(date +%s) - start < 10 ))"

# SIGTERM with a call in flight: it is answered, then the broker exits 0.
e2e_start_worker --heartbeat-ms 200 --log-level debug   # debug: its event=call lines
e2e_wait_workers 1
send '{"jsonrpc":"2.0","method":"sleep","params":{"ms":500},"id":4}' > "$E2E_TMP/inflight.out" &
SENDER=$!
sleep 0.2
kill -TERM "$BROKER_PID"
wait "$BROKER_PID"; status=$?
wait "$SENDER"
check "in-flight call answered during shutdown" '{"jsonrpc":"2.0","result":500,"id":4}' \
    "$(cat "$E2E_TMP/inflight.out")"
check "broker exit status after SIGTERM" 0 "$status"
# ... and only then tells its worker it leaves (PROTOCOL.md 6): the worker
# opens a fresh session at once, without waiting for heartbeat x liveness.
check "the leaving broker sent DISCONNECT to its worker" 1 \
    "$(grep -c 'event=disconnect_sent workers=1 of=1' "$E2E_TMP/broker.log")"
check "the worker got it and opened a fresh session" 1 \
    "$(e2e_wait_for "grep -q 'event=disconnect_received' '$E2E_TMP/worker$E2E_NWORKERS.log'" 5 && echo 1)"
check "the DISCONNECT came after the in-flight call was answered" "result disconnect_received" \
    "$(grep -o 'event=call .*method=sleep outcome=[a-z]*\|event=disconnect_received' \
       "$E2E_TMP/worker$E2E_NWORKERS.log" | sed 's/.*outcome=//; s/event=//' | paste -sd' ')"
e2e_finish
