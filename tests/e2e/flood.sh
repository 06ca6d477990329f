#!/usr/bin/env bash
# Notification floods (issue 36, item 1): a body of notifications is answered
# at once (204 on /rpc, 202 on /mcp, nothing on a WebSocket) while its calls
# wait for a slow worker. What such bodies hold counts against their
# connection (--conn-max-queued-bytes: the broker stops reading it), their
# address (--peer-max-queued-bytes) and everyone (--max-queued-bytes): past
# those, 503 / -32000. Each flood sends notifications with 512 KB of params
# (60 KB over ZeroMQ) as fast as the broker takes them; the broker's peak RSS
# (VmHWM) must stay under FLOOD_RSS_MB, 100 (about 20 MB with the fix; before
# it, 425 MB after the first flood), and afterwards it still answers a normal
# call.
source "$JRPC_E2E_LIB"
E2E_HTTP=1
HERE=$(dirname "$0")
PROBE="$JRPC_BIN/jrpc-test-zmq-probe"

# Under ASan the RSS says little (shadow memory, the quarantine of freed
# blocks): the functional checks stay, the bound is not asserted.
ASAN=
grep -q '^JRPC_SANITIZE:BOOL=ON' "$JRPC_BIN/../CMakeCache.txt" 2>/dev/null && ASAN=1
RSS_MB=${FLOOD_RSS_MB:-100}

# Default bounds; a 2 s deadline so that what a flood left is let go soon.
start() {
    e2e_start_broker --admin 127.0.0.1:0 --timeout-ms 2000 "$@"
    ADMIN=$(e2e_admin_url)
}
start
# One slow worker: one call at a time, 200 ms each.
e2e_start_worker --credit 1
e2e_wait_workers 1

metric() { curl -s "$ADMIN/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }
mb() { awk -v k="$1:" '$1 == k { print int($2 / 1024) }' "/proc/$BROKER_PID/status"; }
drained() { [ "$(metric jrpc_queued_bytes)" = 0 ] && [ "$(metric jrpc_bodies_open)" = 0 ]; }

# phase NAME COMMAND...: runs the flood, sampling the broker's RSS, then checks.
phase() {
    local name=$1 peak=0 r p
    shift
    "$@" > "$E2E_TMP/flood.out" 2>&1 &
    p=$!
    while kill -0 "$p" 2>/dev/null; do
        r=$(mb VmRSS)
        [ "${r:-0}" -gt "$peak" ] && peak=$r
        sleep 0.05
    done
    wait "$p"
    local rc=$?
    OUT=$(cat "$E2E_TMP/flood.out")
    echo "# $name: $OUT; broker RSS peak sampled ${peak} MB, VmHWM $(mb VmHWM) MB"
    check "$name: the flood ran" 0 "$rc"
    check "$name: the broker is alive" 0 "$(kill -0 "$BROKER_PID"; echo $?)"
    [ -z "$ASAN" ] && check "$name: broker peak RSS (VmHWM) under $RSS_MB MB" 1 \
        "$(( $(mb VmHWM) < RSS_MB ))"
    # The deadline lets go of what is held; then everything is read again.
    e2e_wait_for drained 30
    check "$name: everything held is let go" "0 0" \
        "$(metric jrpc_queued_bytes) $(metric jrpc_bodies_open)"
}
flood() { python3 "$HERE/flood.py" "$1" "$HTTP_PORT" "$2" "$3" "${4:-3}"; }
others() { echo "$OUT" | sed -n 's/.* other=\([0-9]*\).*/\1/p'; }

# (a) /rpc, two connections, up to 240 bodies each (before the fix: 4 GB in 4 s).
phase "/rpc x2" flood rpc 2 240
check "/rpc: answers are 204 or 503, nothing else" 0 "$(others)"
check "/rpc: connections stopped being read (jrpc_queue_pushbacks_total > 0)" 1 \
    "$(( $(metric jrpc_queue_pushbacks_total) > 0 ))"
# (b) /mcp, one connection.
phase "/mcp" flood mcp 1 400
check "/mcp: answers are 202 or 503, nothing else" 0 "$(others)"
# (c) a WebSocket (slower to take messages: longer).
phase "WebSocket" flood ws 1 600 6
check "WebSocket: no message but -32000" 0 "$(others)"
# (d) /rpc, four connections from one address: past --peer-max-queued-bytes, 503.
phase "/rpc x4" flood rpc 4 120
check "/rpc x4: one address past its bound is refused 503" 1 \
    "$(( $(echo "$OUT" | sed -n 's/.* busy=\([0-9]*\).*/\1/p') > 0 ))"
# (e) ZeroMQ: no connection to stop reading; the address's bound refuses.
PAD=$(head -c 60000 /dev/zero | tr '\0' x)
ZBODY="{\"jsonrpc\":\"2.0\",\"method\":\"sleep\",\"params\":{\"ms\":200,\"pad\":\"$PAD\"}}"
REFUSED=$(metric jrpc_queue_refused_total)
phase "ZeroMQ" "$PROBE" --type dealer --connect "$URL" --no-reply --repeat 3000 "$ZBODY"
check "ZeroMQ: bodies refused for queued bytes (jrpc_queue_refused_total grew)" 1 \
    "$(( $(metric jrpc_queue_refused_total) > REFUSED ))"

# After the floods: a normal call is answered, over both fronts.
check "a normal call over ZeroMQ" 3 "$("$JRPC" call add '[1,2]')"
check "a normal call over HTTP" 3 "$("$JRPC" --url "$HTTP_URL" call add '[1,2]')"
check "refusals are counted as busy bodies" 1 \
    "$(( $(curl -s "$ADMIN/metrics" | grep -c 'jrpc_bodies_total{.*outcome="busy"}') > 0 ))"

# (f) The total bound alone (no per-address bound; 16 MiB to stay under the
# RSS bound): ZeroMQ again.
kill "$BROKER_PID"; wait "$BROKER_PID" 2>/dev/null
start --peer-max-queued-bytes 0 --max-queued-bytes 16777216
e2e_start_worker --credit 1
e2e_wait_workers 1
phase "ZeroMQ, --max-queued-bytes only" "$PROBE" --type dealer --connect "$URL" --no-reply \
    --repeat 3000 "$ZBODY"
check "ZeroMQ: refused past --max-queued-bytes" 1 "$(( $(metric jrpc_queue_refused_total) > 0 ))"
check "a normal call after it" 3 "$("$JRPC" call add '[1,2]')"
e2e_finish
