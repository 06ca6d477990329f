#!/usr/bin/env bash
# Many used, idle HTTP keep-alive connections (issue 6, bounded: about 2000):
# with them open the broker keeps answering active clients, --max-conns is
# honoured exactly (the connection past it is closed without an answer),
# and the idle connections are still served when used again.
source "$JRPC_E2E_LIB"
E2E_HTTP=1
IDLE="$JRPC_BIN/jrpc-bench-idle"
BENCH="$JRPC_BIN/jrpc-bench"

# Descriptors: the broker and each client tool need about MAX of them.
ulimit -n "$(ulimit -Hn)"
lim=$(ulimit -n)
MAX=2000
[ "$lim" != unlimited ] && [ "$lim" -lt $((MAX + 200)) ] && MAX=$((lim - 200))
HELD=$((MAX - 10))

e2e_start_broker --max-conns "$MAX" --idle-timeout-ms 600000
e2e_start_worker
e2e_wait_workers 1
HOST=127.0.0.1:$HTTP_PORT

# 1. MAX - 10 connections, each used once, then held idle until SIGUSR1.
"$IDLE" "$HOST" "$HELD" 240 > "$E2E_TMP/held.out" 2>&1 &
HOLDER=$!
E2E_PIDS+=("$HOLDER")
e2e_wait_for "grep -q '^holding' '$E2E_TMP/held.out'" 120
check "idle connections: every one answered" \
    "opened=$HELD answered=$HELD closed=0 failed=0" "$(head -n 1 "$E2E_TMP/held.out")"

nfds() { ls "/proc/$BROKER_PID/fd" | wc -l; }
FDS_HELD=$(nfds)

# 2. Active clients with them open: every call answered.
json_num() { grep -o "\"$1\":[-0-9.e+]*" "$2" | head -n 1 | cut -d: -f2; }
"$BENCH" --url "$HTTP_URL" --batch 1 --connections 4 --duration 2 --warmup 0.2 --json \
    > "$E2E_TMP/active.json" 2> "$E2E_TMP/active.err"
check "active clients: jrpc-bench exit status" 0 $?
check "active clients: answers came back" 1 \
    "$(awk -v v="$(json_num calls "$E2E_TMP/active.json")" 'BEGIN { print (v > 0) ? 1 : 0 }')"
check "active clients: lost" 0 "$(json_num lost "$E2E_TMP/active.json")"
check "active clients: no transport failures" 0 "$(json_num transport_failures "$E2E_TMP/active.json")"
check "active clients: no errors" '"errors":{}' "$(grep -o '"errors":{[^}]*}' "$E2E_TMP/active.json")"
check "one more call with them open" 3 "$("$JRPC" --url "$HTTP_URL" call add '[1,2]')"

# 3. --max-conns exactly: 10 more fit, the 11th is closed without an answer.
# (The active clients above have gone: wait until the broker has closed them.)
e2e_wait_for "[ \$(nfds) -le $FDS_HELD ]" 20
"$IDLE" "$HOST" 11 0 > "$E2E_TMP/over.out" 2>&1
check "--max-conns $MAX: 10 more answered, the next one closed" \
    "opened=11 answered=10 closed=1 failed=0" "$(head -n 1 "$E2E_TMP/over.out")"
grep -q 'event=conn_refused reason=max_conns' "$E2E_TMP/broker.log"
check "the refusal is logged" 0 $?

# 4. The held connections are still there and served when used again.
kill -USR1 "$HOLDER"
wait "$HOLDER"
check "idle connections: jrpc-bench-idle exit status" 0 $?
check "idle connections: all served again after the hold" "reanswered=$HELD lost=0" \
    "$(grep '^reanswered=' "$E2E_TMP/held.out")"
check "broker alive" 0 "$(kill -0 "$BROKER_PID"; echo $?)"
e2e_finish
