#!/usr/bin/env bash
# jrpc-stdio: a pool of stdio JSON-RPC servers (tests/e2e/stdio_server.py, no
# JSON-RPC library) behind the real broker, driven over ZeroMQ (jrpc) and
# HTTP (curl): batches, the spread over children, a child killed mid-batch,
# hostile children, error objects and a 1 MiB result passed through, LSP
# framing, hangs, the restart budget, and SIGTERM without zombies or orphans.
source "$JRPC_E2E_LIB"
command -v curl >/dev/null || { echo "curl is required"; exit 1; }
command -v pgrep >/dev/null || { echo "pgrep is required"; exit 1; }
# A copy of its own: the checks find this test's children by their command
# line, and the same test may run at once in another build (tests/run.sh).
SERVER=$E2E_TMP/stdio_server.py
cp "$(dirname "$JRPC_E2E_LIB")/stdio_server.py" "$SERVER"
E2E_HTTP=1 e2e_start_broker --timeout-ms 10000
send() { printf '%s' "$1" | "$JRPC" send; }
hpost() { curl -sS --max-time 10 -H 'Content-Type: application/json' --data-binary "$1" "$HTTP_URL/rpc"; }
now_ms() { date +%s%3N; }

# start_stdio TAG [BRIDGE_ARGS...] -- [SERVER_ARGS...]: one bridge whose
# children carry --tag=TAG on their command line; sets STDIO_PID.
NSTDIO=0
start_stdio() {
    local tag=$1; shift
    local bargs=() sargs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do bargs+=("$1"); shift; done
    shift
    sargs=("$@")
    NSTDIO=$((NSTDIO + 1))
    STDIO_LOG="$E2E_TMP/stdio_$tag.log"
    "$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" "${bargs[@]}" \
        -- python3 "$SERVER" "--tag=$tag" "${sargs[@]}" >>"$STDIO_LOG" 2>&1 &
    STDIO_PID=$!
    E2E_PIDS+=("$STDIO_PID")
}
# The children of bridge TAG, by their command line (the bridge's own names
# the command too, after "--", but does not start with it).
children() { pgrep -f -- "^[^ ]*python3[^ ]* $SERVER --tag=$1( |\$)" | sort -n | tr '\n' ' ' | sed 's/ $//'; }
nchildren() { pgrep -f -- "^[^ ]*python3[^ ]* $SERVER --tag=$1( |\$)" | wc -l; }
stop_stdio() {  # PID TAG: SIGTERM, wait for the exit, check no child is left
    kill -TERM "$1"
    local st=0
    wait "$1" || st=$?
    check "$2: SIGTERM exits 0" 0 "$st"
    check "$2: no child left behind" 0 "$(nchildren "$2")"
}

# ---- a pool of 4 -------------------------------------------------------
start_stdio A --procs 4 --admin 127.0.0.1:0 --method upper --method sleep --method fail \
    --method big --method pid -- --stderr
e2e_wait_workers 1
e2e_wait_for "[ \$(nchildren A) = 4 ]" 10
check "4 children started" 4 "$(nchildren A)"
ADMIN=$(grep -o 'event=listening endpoint=admin://[0-9.:]*' "$STDIO_LOG" | sed 's|.*admin://||')
metric() {  # NAME: the sum of its samples on /metrics
    curl -s --max-time 5 "http://$ADMIN/metrics" |
        awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $2 } END { print s + 0 }'
}
check "admin: /readyz ready" "200" "$(curl -s -o /dev/null -w '%{http_code}' "http://$ADMIN/readyz")"
check "metrics: 4 children alive" 4 "$(metric jrpc_stdio_children_alive)"

BATCH='[{"jsonrpc":"2.0","method":"upper","params":["abc"],"id":1},
        {"jsonrpc":"2.0","method":"upper","params":{"text":"dé"},"id":"x"},
        {"jsonrpc":"2.0","method":"upper","params":["n"]},
        {"jsonrpc":"2.0","method":"upper","params":["abc"],"id":1},
        {"jsonrpc":"2.0","method":"nosuch","id":5}]'
# The child's result and error data as it wrote them (Python's json escapes
# non-ASCII): jrpc-stdio declares its methods "json", nothing is re-encoded.
WANT='[{"jsonrpc":"2.0","result":"ABC","id":1},{"jsonrpc":"2.0","result":"D\u00c9","id":"x"},{"jsonrpc":"2.0","result":"ABC","id":1},{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":5}]'
check "batch over ZeroMQ" "$WANT" "$(send "$BATCH")"
check "batch over HTTP" "$WANT" "$(hpost "$BATCH")"

