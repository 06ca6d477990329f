#!/usr/bin/env bash
# Per-method and per-worker figures (issue 33): after a mixed load over HTTP
# and ZeroMQ (results, worker errors -32602, timeouts -32003, a method
# nobody serves), jrpc_method_calls_total counts exactly the calls sent, by
# method and outcome, jrpc_method_errors_total by code; the workers'
# answered counts add up to the methods' answered calls; with
# --metrics-max-methods 2 the methods past the bound are counted under
# method="other"; the access line names the path and the methods.
source "$JRPC_E2E_LIB"
# Debian's python3 has python3-websockets (a client no one here wrote)
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
$PY -c 'import websockets' 2>/dev/null || { echo "python3-websockets is not installed"; exit 1; }

# ---- the load ----
start() { # [BROKER ARGS...]
    E2E_HTTP=1 e2e_start_broker --admin 127.0.0.1:0 --timeout-ms 400 --heartbeat-ms 200 "$@"
    ADMIN=$(e2e_admin_url)
}
scrape() { curl -s "$ADMIN/metrics" > "$E2E_TMP/m"; }
# val 'name{labels}' -> its value in the last scrape (0 when absent)
val() { awk -v k="$1" '$1 == k { v = $2 } END { print v == "" ? 0 : v }' "$E2E_TMP/m"; }
calls() { val "jrpc_method_calls_total{service=\"\",method=\"$1\",outcome=\"$2\"}"; }
post() { curl -s -H 'Content-Type: application/json' --data-binary "$1" "$HTTP_URL/rpc"; }
# sum of a per-worker family over the workers
wsum() { awk -v f="$1" 'index($1, f "{worker=") == 1 { s += $2 } END { print s + 0 }' "$E2E_TMP/m"; }

load() {
    local i
    for i in 1 2 3 4 5; do post '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}' >/dev/null; done
    for i in 1 2 3; do post '{"jsonrpc":"2.0","method":"add","params":["x"],"id":2}' >/dev/null; done
    post '[{"jsonrpc":"2.0","method":"echo","params":[1],"id":1},
           {"jsonrpc":"2.0","method":"get_data","id":2},
           {"jsonrpc":"2.0","method":"echo","params":[2],"id":3},
           {"jsonrpc":"2.0","method":"sleep","params":{"ms":-1},"id":4}]' >/dev/null
    # one call on the MCP path, one message on a WebSocket
    curl -s -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
        --data-binary '{"jsonrpc":"2.0","method":"get_data","id":7}' "$HTTP_URL/mcp" >/dev/null
    $PY - "ws://127.0.0.1:$HTTP_PORT/rpc" <<'WS'
import asyncio, sys, websockets
async def main():
    async with websockets.connect(sys.argv[1]) as ws:
        await ws.send('{"jsonrpc":"2.0","method":"echo","params":[3],"id":8}')
        await ws.recv()
asyncio.run(main())
WS
    for i in 1 2; do "$JRPC" call add '[2,3]' >/dev/null; done
    "$JRPC" call sum '["y"]' >/dev/null 2>&1
    # two timeouts: 1500 ms of sleep, 400 ms of deadline (one over each transport)
    post '{"jsonrpc":"2.0","method":"sleep","params":{"ms":1500},"id":6}' >/dev/null
    "$JRPC" call sleep '{"ms":1500}' >/dev/null 2>&1
}

start
e2e_start_worker --name w1 --credit 8
e2e_start_worker --name w2 --credit 8
e2e_wait_workers 2
# A method nobody serves: queued while the start-up grace lasts (then
# -32003 at the deadline), -32601 after it; either way under "other".
: > "$E2E_TMP/nope"
e2e_wait_for "post '{\"jsonrpc\":\"2.0\",\"method\":\"nope\",\"id\":5}' | tee -a \"\$E2E_TMP/nope\" | grep -q -- -32601" 20
load
scrape
nf=$(grep -o -- '-32601' "$E2E_TMP/nope" | wc -l); nt=$(grep -o -- '-32003' "$E2E_TMP/nope" | wc -l)

check "add: 7 ok (5 HTTP, 2 ZeroMQ)" 7 "$(calls add ok)"
check "add: 3 errors" 3 "$(calls add error)"
check "add: -32602 three times" 3 "$(val 'jrpc_method_errors_total{service="",method="add",code="-32602"}')"
check "echo: 3 ok, get_data: 2 ok (a batch, MCP, WebSocket)" "3 2" "$(calls echo ok) $(calls get_data ok)"
check "sleep: 1 worker error, 2 timeouts" "1 2" "$(calls sleep error) $(calls sleep timeout)"
check "sleep: errors by code -32602 and -32003" "1 2" \
    "$(val 'jrpc_method_errors_total{service="",method="sleep",code="-32602"}') $(val 'jrpc_method_errors_total{service="",method="sleep",code="-32003"}')"
check "sum: 1 error over ZeroMQ" 1 "$(calls sum error)"
check "a method nobody serves: not_found and timeouts under other" "1 $nt" "$(calls other not_found) $(calls other timeout)"
check "no other outcome anywhere" 0 \
    "$(awk '/^jrpc_method_calls_total/ && /outcome="(lost|busy|denied|failed)"/ { s += $2 } END { print s + 0 }' "$E2E_TMP/m")"
check "call time per method: one observation per call (add)" 10 \
    "$(val 'jrpc_method_call_seconds_count{service="",method="add"}')"
check "worker time per method: answered calls only (add)" 10 \
    "$(val 'jrpc_method_worker_seconds_count{service="",method="add"}')"
