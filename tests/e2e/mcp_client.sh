#!/usr/bin/env bash
# libjrpc-client speaking MCP (opts.mcp; `jrpc --mcp`, `jrpc-bench --mcp`,
# issue 35's load that is not the bottleneck) against the real thing: the
# broker's /mcp, jrpc-stdio --mcp --sessions, npm server-everything.
#   - `jrpc --mcp call tools/call` opens a session (the bridge logs its
#     session_begin: initialize reached it), prints the tool's answer and
#     ends the session at exit (DELETE: session_end reason=deleted);
#     `jrpc --mcp` with a tcp:// URL is a usage error (exit 2);
#   - `jrpc-bench --mcp`, 4 connections: 4 sessions begun, every call
#     answered with its own id (lost 0, errors {}), the window on stderr;
#   - `jrpc-bench --mcp` with --batch 100, or a tcp:// URL: usage error 2;
#     nothing listening: exit 2, "could not be set up".
source "$JRPC_E2E_LIB"
source "$(dirname "$JRPC_E2E_LIB")/mcp_lib.sh"
mcp_need server-everything
EVERYTHING=$NODE_MODS/@modelcontextprotocol/server-everything/dist/index.js

E2E_HTTP=1 e2e_start_broker --timeout-ms 30000
MCP="$HTTP_URL/mcp"
LOG=$E2E_TMP/bridge.log
"$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" --mcp --sessions --procs 2 --log-level info \
    -- node "$EVERYTHING" stdio >>"$LOG" 2>&1 &
E2E_PIDS+=("$!")
e2e_wait_workers 1
e2e_wait_for "[ \$(grep -c event=mcp_initialized '$LOG') -ge 2 ]" 30
sessions() { grep -c 'event=session_begin' "$LOG"; }

# ---- jrpc --mcp ---------------------------------------------------------------
out=$("$JRPC_BIN/jrpc" --url "$MCP" --mcp -t 10000 call tools/call \
      '{"name":"echo","arguments":{"message":"hello over mcp"}}' 2>&1); rc=$?
echo "$out"
check "jrpc --mcp call tools/call: exit 0" 0 "$rc"
check "jrpc --mcp: the tool's answer printed" 1 "$(grep -c 'Echo: hello over mcp' <<<"$out")"
check "jrpc --mcp: a session begun on the bridge (initialize reached it)" 1 "$(sessions)"
e2e_wait_for "grep -q 'event=session_end .*reason=deleted' '$LOG'" 10
check "jrpc --mcp: its session ended at exit (DELETE)" 1 "$(grep -c 'event=session_end .*reason=deleted' "$LOG")"
out=$("$JRPC_BIN/jrpc" --url "$URL" --mcp call ping 2>&1); rc=$?
check "jrpc --mcp with a tcp:// URL: usage error" 2 "$rc"
check "jrpc --mcp with a tcp:// URL: says why" 1 "$(grep -c -- '--mcp is for http:// and https://' <<<"$out")"

# ---- jrpc-bench --mcp ---------------------------------------------------------
"$JRPC_BIN/jrpc-bench" --url "$MCP" --mcp --batch 1 --connections 4 --duration 1 --warmup 0.2 \
    --method tools/call --params '{"name":"echo","arguments":{"message":"hi"}}' --json \
    >"$E2E_TMP/bench.json" 2>"$E2E_TMP/bench.err"; rc=$?
cat "$E2E_TMP/bench.json" "$E2E_TMP/bench.err"
check "jrpc-bench --mcp: exit 0" 0 "$rc"
check "jrpc-bench --mcp: 4 more sessions begun" 5 "$(sessions)"
e2e_wait_for "[ \$(grep -c 'event=session_end .*reason=deleted' '$LOG') -ge 5 ]" 10
check "jrpc-bench --mcp: the 4 sessions ended at its exit" 5 "$(grep -c 'event=session_end .*reason=deleted' "$LOG")"
check "jrpc-bench --mcp: the window said on stderr" 1 \
    "$(grep -cE '^jrpc-bench: 4 MCP sessions open; window [0-9]+ [0-9]+ \(Unix ms\)$' "$E2E_TMP/bench.err")"
calls=$(grep -o '"calls":[0-9]*' "$E2E_TMP/bench.json" | cut -d: -f2)
check "jrpc-bench --mcp: calls answered" 1 "$([ "${calls:-0}" -gt 0 ] && echo 1 || echo 0)"
check "jrpc-bench --mcp: every id back once, no error" 1 \
    "$(grep -c '"errors":{},"transport_failures":0,.*"lost":0,"duplicated":0,"unexpected":0,"bad_replies":0' "$E2E_TMP/bench.json")"

"$JRPC_BIN/jrpc-bench" --url "$MCP" --mcp --batch 100 --duration 1 >/dev/null 2>&1; rc=$?
check "jrpc-bench --mcp --batch 100: usage error" 2 "$rc"
"$JRPC_BIN/jrpc-bench" --url "$URL" --mcp --batch 1 --duration 1 >/dev/null 2>&1; rc=$?
check "jrpc-bench --mcp with a tcp:// URL: usage error" 2 "$rc"
port=$(e2e_free_port)
out=$("$JRPC_BIN/jrpc-bench" --url "http://127.0.0.1:$port/mcp" --mcp --batch 1 --connections 2 \
      --duration 1 --timeout-ms 1000 2>&1); rc=$?
echo "$out"
check "jrpc-bench --mcp, nothing listening: exit 2" 2 "$rc"
check "jrpc-bench --mcp, nothing listening: says so" 1 "$(grep -c 'MCP sessions could not be set up' <<<"$out")"
e2e_finish