FAIL_WANT='{"jsonrpc":"2.0","error":{"code":-32050,"message":"it failed on purpose","data":{"why":"asked","list":[1,2.5,null,"\u00e9"]}},"id":9}'
check "the child's error object reaches the client unchanged (ZeroMQ)" "$FAIL_WANT" \
    "$(send '{"jsonrpc":"2.0","method":"fail","id":9}')"
check "the child's error object reaches the client unchanged (HTTP)" "$FAIL_WANT" \
    "$(hpost '{"jsonrpc":"2.0","method":"fail","id":9}')"

big_want=$(python3 -c 'import hashlib;n=1<<20;s=("0123456789abcdef"*(n//16+1))[:n];print(hashlib.sha256(("{\"jsonrpc\":\"2.0\",\"result\":\"%s\",\"id\":1}" % s).encode()).hexdigest())')
check "a 1 MiB result intact (ZeroMQ)" "$big_want" \
    "$(send '{"jsonrpc":"2.0","method":"big","id":1}' | tr -d '\n' | sha256sum | cut -d' ' -f1)"
check "a 1 MiB result intact (HTTP)" "$big_want" \
    "$(hpost '{"jsonrpc":"2.0","method":"big","id":1}' | sha256sum | cut -d' ' -f1)"

# 8 calls of 200 ms, 4 children with a window of 1: two rounds, not eight.
SLEEP8='['
for i in 1 2 3 4 5 6 7 8; do
    SLEEP8+="{\"jsonrpc\":\"2.0\",\"method\":\"sleep\",\"params\":{\"ms\":200},\"id\":$i}"
    [ $i -lt 8 ] && SLEEP8+=','
done
SLEEP8+=']'
t0=$(now_ms); out=$(send "$SLEEP8"); t1=$(now_ms)
check "8 sleeps all answered" 8 "$(grep -o '"result":200' <<<"$out" | wc -l)"
el=$((t1 - t0))
check "8 x 200 ms over 4 children take about 2 rounds (350..1200 ms, took $el)" yes \
    "$( [ $el -gt 350 ] && [ $el -lt 1200 ] && echo yes || echo no)"
pids=$(send '[{"jsonrpc":"2.0","method":"pid","id":1},{"jsonrpc":"2.0","method":"pid","id":2},
              {"jsonrpc":"2.0","method":"pid","id":3},{"jsonrpc":"2.0","method":"pid","id":4}]' |
       grep -o '"result":[0-9]*' | sort -u | wc -l)
check "4 concurrent calls land on 4 different children" 4 "$pids"

c1=$(children A | cut -d' ' -f1)
check "a child's stderr is logged with its pid" 1 \
    "$(grep -c "event=child_stderr pid=$c1 line=\"serving" "$STDIO_LOG" | awk '{print ($1 > 0)}')"

# A child killed mid-batch: 4 sleeps of 1500 ms, one child killed at 300 ms.
before=$(children A)
send '[{"jsonrpc":"2.0","method":"sleep","params":{"ms":1500},"id":1},
       {"jsonrpc":"2.0","method":"sleep","params":{"ms":1500},"id":2},
       {"jsonrpc":"2.0","method":"sleep","params":{"ms":1500},"id":3},
       {"jsonrpc":"2.0","method":"sleep","params":{"ms":1500},"id":4}]' >"$E2E_TMP/killed.out" &
sp=$!
sleep 0.3
victim=$(children A | cut -d' ' -f2)
kill -9 "$victim"
wait $sp
out=$(cat "$E2E_TMP/killed.out")
check "every call answered: 3 results" 3 "$(grep -o '"result":1500' <<<"$out" | wc -l)"
check "every call answered: 1 x -32004" 1 "$(grep -o '"code":-32004' <<<"$out" | wc -l)"
e2e_wait_for "[ \$(nchildren A) = 4 ] && ! grep -qw $victim <<<\"\$(children A)\"" 10
after=$(children A)
check "the killed child is replaced (4 children, its pid gone)" "4 no" \
    "$(nchildren A) $(grep -qw "$victim" <<<"$after" && echo yes || echo no)"
check "later calls served" "$WANT" "$(send "$BATCH")"
check "the loss was logged with the pid" 1 \
    "$(grep -c "event=child_lost pid=$victim .*failed=1" "$STDIO_LOG")"
check "metrics: 1 restart, 1 call lost, 4 alive" "1 1 4" \
    "$(metric jrpc_stdio_restarts_total) $(metric jrpc_stdio_calls_lost_total) $(metric jrpc_stdio_children_alive)"