# per worker: what they answered in time is what the methods counted ok/error
answered=$(awk '/^jrpc_method_calls_total/ && /outcome="(ok|error)"/ { s += $2 } END { print s + 0 }' "$E2E_TMP/m")
check "answered per worker add up (ok + error over the methods: $answered)" "$answered" "$(wsum jrpc_worker_answered_total)"
check "errors per worker add up (worker errors: 3 + 1 + 1)" 5 "$(wsum jrpc_worker_errors_total)"
check "timeouts per worker add up" 2 "$(wsum jrpc_worker_timeouts_total)"
check "both workers have series" "2 2" \
    "$(grep -c '^jrpc_worker_answered_total{worker="w[12]"}' "$E2E_TMP/m") $(grep -c '^jrpc_worker_last_heard_timestamp_seconds{worker="w[12]"}' "$E2E_TMP/m")"
now=$(date +%s)
lh=$(val 'jrpc_worker_last_heard_timestamp_seconds{worker="w1"}' | cut -d. -f1)
check "last heard: within 10 s of now" 1 "$(( lh > now - 10 && lh <= now + 1 ))"

# runs of one method, interleaved (A,A,B,A,B,B; an error inside a run): the
# broker counts by runs (the reply, the worker's RESPONSE), every call still
# in its own method's series, exactly
before="$(calls add ok) $(calls add error) $(calls echo ok) $(val 'jrpc_method_worker_seconds_count{service="",method="add"}') $(val 'jrpc_method_worker_seconds_count{service="",method="echo"}') $(val 'jrpc_method_call_seconds_count{service="",method="echo"}')"
post '[{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1},
       {"jsonrpc":"2.0","method":"add","params":[3,4],"id":2},
       {"jsonrpc":"2.0","method":"echo","params":[1],"id":3},
       {"jsonrpc":"2.0","method":"add","params":["x"],"id":4},
       {"jsonrpc":"2.0","method":"echo","params":[2],"id":5},
       {"jsonrpc":"2.0","method":"echo","params":[3],"id":6}]' >/dev/null
scrape
after="$(calls add ok) $(calls add error) $(calls echo ok) $(val 'jrpc_method_worker_seconds_count{service="",method="add"}') $(val 'jrpc_method_worker_seconds_count{service="",method="echo"}') $(val 'jrpc_method_call_seconds_count{service="",method="echo"}')"
read -ra b0 <<<"$before"; read -ra a0 <<<"$after"
delta=""; for k in "${!a0[@]}"; do delta="$delta${delta:+ }$(( ${a0[k]} - ${b0[k]} ))"; done
check "runs A,A,B,A,B,B: add +2 ok +1 error, echo +3 ok, worker time add +3 echo +3, call time echo +3" \
    "2 1 3 3 3 3" "$delta"

# the access line: path and methods
check "access: HTTP single call names /rpc and its method" "$((nf + nt))" \
    "$(grep -c 'event=access transport=http path=/rpc .* calls=1 methods=1 method=nope ' "$E2E_TMP/broker.log")"
check "access: a batch names its distinct methods (3) and the first few" 1 \
    "$(grep -c 'event=access transport=http path=/rpc .* calls=4 methods=3 method=echo,get_data,sleep ' "$E2E_TMP/broker.log")"
check "access: the MCP path" 1 \
    "$(grep -c 'event=access transport=http path=/mcp .* calls=1 methods=1 method=get_data ' "$E2E_TMP/broker.log")"
check "access: a WebSocket message says path=ws" 1 \
    "$(grep -c 'event=access transport=ws path=ws .* calls=1 methods=1 method=echo ' "$E2E_TMP/broker.log")"
# a method name a client chose: no space, quote or newline reaches the log
post '{"jsonrpc":"2.0","method":"a b\"c\n<d>","id":9}' >/dev/null
e2e_wait_for "grep -q 'method=a?b?c?.d.' \"\$E2E_TMP/broker.log\"" 10
check "access: a hostile method name is shown with '?' for what is not [A-Za-z0-9._:/@-]" 1 \
    "$(grep -c 'calls=1 methods=1 method=a?b?c??d? errors=1 ' "$E2E_TMP/broker.log")"
check "access: ZeroMQ says path=zmq" 2 \
    "$(grep -c 'event=access transport=zmq path=zmq .* calls=1 methods=1 method=add ' "$E2E_TMP/broker.log")"

# ---- the bound: --metrics-max-methods 2 ----
E2E_HTTP=1 e2e_restart_broker --admin 127.0.0.1:0 --timeout-ms 400 --heartbeat-ms 200 \
    --metrics-max-methods 2
ADMIN=$(e2e_admin_url)
e2e_wait_for "curl -s $ADMIN/metrics | grep -q '^jrpc_workers_connected 2'" 20 ||
    check "workers back after the restart" 2 0
# the first READY's first two names have records (subtract, sum); the rest: other
for i in 1 2 3 4; do post '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}' >/dev/null; done
post '{"jsonrpc":"2.0","method":"subtract","params":[3,1],"id":1}' >/dev/null
scrape
check "past the bound: add counted under other" 4 "$(calls other ok)"
check "past the bound: no add series" 0 "$(grep -c 'method="add"' "$E2E_TMP/m")"
check "within it: subtract has its own" 1 "$(calls subtract ok)"
check "two records and other" 3 "$(grep -c '^jrpc_method_calls_total{.*outcome="ok"}' "$E2E_TMP/m")"
e2e_finish
