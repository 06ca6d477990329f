#!/usr/bin/env bash
# MCP's Streamable HTTP endpoint (docs/MCP.md): the real reference server
# @modelcontextprotocol/server-everything (npm, "stdio") under
# jrpc-stdio --mcp --procs 2, and the official MCP TypeScript SDK's Client
# with StreamableHTTPClientTransport on http://127.0.0.1:PORT/mcp (clients
# no one here wrote; pinned in tests/mcp/package-lock.json, installed by
# tests/run.sh through tests/mcp/npm_install.sh, never here). Then curl on
# the endpoint's rules: one message per POST, 202 for notifications and
# responses, 405 for GET and DELETE without a session, MCP-Protocol-Version, Accept, and
# --mcp-path none.
source "$JRPC_E2E_LIB"
source "$(dirname "$JRPC_E2E_LIB")/mcp_lib.sh"
mcp_need server-everything
EVERYTHING=$NODE_MODS/@modelcontextprotocol/server-everything/dist/index.js

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
# server-everything offers listChanged, resources.subscribe and tasks: the
# bridge delivers listChanged on the MCP path (the server's messages reach
# the client), not subscribe nor tasks (docs/MCP.md "Capabilities");
# logging/setLevel it does.
LC='"capabilities":{"tools":{"listChanged":true},"prompts":{"listChanged":true},"resources":{"listChanged":true},"logging":{},"completions":{}}'
check "initialize: capabilities the bridge delivers only" "$LC" \
    "$(echo "$out" | grep -o '"capabilities":{.*"completions":{}}')"
out=$(post "${INIT/2025-06-18/2025-03-26}" -H "$ACC")
check "initialize 2025-03-26: the child agreed, 2025-03-26 (not the bridge's 2025-06-18)" \
    '"protocolVersion":"2025-03-26"' "$(echo "$out" | grep -o '"protocolVersion":"[0-9-]*"')"
check "initialize 2025-03-26: filtered too" "$LC" \
    "$(echo "$out" | grep -o '"capabilities":{.*"completions":{}}')"
check "logging/setLevel reaches a child: {}" '200 {"jsonrpc":"2.0","result":{},"id":5}' \
    "$(post '{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"debug"}}' -H "$ACC")"
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
check "DELETE without Mcp-Session-Id: 405" 405 "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -X DELETE "$MCP")"
check "DELETE of a session no bridge issued: 404" 404 "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -X DELETE -H 'Mcp-Session-Id: x' "$MCP")"
out=$(post '{"jsonrpc":"2.0","id":3,"method":"ping"}' -H "$ACC" -H 'MCP-Protocol-Version: 1999-01-01')
check "unsupported MCP-Protocol-Version: 400" 400 "${out%% *}"
check "no MCP-Protocol-Version (2025-03-26 assumed): 200" 200 \
    "$(post '{"jsonrpc":"2.0","id":3,"method":"ping"}' -H "$ACC" | cut -d' ' -f1)"
check "MCP-Protocol-Version 2025-03-26: 200" 200 \
    "$(post '{"jsonrpc":"2.0","id":3,"method":"ping"}' -H "$ACC" -H 'MCP-Protocol-Version: 2025-03-26' | cut -d' ' -f1)"
check "an Origin not listed (--cors-origin): 403 (DNS rebinding)" 403 \
    "$(post '{"jsonrpc":"2.0","id":4,"method":"ping"}' -H "$ACC" -H 'Origin: http://evil.example' | cut -d' ' -f1)"
# text/event-stream preferred: MCP's SSE, one "message" event, no id, no end event
curl -sS --max-time 10 -D "$E2E_TMP/sse.head" -o "$E2E_TMP/sse.body" -H 'Content-Type: application/json' \
    -H 'Accept: text/event-stream' --data-binary '{"jsonrpc":"2.0","id":4,"method":"ping"}' "$MCP"
check "Accept: text/event-stream only: 200 text/event-stream" "200 text/event-stream" \
    "$(head -n1 "$E2E_TMP/sse.head" | awk '{print $2}') $(grep -i '^content-type:' "$E2E_TMP/sse.head" | tr -d '\r' | awk '{print $2}')"
check "SSE: exactly one message event with the response" \
    "$(printf 'event: message\ndata: {"jsonrpc":"2.0","result":{},"id":4}\n')" "$(cat "$E2E_TMP/sse.body")"
check "SSE preferred by q (json;q=0.5): SSE" "text/event-stream" \
    "$(curl -sS --max-time 10 -o /dev/null -w '%{content_type}' -H 'Content-Type: application/json' \
        -H 'Accept: text/event-stream, application/json;q=0.5' --data-binary '{"jsonrpc":"2.0","id":4,"method":"ping"}' "$MCP")"
check "SSE accepted, a notification: still 202, no body" "202 " \
    "$(post '{"jsonrpc":"2.0","method":"notifications/initialized"}' -H 'Accept: text/event-stream')"