check "metrics: answers counted and timed per child" yes \
    "$( [ "$(metric jrpc_stdio_calls_total)" -ge 20 ] &&
        [ "$(metric jrpc_stdio_calls_total)" = "$(metric jrpc_stdio_answer_seconds_count)" ] &&
        [ "$(metric jrpc_stdio_call_errors_total)" = 2 ] && echo yes || echo no)"

# SIGTERM with calls in flight: they are answered, then a clean exit.
send '[{"jsonrpc":"2.0","method":"sleep","params":{"ms":600},"id":1},
       {"jsonrpc":"2.0","method":"sleep","params":{"ms":600},"id":2}]' >"$E2E_TMP/term.out" &
sp=$!
# Both calls at the children before the signal (a loaded machine may take
# longer than a fixed pause to get them there).
e2e_wait_for "[ \"\$(metric jrpc_stdio_inflight)\" = 2 ]" 10
stop_stdio "$STDIO_PID" A
wait $sp
check "calls held at SIGTERM are answered" 2 "$(grep -o '"result":600' "$E2E_TMP/term.out" | wc -l)"
check "no zombie of the bridge's children" 0 \
    "$(ps -eo stat,args | grep -- '--tag=A' | grep -c '^Z')"

# ---- a lost child's calls: -32004 at once, or re-dispatched ---------------
start_stdio B --procs 1 --method sleep --
e2e_wait_workers 1
e2e_wait_for "[ \$(nchildren B) = 1 ]" 10
( t0=$(now_ms); out=$("$JRPC" call sleep '{"ms":5000}'); echo "$(( $(now_ms) - t0 )) $out" ) \
    >"$E2E_TMP/once.out" &
sp=$!
sleep 0.4
kill -9 "$(children B)"
wait $sp
read -r el rest <"$E2E_TMP/once.out"
check "a lost call is answered -32004 at once" "-32004 yes" \
    "$(grep -o '"code":-32004' <<<"$rest" | cut -d: -f2) $( [ "$el" -lt 2000 ] && echo yes || echo no)"
stop_stdio "$STDIO_PID" B

start_stdio C --procs 2 --method sleep:idempotent --
e2e_wait_workers 1
e2e_wait_for "[ \$(nchildren C) = 2 ]" 10
send '[{"jsonrpc":"2.0","method":"sleep","params":{"ms":800},"id":1},
       {"jsonrpc":"2.0","method":"sleep","params":{"ms":800},"id":2}]' >"$E2E_TMP/idem.out" &
sp=$!
sleep 0.3
kill -9 "$(children C | cut -d' ' -f1)"
wait $sp
check "an idempotent call of a lost child is served by another" 2 \
    "$(grep -o '"result":800' "$E2E_TMP/idem.out" | wc -l)"
check "re-dispatch logged" 1 "$(grep -c 'event=child_lost .*failed=0 requeued=1' "$STDIO_LOG")"
stop_stdio "$STDIO_PID" C

# ---- --inflight 2: a window of 2 per child, credit procs x inflight ------
start_stdio H --procs 2 --inflight 2 --method sleep -- --threads
e2e_wait_workers 1
e2e_wait_for "[ \$(nchildren H) = 2 ]" 10
check "credit announced = procs x inflight" 1 \
    "$(grep -c 'event=connected .*credit=4 ' "$STDIO_LOG")"
S4='['
for i in 1 2 3 4; do
    S4+="{\"jsonrpc\":\"2.0\",\"method\":\"sleep\",\"params\":{\"ms\":1000},\"id\":$i}"
    [ $i -lt 4 ] && S4+=','
done
S4+=']'
t0=$(now_ms); out=$(send "$S4"); el=$(( $(now_ms) - t0 ))
# One round takes 1 s, two would take 2 s: the margin is wide enough for
# a loaded machine (300 ms calls against 550 ms failed there once).
check "4 x 1 s on 2 children with --inflight 2: one round, not two (< 1900 ms, took $el)" "4 yes" \
    "$(grep -o '"result":1000' <<<"$out" | wc -l) $( [ $el -lt 1900 ] && echo yes || echo no)"
stop_stdio "$STDIO_PID" H

# ---- hostile children ----------------------------------------------------
start_stdio D --procs 2 --max-line 1500000 --log-level debug --method upper --method big -- \
    --garbage --request --notify --huge
