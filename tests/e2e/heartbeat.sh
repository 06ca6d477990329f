#!/usr/bin/env bash
# Heartbeat settings are the broker's (PROTOCOL.md 5): a worker with its
# defaults (1000 ms x 3) adopts the interval and liveness of each broker it
# serves, for that session, so that a broker slower (6000 ms) or faster
# (100 ms) than the worker neither drops the worker nor is dropped by it.
# Before the fix both pairs flapped within seconds: each flap answered the
# non-idempotent call in flight -32004. Here: one session per worker, no
# worker lost, and the slow non-idempotent call comes back with its result.
# One worker serves both brokers at once (settings per session). ~12 s.
# shellcheck source=lib.sh
source "$JRPC_E2E_LIB"
TMP=$E2E_TMP

# ---- a slow broker (6000 ms) ---------------------------------------------------
e2e_start_broker --heartbeat-ms 6000 --timeout-ms 20000
SLOW_URL=$URL; SLOW_EP=$WORKERS_EP
SLOW_LOG=$TMP/broker.log

# ---- a fast broker (100 ms), on its own ports --------------------------------------
for try in 1 2 3 4 5 6; do
    zp=$(e2e_pick_port)
    FAST_URL="tcp://127.0.0.1:$zp"; FAST_EP="tcp://127.0.0.1:$((zp + 1))"
    : >"$TMP/broker-fast.log"
    "$JRPC_BIN/jrpc-broker" --zmq "$FAST_URL" --workers "$FAST_EP" --http none \
        --heartbeat-ms 100 --timeout-ms 20000 >>"$TMP/broker-fast.log" 2>&1 &
    FAST_PID=$!
    E2E_PIDS+=("$FAST_PID")
    e2e_wait_for "[ \$(grep -c 'event=listening' '$TMP/broker-fast.log') -ge 2 ]" 10 && break
    kill -9 "$FAST_PID" 2>/dev/null; wait "$FAST_PID" 2>/dev/null
done

# One default worker (heartbeat 1000 ms, liveness 3) serving both brokers.
"$JRPC_BIN/jrpc-worker" --connect "$SLOW_EP" --connect "$FAST_EP" \
    >"$TMP/worker.log" 2>&1 &
E2E_PIDS+=($!)
e2e_wait_workers 1
e2e_wait_for "grep -q 'workers=1' '$TMP/broker-fast.log'" 10

# A non-idempotent call that outlasts the worker's own liveness (3 s) several
# times over at the slow broker, and the fast broker's (300 ms) many times.
"$JRPC" --url "$SLOW_URL" --timeout-ms 20000 call slow_update '{"ms":5000}' >"$TMP/slow.out" 2>&1 &
C1=$!
"$JRPC" --url "$FAST_URL" --timeout-ms 20000 call slow_update '{"ms":5000}' >"$TMP/fast.out" 2>&1 &
C2=$!
wait "$C1"; r1=$?
wait "$C2"; r2=$?
check "slow broker (6000 ms): the 5 s non-idempotent call is answered" "0 null" "$r1 $(cat "$TMP/slow.out")"
check "fast broker (100 ms): the 5 s non-idempotent call is answered" "0 null" "$r2 $(cat "$TMP/fast.out")"

# count PATTERN FILE
count() { grep -c -- "$1" "$2"; }
check "slow broker: one session, no worker lost" "1 0" \
    "$(count 'event=worker_ready' "$SLOW_LOG") $(count 'event=worker_lost' "$SLOW_LOG")"
check "fast broker: one session, no worker lost" "1 0" \
    "$(count 'event=worker_ready' "$TMP/broker-fast.log") $(count 'event=worker_lost' "$TMP/broker-fast.log")"
check "the worker never gave a broker up" "0" "$(count 'event=broker_lost' "$TMP/worker.log")"
adopted() { grep "event=heartbeat_adopted endpoint=$1 " "$TMP/worker.log" | grep -o 'heartbeat_ms=[0-9]* liveness=[0-9]*'; }
check "the worker logs the settings it adopted from the slow broker, once" \
    "heartbeat_ms=6000 liveness=3" "$(adopted "$SLOW_EP")"
check "... and from the fast broker, once" "heartbeat_ms=100 liveness=3" "$(adopted "$FAST_EP")"
e2e_finish
