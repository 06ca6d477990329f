#!/usr/bin/env bash
# MCP's Streamable HTTP endpoint (docs/MCP.md): the real reference server
# @modelcontextprotocol/server-everything (npm, "stdio") under
# jrpc-stdio --mcp --procs 2, and the official MCP TypeScript SDK's Client
# with StreamableHTTPClientTransport on http://127.0.0.1:PORT/mcp (clients
# no one here wrote; pinned in tests/mcp/package-lock.json, installed by
# tests/run.sh through tests/mcp/npm_install.sh, never here). Then curl on
# the endpoint's rules: one message per POST, 202 for notifications and
# responses, 405 for GET and DELETE, MCP-Protocol-Version, Accept, and
# --mcp-path none.
source "$JRPC_E2E_LIB"
HERE=$(dirname "$JRPC_E2E_LIB")
command -v curl >/dev/null || { echo "curl is required"; exit 1; }
if ! command -v node >/dev/null; then
    echo "SKIP: node is not installed, so the MCP SDK check cannot run (bash deploy/deps.sh)"
    exit 0
fi
NODE_MODS=$(cd "$HERE/../mcp" && pwd)/node_modules
EVERYTHING=$NODE_MODS/@modelcontextprotocol/server-everything/dist/index.js
[ -f "$NODE_MODS/@modelcontextprotocol/sdk/package.json" ] && [ -f "$EVERYTHING" ] ||
    { echo "the MCP SDK and server-everything are not installed: bash tests/mcp/npm_install.sh (tests/run.sh does)"; exit 1; }

E2E_HTTP=1 e2e_start_broker --timeout-ms 20000 --access-log on --admin 127.0.0.1:0
MCP="$HTTP_URL/mcp"
STDIO_LOG=$E2E_TMP/stdio.log
"$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" --mcp --procs 2 --log-level debug \
    -- node "$EVERYTHING" stdio >>"$STDIO_LOG" 2>&1 &
STDIO_PID=$!
E2E_PIDS+=("$STDIO_PID")
e2e_wait_workers 1
e2e_wait_for "[ \$(grep -c event=mcp_initialized '$STDIO_LOG') -ge 2 ]" 30
check "bridge: both children did the MCP handshake" 2 "$(grep -c event=mcp_initialized "$STDIO_LOG")"

# ---- the official SDK client ---------------------------------------------
NODE_PATH=$NODE_MODS timeout 60 node "$HERE/mcp_client.cjs" "$MCP" > "$E2E_TMP/sdk.out" 2>&1
st=$?
cat "$E2E_TMP/sdk.out"
check "SDK client: exit 0" 0 "$st"
check "SDK client: connected (stateless: no session)" \
    "connected server=mcp-servers/everything session=none" "$(grep '^connected' "$E2E_TMP/sdk.out")"
check "SDK client: tools/list has echo and get-sum" "echo=true get-sum=true" \
    "$(grep '^tools' "$E2E_TMP/sdk.out" | sed 's/.* echo=/echo=/')"
check "SDK client: tools/call echo" 'echo text="Echo: hello jrpc"' "$(grep '^echo' "$E2E_TMP/sdk.out")"
check "SDK client: tools/call get-sum" 'sum text="The sum of 2 and 40 is 42."' \
    "$(grep '^sum' "$E2E_TMP/sdk.out")"
check "SDK client: 8 calls at once" "parallel ok=true" "$(grep '^parallel' "$E2E_TMP/sdk.out")"
check "SDK client: ping, close" "ping ok closed" "$(grep -E '^(ping|closed)' "$E2E_TMP/sdk.out" | tr '\n' ' ' | sed 's/ $//')"
served=$(grep -o 'event=child_answer pid=[0-9]*' "$STDIO_LOG" | sort -u | wc -l)
check "both children served calls" 2 "$served"
check "client's initialize answered by the bridge (not sent to a child again)" 2 \
    "$(grep -c 'event=mcp_initialized' "$STDIO_LOG")"