e2e_wait_workers 1
e2e_wait_for "[ \$(nchildren D) = 2 ]" 10
check "garbage, unknown ids, requests, notifications, a 2 MiB line: survived" "$WANT" \
    "$(send "$BATCH")"
check "garbage lines logged" 1 "$(grep -c 'event=child_garbage' "$STDIO_LOG" | awk '{print ($1 > 0)}')"
check "unknown ids logged" 1 "$(grep -c 'event=child_unknown_id pid=[0-9]* id=987654321' "$STDIO_LOG" | awk '{print ($1 > 0)}')"
check "child notifications logged at debug" 1 \
    "$(grep -c 'level=debug .*event=child_notification pid=[0-9]* method="notifications/progress"' "$STDIO_LOG" | awk '{print ($1 > 0)}')"
check "too-big messages logged" 1 "$(grep -c 'event=child_message_too_big' "$STDIO_LOG" | awk '{print ($1 > 0)}')"
e2e_wait_for "grep -q 'reply to my request' '$STDIO_LOG'" 15
check "a server->client request is answered -32601 on the child side" 1 \
    "$(grep -c 'reply to my request: .*srv-1.*-32601' "$STDIO_LOG" | awk '{print ($1 > 0)}')"
check "still the same children" 2 "$(nchildren D)"
check "the 1 MiB result still intact" "$big_want" \
    "$(send '{"jsonrpc":"2.0","method":"big","id":1}' | tr -d '\n' | sha256sum | cut -d' ' -f1)"
stop_stdio "$STDIO_PID" D

# ---- LSP framing ---------------------------------------------------------
start_stdio E --procs 2 --framing lsp --method upper --method fail --method big -- --lsp
e2e_wait_workers 1
e2e_wait_for "[ \$(nchildren E) = 2 ]" 10
check "LSP framing: a batch" "$WANT" "$(send "$BATCH")"
check "LSP framing: the error object" "$FAIL_WANT" "$(send '{"jsonrpc":"2.0","method":"fail","id":9}')"
check "LSP framing: 1 MiB intact" "$big_want" \
    "$(send '{"jsonrpc":"2.0","method":"big","id":1}' | tr -d '\n' | sha256sum | cut -d' ' -f1)"
stop_stdio "$STDIO_PID" E

# ---- --lsp-init: the bridge runs LSP's initialize/initialized itself ---------
# The server answers -32002 (ServerNotInitialized) to anything before it.
start_stdio L --procs 2 --framing lsp --method upper --method lspstate -- --lsp --need-init
e2e_wait_workers 1
e2e_wait_for "[ \$(nchildren L) = 2 ]" 10
check "no --lsp-init: the server is not initialized (-32002)" '"code":-32002' \
    "$(send '{"jsonrpc":"2.0","method":"upper","params":["x"],"id":1}' | grep -o '"code":-32002')"
stop_stdio "$STDIO_PID" L
echo '{"processId": null,
  "rootUri": "file:///srv", "capabilities": {}}' > "$E2E_TMP/lsp_init.json"
start_stdio M --procs 2 --framing lsp --lsp-init "$E2E_TMP/lsp_init.json" --method upper \
    --method lspstate -- --lsp --need-init
e2e_wait_workers 1
e2e_wait_for "[ \$(grep -c event=lsp_initialized '$STDIO_LOG') -ge 2 ]" 20
check "--lsp-init FILE: both children handshaken" 2 "$(grep -c event=lsp_initialized "$STDIO_LOG")"
check "--lsp-init FILE: calls served after it" '{"jsonrpc":"2.0","result":"X","id":1}' \
    "$(send '{"jsonrpc":"2.0","method":"upper","params":["x"],"id":1}')"
check "--lsp-init FILE: the child got those params, then initialized" \
    '{"jsonrpc":"2.0","result":{"initialize":{"processId":null,"rootUri":"file:///srv","capabilities":{}},"initialized":true},"id":2}' \
    "$(send '{"jsonrpc":"2.0","method":"lspstate","id":2}')"
stop_stdio "$STDIO_PID" M
start_stdio N --procs 1 --lsp-init '{"rootUri":null,"capabilities":{}}' --method upper -- --need-init
e2e_wait_workers 1
e2e_wait_for "grep -q event=lsp_initialized '$STDIO_LOG'" 20
check "--lsp-init JSON (NDJSON framing): served" '{"jsonrpc":"2.0","result":"Y","id":3}' \
    "$(send '{"jsonrpc":"2.0","method":"upper","params":["y"],"id":3}')"