check "SSE accepted, a batch: still 400 JSON" "400 application/json" \
    "$(curl -sS --max-time 10 -o /dev/null -w '%{http_code} %{content_type}' -H 'Content-Type: application/json' \
        -H 'Accept: text/event-stream' --data-binary '[{"jsonrpc":"2.0","id":1,"method":"ping"}]' "$MCP")"
check "Accept: text/html only: 406" 406 \
    "$(post '{"jsonrpc":"2.0","id":4,"method":"ping"}' -H 'Accept: text/html' | cut -d' ' -f1)"
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
ADMIN=$(e2e_admin_url)
calls=$(curl -s --max-time 5 "$ADMIN/metrics" |
    awk '$1 ~ /^jrpc_calls_total\{.*transport="http"/ { s += $2 } END { print s + 0 }')
check "metrics: the MCP calls count as HTTP calls" 1 "$(awk -v c="$calls" 'BEGIN { print (c >= 13) }')"
# A child killed: restarted, handshaken again before it takes calls.
victim=$(pgrep -P "$STDIO_PID" -f -- "^node $EVERYTHING stdio" | head -n 1)   # this bridge's child, not another test's
kill -9 "$victim"
e2e_wait_for "[ \$(grep -c event=mcp_initialized '$STDIO_LOG') -ge 3 ]" 30
check "a restarted child gets the handshake again" 3 "$(grep -c event=mcp_initialized "$STDIO_LOG")"
NODE_PATH=$NODE_MODS timeout 60 node "$HERE/mcp_client.cjs" "$MCP" > "$E2E_TMP/sdk2.out" 2>&1
check "SDK client again after the restart" "parallel ok=true" "$(grep '^parallel' "$E2E_TMP/sdk2.out")"
# The SDK made to prefer SSE: every answer to a request comes as MCP's SSE.
NODE_PATH=$NODE_MODS timeout 60 node "$HERE/mcp_client.cjs" "$MCP" --prefer-sse > "$E2E_TMP/sdk3.out" 2>&1
cat "$E2E_TMP/sdk3.out"
check "SDK client over SSE answers: all steps" "parallel ok=true" "$(grep '^parallel' "$E2E_TMP/sdk3.out")"
check "SDK client over SSE answers: 13 requests answered as SSE" "sse n=13" "$(grep '^sse' "$E2E_TMP/sdk3.out")"

# ---- --mcp-path none -------------------------------------------------------
E2E_HTTP=1 e2e_restart_broker --mcp-path none
check "--mcp-path none: /mcp is 405" 405 \
    "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary '{"jsonrpc":"2.0","id":1,"method":"ping"}' "$MCP")"

# ---- bearer keys (docs/SIGNING.md "Bearer keys") ---------------------------
TOKEN=$("$JRPC_BIN/jrpc" bearer-key mcp "$E2E_TMP/keys" 2>"$E2E_TMP/bk.err")
check "jrpc bearer-key: exit 0, a 43-character token" "0 43" "$? ${#TOKEN}"
check "jrpc bearer-key: a new key file is 0600" 600 "$(stat -c %a "$E2E_TMP/keys")"
printf 'demo s3cr3t-s3cr3t-s3cr3t' >> "$E2E_TMP/keys"   # no newline: the next line is still its own
PINGER=$("$JRPC_BIN/jrpc" bearer-key pinger "$E2E_TMP/keys" ping initialize 'notifications/*' 2>/dev/null)
check "the key file holds the token's hash, not the token" "0 2" \
    "$(grep -c -- "$TOKEN" "$E2E_TMP/keys") $(grep -c ' bearer-sha256:[0-9a-f]\{64\}' "$E2E_TMP/keys")"
check "the lines: mcp, demo, pinger" "mcp demo pinger" "$(awk '{print $1}' "$E2E_TMP/keys" | tr '\n' ' ' | sed 's/ $//')"
E2E_HTTP=1 e2e_restart_broker --keys "$E2E_TMP/keys" --access-log on
e2e_wait_workers 1
NODE_PATH=$NODE_MODS timeout 60 node "$HERE/mcp_client.cjs" "$MCP" --bearer "$TOKEN" > "$E2E_TMP/sdk4.out" 2>&1
cat "$E2E_TMP/sdk4.out"
check "SDK client with Authorization: Bearer: all steps" "parallel ok=true" "$(grep '^parallel' "$E2E_TMP/sdk4.out")"
check "bearer calls run as their key (access log key=mcp)" 1 \
    "$(grep -c 'event=access transport=http .*key=mcp ' "$E2E_TMP/broker.log" | awk '{print ($1 >= 13)}')"
