#!/usr/bin/env bash
# jrpc-stdio and a noisy child (issue 36, item 3): one child of three floods
# its stderr with empty lines and its stdout with lines that are not JSON for
# a few seconds. The bridge must stay the broker's worker all along (no
# worker_lost: its heartbeats go out), every call to the pool is answered,
# and the bridge's log stays small (the child's lines are rate-limited and
# summarised in child_log_suppressed lines).
source "$JRPC_E2E_LIB"
# A copy of its own: the checks find this test's children by their command
# line, and the same test may run at once in another build (tests/run.sh).
SERVER=$E2E_TMP/stdio_server.py
cp "$(dirname "$JRPC_E2E_LIB")/stdio_server.py" "$SERVER"
FLOOD_MS=4000
LOG_MAX=$((2 * 1024 * 1024))   # bytes of bridge log allowed for the whole test
e2e_start_broker --timeout-ms 10000
send() { printf '%s' "$1" | "$JRPC" send; }
log_bytes() { stat -c %s "$STDIO_LOG"; }

STDIO_LOG="$E2E_TMP/stdio.log"
"$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" --procs 3 --method upper --method flood \
    -- python3 "$SERVER" "--tag=noisy$$" >>"$STDIO_LOG" 2>&1 &
STDIO_PID=$!
E2E_PIDS+=("$STDIO_PID")
e2e_wait_workers 1
e2e_wait_for "[ \$(grep -c event=child_started '$STDIO_LOG') -ge 3 ]" 15
check "3 children started" 3 "$(grep -c event=child_started "$STDIO_LOG")"
UPPER='{"jsonrpc":"2.0","method":"upper","params":["abc"],"id":1}'
check "a call before the flood" '{"jsonrpc":"2.0","result":"ABC","id":1}' "$(send "$UPPER")"

check "one child starts flooding" '{"jsonrpc":"2.0","result":"flooding","id":2}' \
    "$(send '{"jsonrpc":"2.0","method":"flood","params":{"ms":'$FLOOD_MS',"stderr":true,"stdout":true},"id":2}')"
# Calls while it floods (and a little after), each to whichever child the
# bridge picks: every one answered. Stops early when the log has already
# outgrown its bound (the test has failed; no need to fill the disk).
ok=0 bad=0
end=$(( $(date +%s%3N) + FLOOD_MS + 1000 ))
while [ "$(date +%s%3N)" -lt $end ] && [ "$(log_bytes)" -le $LOG_MAX ]; do
    got=$(send "$UPPER")
    if [ "$got" = '{"jsonrpc":"2.0","result":"ABC","id":1}' ]; then ok=$((ok + 1)); else
        bad=$((bad + 1)); echo "  during the flood: $got"; fi
    sleep 0.1
done
echo "  calls during the flood: $ok answered, $bad not"
check "every call during the flood answered" 0 "$bad"
check "calls went on during the flood" yes "$([ $ok -ge 5 ] && echo yes || echo "no ($ok)")"
check "the broker never lost the bridge" 0 "$(grep -c 'event=worker_lost' "$E2E_TMP/broker.log")"
check "a call after the flood" '{"jsonrpc":"2.0","result":"ABC","id":1}' "$(send "$UPPER")"
check "the bridge's log stays under $LOG_MAX bytes" yes \
    "$([ "$(log_bytes)" -le $LOG_MAX ] && echo yes || echo "no ($(log_bytes) bytes)")"
e2e_wait_for "grep -q 'event=child_log_suppressed' '$STDIO_LOG'" 5
check "what was not logged is summarised" 1 \
    "$(grep -c 'event=child_log_suppressed .*lines=[1-9][0-9]* bytes=[0-9]' "$STDIO_LOG" | sed 's/^[1-9][0-9]*$/1/')"
check "no child was lost" 0 "$(grep -c 'event=child_lost' "$STDIO_LOG")"
kill -TERM "$STDIO_PID"
st=0
wait "$STDIO_PID" || st=$?
check "SIGTERM exits 0" 0 "$st"
e2e_finish
