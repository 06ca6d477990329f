#!/usr/bin/env bash
# Chaos: a steady load of mixed, signed batches over ZeroMQ and HTTP
# (jrpc-test-chaos) against a broker with 4 workers, while workers are
# SIGKILLed and replaced, one is SIGSTOPped past its heartbeat expiry, Redis
# is restarted and the broker is restarted once. Every call is accounted for
# by id: lost, duplicated and unexpected must stay 0; failures (transport,
# -32004, -32006, ...) are allowed and counted. Bounded: about 90 s in all.
source "$JRPC_E2E_LIB"
command -v redis-server >/dev/null || { echo "redis-server is not installed"; exit 1; }
export E2E_HTTP=1
LOAD_S=${CHAOS_DURATION_S:-70}

e2e_start_redis || { echo "redis-server did not start"; exit 1; }

KEY_ID=chaos
SECRET=chaos-secret-0123456789abcdef
printf '%s %s\n' "$KEY_ID" "$SECRET" > "$E2E_TMP/keys"
# --skew 5: Redis restarts empty at t=28, and the broker then refuses every
# body signed before the loss + skew (docs/SIGNING.md): 5 s of -32006, not 300.
BROKER_ARGS=(--keys "$E2E_TMP/keys" --redis "redis://127.0.0.1:$RPORT" --redis-timeout-ms 300
             --heartbeat-ms 200 --liveness 3 --timeout-ms 3000 --skew 5)
e2e_start_broker "${BROKER_ARGS[@]}"

WPIDS=()
start_worker_slot() { # SLOT
    e2e_start_worker --heartbeat-ms 200
    WPIDS[$1]=$LAST_PID
}
for s in 0 1 2 3; do start_worker_slot "$s"; done
e2e_wait_workers 4

T0=$SECONDS
at() { # SECONDS-SINCE-START MESSAGE: sleeps until then and prints the step
    local wait=$(( T0 + $1 - SECONDS ))
    [ "$wait" -gt 0 ] && sleep "$wait"
    echo "chaos: t=$(( SECONDS - T0 ))s $2"
}
lost_count() { grep -c 'event=worker_lost' "$E2E_TMP/broker.log"; }
# Waits until the broker has logged LOST_AT_LEAST worker losses and has 4
# workers again; logs what it sees, never exits.
wait_back() { # LOST_AT_LEAST
    if e2e_wait_for "[ \$(lost_count) -ge $1 ] && [ \"\$(e2e_workers)\" = 4 ]" 10; then
        echo "chaos: t=$(( SECONDS - T0 ))s broker has 4 workers again (losses logged: $(lost_count))"
    else
        echo "chaos: t=$(( SECONDS - T0 ))s broker: losses=$(lost_count) (want $1)" \
            "workers=$(e2e_workers) (want 4)"
    fi
}
replace_worker() { # SLOT
    kill -9 "${WPIDS[$1]}" 2>/dev/null
    wait "${WPIDS[$1]}" 2>/dev/null
    start_worker_slot "$1"
}

"$JRPC_BIN/jrpc-test-chaos" --zmq "$URL" --http "$HTTP_URL/rpc" --key-id "$KEY_ID" \
    --secret "$SECRET" --zmq-threads 4 --http-threads 4 --duration "$LOAD_S" \
    --timeout-ms 4000 --call-timeout-ms 2500 > "$E2E_TMP/load.out" &
LOAD_PID=$!
E2E_PIDS+=("$LOAD_PID")
echo "chaos: t=0s load started for ${LOAD_S}s (4 ZeroMQ + 4 HTTP threads, signed)"

at 5 "SIGKILL worker 0 (pid ${WPIDS[0]}), start a new one"
n=$(lost_count); replace_worker 0
wait_back $((n + 1))

STOPPED=${WPIDS[1]}
at 12 "SIGSTOP worker 1 (pid $STOPPED) for 2 s (heartbeat expiry is 600 ms)"
expiries() { grep -c 'event=worker_lost reason=heartbeat_expired' "$E2E_TMP/broker.log"; }
n=$(lost_count); expired=$(expiries)
kill -STOP "$STOPPED"
sleep 2
expired=$(( $(expiries) - expired ))
echo "chaos: t=$(( SECONDS - T0 ))s SIGCONT worker 1"
kill -CONT "$STOPPED"
wait_back $((n + 1))
if [ "$(e2e_workers)" != 4 ]; then
    echo "chaos: the resumed worker did not come back by itself: replacing it"
    replace_worker 1
    wait_back $((n + 1))
fi

at 20 "SIGKILL workers 2 and 3 at once, start two new ones"
n=$(lost_count)
kill -9 "${WPIDS[2]}" "${WPIDS[3]}" 2>/dev/null
wait "${WPIDS[2]}" "${WPIDS[3]}" 2>/dev/null
start_worker_slot 2
start_worker_slot 3
wait_back $((n + 2))

at 28 "restart Redis (SIGKILL, 1 s down, same port)"
kill -9 "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null
sleep 1
e2e_start_redis || echo "chaos: redis-server did not come back"
echo "chaos: t=$(( SECONDS - T0 ))s Redis is back"

at 36 "SIGKILL worker 0 (pid ${WPIDS[0]}), start a new one"
n=$(lost_count); replace_worker 0
wait_back $((n + 1))

at 44 "restart the broker (SIGKILL, same ports)"
cp "$E2E_TMP/broker.log" "$E2E_TMP/broker-before-restart.log"
e2e_restart_broker "${BROKER_ARGS[@]}"
echo "chaos: t=$(( SECONDS - T0 ))s broker is listening again (pid $BROKER_PID)"
wait_back 0

at 54 "SIGKILL worker 1 (pid ${WPIDS[1]}), start a new one"
n=$(lost_count); replace_worker 1
wait_back $((n + 1))

at 61 "SIGKILL worker 2 (pid ${WPIDS[2]}), start a new one"
n=$(lost_count); replace_worker 2
wait_back $((n + 1))

echo "chaos: t=$(( SECONDS - T0 ))s waiting for the load to finish"
wait "$LOAD_PID"; load_status=$?
echo "chaos: t=$(( SECONDS - T0 ))s load finished (exit $load_status)"
cat "$E2E_TMP/load.out"

line=$(tail -n 1 "$E2E_TMP/load.out")
field() { echo "$line" | grep -o "\\b$1=[0-9]*" | head -n 1 | cut -d= -f2; }
check "the load client printed its tally" 1 "$(echo "$line" | grep -c '^attempted=.* lost=')"
check "lost = 0" 0 "$(field lost)"
check "duplicated = 0" 0 "$(field duplicated)"
check "unexpected = 0" 0 "$(field unexpected)"
check "load client exit status" 0 "$load_status"
ok=$(field ok)
check "more than 1000 calls answered ok" 1 "$(( ${ok:-0} > 1000 ))"
check "the SIGSTOPped worker expired at the broker" 1 "$expired"
check "the broker is still alive" 0 "$(kill -0 "$BROKER_PID" 2>/dev/null; echo $?)"
check "the broker answers over ZeroMQ" 3 \
    "$("$JRPC" --url "$URL" --key-id "$KEY_ID" --secret "$SECRET" call add '[1,2]')"
check "the broker answers over HTTP" 7 \
    "$("$JRPC" --url "$HTTP_URL" --key-id "$KEY_ID" --secret "$SECRET" call add '[3,4]')"
e2e_finish