NODE_PATH=$NODE_MODS timeout 60 node "$HERE/mcp_client.cjs" "$MCP" > "$E2E_TMP/sdk5.out" 2>&1
check "SDK client without a token: fails, unauthorized" "1 1" "$? $(grep -c '"code":-32002,"message":"Unauthorized"' "$E2E_TMP/sdk5.out")"
PING='{"jsonrpc":"2.0","id":1,"method":"ping"}'
curl -sS --max-time 10 -D "$E2E_TMP/h401" -o /dev/null -H 'Content-Type: application/json' -H "$ACC" --data-binary "$PING" "$MCP"
check "no credentials: 401 offering Bearer" 1 "$(grep -ci '^WWW-Authenticate: Bearer' "$E2E_TMP/h401")"
out=$(post "$PING" -H "$ACC" -H "Authorization: Bearer ${TOKEN}x")
check "a wrong token: 401 unknown bearer token" "401 unknown bearer token" \
    "$(echo "$out" | grep -o '^401\|unknown bearer token' | tr '\n' ' ' | sed 's/ $//')"
check "the token's hash as a token: 401" 401 \
    "$(post "$PING" -H "$ACC" -H "Authorization: Bearer $(grep '^mcp ' "$E2E_TMP/keys" | sed 's/.*bearer-sha256://')" | cut -d' ' -f1)"
check "Bearer without a token: 401" 401 "$(post "$PING" -H "$ACC" -H 'Authorization: Bearer' | cut -d' ' -f1)"
check "two Authorization headers: 401" 401 \
    "$(post "$PING" -H "$ACC" -H "Authorization: Bearer $TOKEN" -H "Authorization: Bearer $TOKEN" | cut -d' ' -f1)"
check "scheme in any case (bEaReR): 200" 200 "$(post "$PING" -H "$ACC" -H "Authorization: bEaReR  $TOKEN" | cut -d' ' -f1)"
check "another scheme (Basic) is not ours: unsigned, 401" "401 request is not signed" \
    "$(post "$PING" -H "$ACC" -H 'Authorization: Basic ZGVtbzp4' | grep -o '^401\|request is not signed' | tr '\n' ' ' | sed 's/ $//')"
check "the bearer key on /rpc too" '200 {"jsonrpc":"2.0","result":{},"id":1}' \
    "$(curl -sS --max-time 10 -o "$E2E_TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' \
        -H "Authorization: Bearer $TOKEN" --data-binary "$PING" "$HTTP_URL/rpc") $(cat "$E2E_TMP/body")"
check "the CLI: jrpc --bearer" "{}" "$("$JRPC_BIN/jrpc" -u "$HTTP_URL/mcp" --bearer "$TOKEN" call ping)"
"$JRPC_BIN/jrpc" -u "$HTTP_URL/rpc" -K "$E2E_TMP/keys" -k mcp call ping > /dev/null 2> "$E2E_TMP/cli.err"
check "the CLI: a bearer key cannot sign (exit 2, says why)" "2 1" "$? $(grep -c 'is a bearer key' "$E2E_TMP/cli.err")"
# A bearer key's id in the signing headers: refused, it has no secret.
out=$(post "$PING" -H "$ACC" -H 'X-JRPC-Key: mcp' -H "X-JRPC-Timestamp: $(date +%s)" \
    -H 'X-JRPC-Nonce: abcdefghijklmnop0123' -H "X-JRPC-Signature: $(printf '0%.0s' $(seq 64))")
check "a bearer key named in signing headers: 401 (it cannot sign)" "401 this key is a bearer key" \
    "$(echo "$out" | grep -o '^401\|this key is a bearer key' | tr '\n' ' ' | sed 's/ $//')"
# The key's ACL: pinger may call ping, initialize and notifications only.
check "ACL: pinger may ping" 200 "$(post "$PING" -H "$ACC" -H "Authorization: Bearer $PINGER" | cut -d' ' -f1)"
out=$(post '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x"}}}' \
    -H "$ACC" -H "Authorization: Bearer $PINGER")
check "ACL: pinger may not tools/call (-32002)" "200 -32002" "$(echo "$out" | grep -o '^200\|-32002' | tr '\n' ' ' | sed 's/ $//')"
# Revoked by a reload: the token stops working at once.
sed -i '/^pinger /d' "$E2E_TMP/keys"
kill -HUP "$BROKER_PID"
e2e_wait_for "grep -q event=reloaded '$E2E_TMP/broker.log'" 10
check "a bearer key removed by a reload: 401" 401 "$(post "$PING" -H "$ACC" -H "Authorization: Bearer $PINGER" | cut -d' ' -f1)"
check "the other bearer key still works after the reload" 200 \
    "$(post "$PING" -H "$ACC" -H "Authorization: Bearer $TOKEN" | cut -d' ' -f1)"
printf 'bad bearer-sha256:123\n' > "$E2E_TMP/badkeys"
"$JRPC_BIN/jrpc-broker" --keys "$E2E_TMP/badkeys" --check-config > "$E2E_TMP/bad.out" 2>&1
check "a malformed bearer line: --check-config exit 2, names the line" "2 1" \
    "$? $(grep -c 'badkeys:1: bearer key "bad" needs bearer-sha256:' "$E2E_TMP/bad.out")"
kill -TERM "$STDIO_PID"; st=0; wait "$STDIO_PID" || st=$?
check "jrpc-stdio --mcp: SIGTERM exits 0" 0 "$st"
e2e_finish
