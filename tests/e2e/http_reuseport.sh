#!/usr/bin/env bash
# --reuseport: two brokers share one HTTP port (each with its own ZeroMQ
# endpoints, one worker connected to both); new connections reach both; with
# one stopped the other keeps answering. Without the flag the second cannot bind.
source "$JRPC_E2E_LIB"
E2E_HTTP=1
IDLE="$JRPC_BIN/jrpc-bench-idle"

e2e_start_broker --reuseport on
B1=$BROKER_PID
ZP=${URL##*:}
URL2=tcp://127.0.0.1:$((ZP + 3))
WORKERS2=tcp://127.0.0.1:$((ZP + 4))

# start2 ARGS...: a second broker on the same HTTP port; sets B2.
start2() {
    : > "$E2E_TMP/broker2.log"
    "$JRPC_BIN/jrpc-broker" --zmq "$URL2" --workers "$WORKERS2" --http "127.0.0.1:$HTTP_PORT" \
        "$@" >> "$E2E_TMP/broker2.log" 2>&1 &
    B2=$!
    E2E_PIDS+=("$B2")
}

start2
wait "$B2"
check "without --reuseport the second broker cannot bind: exit 1" 1 $?
check "... and says why" 1 "$(grep -c 'event=bind_failed.*Address already in use' "$E2E_TMP/broker2.log")"

start2 --reuseport on
e2e_wait_for "[ \$(grep -c event=listening '$E2E_TMP/broker2.log') -ge 3 ]" 10
check "with --reuseport the second broker listens on the same port" 1 \
    "$(grep -c "event=listening endpoint=http://127.0.0.1:$HTTP_PORT" "$E2E_TMP/broker2.log")"
e2e_start_worker --connect "$WORKERS2"
e2e_wait_workers 1
e2e_wait_for "grep -q 'event=worker_.*workers=1' '$E2E_TMP/broker2.log'" 15

# 40 new connections held open: the kernel spreads them over both brokers
# (by a hash of the client's port: all 40 on one has odds of 2^-39).
nfds() { ls "/proc/$1/fd" | wc -l; }
f1=$(nfds "$B1") f2=$(nfds "$B2")
"$IDLE" "127.0.0.1:$HTTP_PORT" 40 240 > "$E2E_TMP/held.out" 2>&1 &
HOLDER=$!
E2E_PIDS+=("$HOLDER")
e2e_wait_for "grep -q '^holding' '$E2E_TMP/held.out'" 30
check "40 connections, every one answered" "opened=40 answered=40 closed=0 failed=0" \
    "$(head -n 1 "$E2E_TMP/held.out")"
g1=$(nfds "$B1") g2=$(nfds "$B2")
check "both brokers took connections (40 in all)" "yes yes yes" \
    "$([ "$g1" -gt "$f1" ] && echo yes || echo no) $([ "$g2" -gt "$f2" ] && echo yes || echo no) $([ $((g1 - f1 + g2 - f2)) -ge 40 ] && echo yes || echo "no: $((g1 - f1 + g2 - f2))")"
kill "$HOLDER"; wait "$HOLDER" 2>/dev/null

# One stops (SIGTERM: drains, exits 0); the other answers every new connection.
kill -TERM "$B1"
wait "$B1"
check "the first broker stops cleanly" 0 $?
ok=0
for i in $(seq 1 20); do
    [ "$("$JRPC" --url "$HTTP_URL" call add "[$i,1]")" = $((i + 1)) ] && ok=$((ok + 1))
done
check "with one stopped, the other answers 20 of 20 new connections" 20 "$ok"
check "second broker alive" 0 "$(kill -0 "$B2"; echo $?)"
e2e_finish