check "broker access log: a line per MCP POST" 1 \
    "$(grep -c 'event=access transport=http' "$E2E_TMP/broker.log" | awk '{print ($1 >= 13)}')"

# ---- the endpoint's rules, with curl --------------------------------------
ACC='Accept: application/json, text/event-stream'
post() {  # BODY [CURL ARGS...]: "STATUS BODY"
    local body=$1; shift
    curl -sS --max-time 10 -o "$E2E_TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' \
        "$@" --data-binary "$body" "$MCP" > "$E2E_TMP/code"
    echo "$(cat "$E2E_TMP/code") $(cat "$E2E_TMP/body")"
}
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
out=$(post "$INIT" -H "$ACC")
check "initialize: 200 with the child's InitializeResult" \
    '200 "protocolVersion":"2025-06-18"' "$(echo "$out" | grep -o '^200\|"protocolVersion":"[0-9-]*"' | tr '\n' ' ' | sed 's/ $//')"
check "initialize: the client's id comes back" 1 "$(echo "${out#* }" | grep -c '"id":1[,}]')"
ctype=$(curl -sS --max-time 10 -o /dev/null -w '%{content_type}' -H 'Content-Type: application/json' \
    -H "$ACC" --data-binary '{"jsonrpc":"2.0","id":2,"method":"ping"}' "$MCP")
check "request answered application/json even when SSE is accepted" "application/json" "$ctype"
check "ping: 200 {} from a child" '200 {"jsonrpc":"2.0","result":{},"id":2}' \
    "$(post '{"jsonrpc":"2.0","id":2,"method":"ping"}' -H "$ACC" -H 'MCP-Protocol-Version: 2025-06-18')"
check "notifications/initialized: 202, no body" "202 " \
    "$(post '{"jsonrpc":"2.0","method":"notifications/initialized"}' -H "$ACC")"
check "another notification (not declared): 202, no body" "202 " \
    "$(post '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}' -H "$ACC")"
check "a response from the client: 202, no body" "202 " \
    "$(post '{"jsonrpc":"2.0","id":"s1","result":{}}' -H "$ACC")"
check "an error response from the client: 202, no body" "202 " \
    "$(post '{"jsonrpc":"2.0","id":"s2","error":{"code":-1,"message":"no"}}' -H "$ACC")"
out=$(post '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"message":"\"result\""}}}' -H "$ACC")
check "a request that mentions \"result\" is still a request" 1 "$(echo "$out" | grep -c '^200 .*Echo')"
out=$(post '[{"jsonrpc":"2.0","id":1,"method":"ping"}]' -H "$ACC")
check "an array (batch): 400 with -32600" "400 -32600" "$(echo "$out" | grep -o '^400\|-32600' | tr '\n' ' ' | sed 's/ $//')"
check "GET: 405" 405 "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -H 'Accept: text/event-stream' "$MCP")"
check "GET: Allow: POST" 1 "$(curl -s --max-time 10 -D - -o /dev/null "$MCP" | grep -ci '^Allow: POST')"
check "DELETE: 405" 405 "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -X DELETE -H 'Mcp-Session-Id: x' "$MCP")"
out=$(post '{"jsonrpc":"2.0","id":3,"method":"ping"}' -H "$ACC" -H 'MCP-Protocol-Version: 1999-01-01')
check "unsupported MCP-Protocol-Version: 400" 400 "${out%% *}"
check "no MCP-Protocol-Version (2025-03-26 assumed): 200" 200 \
    "$(post '{"jsonrpc":"2.0","id":3,"method":"ping"}' -H "$ACC" | cut -d' ' -f1)"
check "MCP-Protocol-Version 2025-03-26: 200" 200 \
    "$(post '{"jsonrpc":"2.0","id":3,"method":"ping"}' -H "$ACC" -H 'MCP-Protocol-Version: 2025-03-26' | cut -d' ' -f1)"
check "an Origin not listed (--cors-origin): 403 (DNS rebinding)" 403 \
    "$(post '{"jsonrpc":"2.0","id":4,"method":"ping"}' -H "$ACC" -H 'Origin: http://evil.example' | cut -d' ' -f1)"
check "Accept: text/event-stream only: 406" 406 \
    "$(post '{"jsonrpc":"2.0","id":4,"method":"ping"}' -H 'Accept: text/event-stream' | cut -d' ' -f1)"
check "Accept: application/json only: 200" 200 \
    "$(post '{"jsonrpc":"2.0","id":4,"method":"ping"}' -H 'Accept: application/json' | cut -d' ' -f1)"
out=$(post '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"message":"tp"}}}' \
    -H "$ACC" -H 'traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')
check "tools/call over curl" 1 "$(echo "$out" | grep -c 'Echo: tp')"
check "traceparent reaches the access log" 1 \
    "$(grep -c 'traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-' "$E2E_TMP/broker.log" | awk '{print ($1 > 0)}')"
out=$(post '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":2,"steps":2}}}' \
    -H "$ACC" -H 'X-JRPC-Timeout-Ms: 300')
check "deadline (X-JRPC-Timeout-Ms) applies on /mcp: -32003" 1 "$(echo "$out" | grep -c -- '-32003')"
big=$E2E_TMP/big.json
{ printf '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"message":"'
  head -c 1100000 /dev/zero | tr '\0' x; printf '"}}}'; } > "$big"
check "--max-body applies on /mcp: 413" 413 "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' \
    -H 'Content-Type: application/json' -H "$ACC" --data-binary @"$big" "$MCP")"
check "/rpc still JSON-RPC's own" 1 \
    "$(curl -sS --max-time 10 -H 'Content-Type: application/json' --data-binary '{"jsonrpc":"2.0","id":7,"method":"ping"}' "$HTTP_URL/rpc" | grep -c '"result":{}')"
ADMIN=$(grep -o 'event=listening endpoint=admin://[0-9.:]*' "$E2E_TMP/broker.log" | sed 's|.*admin://||')
calls=$(curl -s --max-time 5 "http://$ADMIN/metrics" |
    awk '$1 ~ /^jrpc_calls_total\{.*transport="http"/ { s += $2 } END { print s + 0 }')
check "metrics: the MCP calls count as HTTP calls" 1 "$(awk -v c="$calls" 'BEGIN { print (c >= 13) }')"
# A child killed: restarted, handshaken again before it takes calls.
victim=$(pgrep -f -- "^node $EVERYTHING stdio" | head -n 1)
kill -9 "$victim"
e2e_wait_for "[ \$(grep -c event=mcp_initialized '$STDIO_LOG') -ge 3 ]" 30
check "a restarted child gets the handshake again" 3 "$(grep -c event=mcp_initialized "$STDIO_LOG")"
NODE_PATH=$NODE_MODS timeout 60 node "$HERE/mcp_client.cjs" "$MCP" > "$E2E_TMP/sdk2.out" 2>&1
check "SDK client again after the restart" "parallel ok=true" "$(grep '^parallel' "$E2E_TMP/sdk2.out")"
kill -TERM "$STDIO_PID"; st=0; wait "$STDIO_PID" || st=$?
check "jrpc-stdio --mcp: SIGTERM exits 0" 0 "$st"

# ---- --mcp-path none -------------------------------------------------------
E2E_HTTP=1 e2e_restart_broker --mcp-path none
check "--mcp-path none: /mcp is 405" 405 \
    "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary '{"jsonrpc":"2.0","id":1,"method":"ping"}' "$MCP")"

# ---- --keys: no bearer mapping (docs/MCP.md): an unsigned /mcp POST is 401 --
printf 'demo s3cr3t-s3cr3t-s3cr3t\n' > "$E2E_TMP/keys"
E2E_HTTP=1 e2e_restart_broker --keys "$E2E_TMP/keys"
check "--keys: Authorization: Bearer is not a key, 401" 401 \
    "$(post '{"jsonrpc":"2.0","id":1,"method":"ping"}' -H "$ACC" -H 'Authorization: Bearer demo' | cut -d' ' -f1)"
e2e_finish