stop_stdio "$STDIO_PID" N
"$JRPC_BIN/jrpc-stdio" --lsp-init '{"a":' --method x -- true >/dev/null 2>&1
check "--lsp-init: not a JSON object, exit 2" 2 "$?"
"$JRPC_BIN/jrpc-stdio" --lsp-init /nonexistent.json --method x -- true >/dev/null 2>&1
check "--lsp-init: no such file, exit 2" 2 "$?"
"$JRPC_BIN/jrpc-stdio" --mcp --lsp-init '{}' -- true >/dev/null 2>&1
check "--lsp-init with --mcp: exit 2" 2 "$?"

# ---- a hung child: -32003 at the deadline, killed after --hang-kill-ms -----
start_stdio F --procs 1 --hang-kill-ms 300 --method sleep --method upper --
e2e_wait_workers 1
e2e_wait_for "[ \$(nchildren F) = 1 ]" 10
hung=$(children F)
check "a call past its deadline: -32003" "-32003" \
    "$("$JRPC" -t 300 call sleep '{"ms":20000}' | grep -o '"code":-32003' | cut -d: -f2)"
# One child, not the hung one: read once (two pgreps could see the old
# child still dying, then no child yet between the fork and the exec).
replaced() { local c; c=$(children F); [ -n "$c" ] && [ "$c" = "${c%% *}" ] && [ "$c" != "$1" ]; }
e2e_wait_for "replaced $hung" 15
check "the hung child is killed and replaced" "1 yes" \
    "$(nchildren F) $( [ "$(children F)" != "$hung" ] && echo yes || echo no)"
check "and serves" '"X"' "$("$JRPC" call upper '["x"]')"
# SIGHUP (a closed terminal): logged and ignored, the bridge keeps serving.
kill -HUP "$STDIO_PID"
e2e_wait_for "grep -q 'event=signal signal=HUP action=ignored' '$STDIO_LOG'" 10
check "SIGHUP: logged, ignored, still serving" '1 "Y"' \
    "$(grep -c 'event=signal signal=HUP action=ignored' "$STDIO_LOG") $("$JRPC" call upper '["y"]')"
stop_stdio "$STDIO_PID" F

# ---- a child that keeps dying: restarts, then not-ready, no spinning -----
start_stdio G --procs 1 --restart-max-per-min 2 --method upper -- --exit-after 2
e2e_wait_workers 1
e2e_wait_for "[ \$(nchildren G) = 1 ]" 10
check "first call served" '"A"' "$("$JRPC" call upper '["a"]')"
check "the child exits on the second call: -32004" "-32004" \
    "$("$JRPC" call upper '["b"]' | grep -o '"code":-32004' | cut -d: -f2)"
e2e_wait_for "[ \$(nchildren G) = 1 ]" 15
check "restarted child serves" '"C"' "$("$JRPC" call upper '["c"]')"
"$JRPC" call upper '["d"]' >/dev/null   # second death, second restart
e2e_wait_for "[ \$(nchildren G) = 1 ]" 15
"$JRPC" call upper '["e"]' >/dev/null
"$JRPC" call upper '["f"]' >/dev/null   # third death: over the budget
e2e_wait_for "grep -q 'event=not_ready' '$STDIO_LOG'" 15
check "past --restart-max-per-min: not ready, logged" 1 "$(grep -c 'event=not_ready' "$STDIO_LOG")"
e2e_wait_for "[ \"\$(e2e_workers)\" = 0 ]" 15
check "not ready with no child: the bridge leaves the broker (DISCONNECT, 0 workers)" "0 1" \
    "$(e2e_workers) $(grep -c 'event=paused' "$STDIO_LOG")"
t0=$(now_ms)
check "not ready: a call gets an error from the broker, not a hang" "-32601" \
    "$("$JRPC" call upper '["g"]' | grep -o '"code":-32601' | cut -d: -f2)"
check "... within 3 s" yes "$( [ $(( $(now_ms) - t0 )) -lt 3000 ] && echo yes || echo no)"
check "no restart spinning (2 restarts)" 2 "$(grep -c 'event=child_started .*restarts=[1-9]' "$STDIO_LOG")"
stop_stdio "$STDIO_PID" G

st=0
"$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" --method x -- /nonexistent/server \
    >"$E2E_TMP/noexec.log" 2>&1 || st=$?
check "a command that cannot run: exit 2, said on stderr" "2 1" \
    "$st $(grep -c "cannot run '/nonexistent/server'" "$E2E_TMP/noexec.log")"

check "no child of any bridge left" 0 "$(pgrep -f -- "^[^ ]*python3[^ ]* $SERVER" | wc -l)"
e2e_finish
