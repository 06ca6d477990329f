#!/usr/bin/env bash
# Two MCP servers nobody here wrote behind one broker (docs/MCP.md "Several
# services"): npm @modelcontextprotocol/server-memory and
# @modelcontextprotocol/server-filesystem, each under
# `jrpc-stdio --mcp --service NAME`, each at /mcp/<name>, driven by the
# official MCP SDK client (tests/e2e/mcp_services_client.cjs): every tool
# list is the right server's, a filesystem tool works at /mcp/filesystem,
# /mcp alone is 409 naming both, the InitializeResult offers only what the
# bridge delivers and the protocol version is negotiated, the SDK's GET is
# 405 and not counted invalid, 300 calls on one client print no
# MaxListenersExceededWarning. Packages pinned in tests/mcp/package-lock.json,
# installed by tests/mcp/npm_install.sh (tests/run.sh), never here.
source "$JRPC_E2E_LIB"
source "$(dirname "$JRPC_E2E_LIB")/mcp_lib.sh"
mcp_need server-memory server-filesystem
MEMORY=$NODE_MODS/@modelcontextprotocol/server-memory/dist/index.js
FILESYS=$NODE_MODS/@modelcontextprotocol/server-filesystem/dist/index.js
CLIENT="$HERE/mcp_services_client.cjs"
sdk() { NODE_PATH=$NODE_MODS timeout 120 node "$CLIENT" "$@" 2>&1; }

E2E_HTTP=1 e2e_start_broker --timeout-ms 20000 --admin 127.0.0.1:0
ADMIN=$(e2e_admin_url)
ROOT=$E2E_TMP/fsroot
mkdir -p "$ROOT"
echo "hello from the filesystem server" > "$ROOT/note.txt"
MEMORY_FILE_PATH=$E2E_TMP/memory.jsonl "$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" --mcp --service memory \
    --log-level debug -- node "$MEMORY" >>"$E2E_TMP/memory.log" 2>&1 &
E2E_PIDS+=("$!")
"$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" --mcp --service filesystem \
    --log-level debug -- node "$FILESYS" "$ROOT" >>"$E2E_TMP/filesystem.log" 2>&1 &
E2E_PIDS+=("$!")
e2e_wait_workers 2
e2e_wait_for "grep -q event=mcp_initialized '$E2E_TMP/memory.log' && grep -q event=mcp_initialized '$E2E_TMP/filesystem.log'" 60
check "both bridges did the MCP handshake" "1 1" \
    "$(grep -c event=mcp_initialized "$E2E_TMP/memory.log") $(grep -c event=mcp_initialized "$E2E_TMP/filesystem.log")"

# ---- every tool list is the right server's (6 concurrent lists each, both at once) ----
sdk "$HTTP_URL/mcp/memory" lists 6 > "$E2E_TMP/mem.out" &
p1=$!
sdk "$HTTP_URL/mcp/filesystem" lists 6 > "$E2E_TMP/fs.out" &
p2=$!
wait $p1; s1=$?
wait $p2; s2=$?
cat "$E2E_TMP/mem.out" "$E2E_TMP/fs.out"
check "SDK clients: exit 0" "0 0" "$s1 $s2"
check "/mcp/memory: the memory server" "connected server=memory-server" "$(grep '^connected' "$E2E_TMP/mem.out")"
check "/mcp/filesystem: the filesystem server" "connected server=secure-filesystem-server" \
    "$(grep '^connected' "$E2E_TMP/fs.out")"
mem=$(grep '^lists' "$E2E_TMP/mem.out")
fs=$(grep '^lists' "$E2E_TMP/fs.out")
check "/mcp/memory: 6 lists, all the same" "lists n=6 same=true" "${mem%% tools=*}"
check "/mcp/filesystem: 6 lists, all the same" "lists n=6 same=true" "${fs%% tools=*}"
check "/mcp/memory: memory's tools only" "1 0" \
    "$(echo "$mem" | grep -c create_entities) $(echo "$mem" | grep -c read_text_file)"
check "/mcp/filesystem: filesystem's tools only" "1 0" \
    "$(echo "$fs" | grep -c read_text_file) $(echo "$fs" | grep -c create_entities)"

# ---- a filesystem tool call ----
out=$(sdk "$HTTP_URL/mcp/filesystem" read "$ROOT/note.txt")
echo "$out"
check "/mcp/filesystem: read_text_file" 'read text="hello from the filesystem server\n" error=false' \
    "$(echo "$out" | grep '^read')"

# ---- /mcp alone: several services, a clear error naming both ----
ACC='Accept: application/json, text/event-stream'
post() {  # PATH BODY: "STATUS BODY"
    curl -sS --max-time 10 -o "$E2E_TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' \
        -H "$ACC" --data-binary "$2" "$HTTP_URL$1" > "$E2E_TMP/code"
    echo "$(cat "$E2E_TMP/code") $(cat "$E2E_TMP/body")"
}
init() { echo '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"'"$1"'","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'; }
check "/mcp alone: 409 naming both services" \
    '409 {"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request","data":"several MCP services are connected: POST /mcp/<service>, one of [\"filesystem\",\"memory\"]"},"id":null}' \
    "$(post /mcp "$(init 2025-06-18)")"
out=$(sdk "$HTTP_URL/mcp" lists 1)
check "/mcp alone: the SDK's error names both" 1 \
    "$(echo "$out" | grep '^error' | grep -c 'POST /mcp/<service>, one of \[\\"filesystem\\",\\"memory\\"\]')"
check "/mcp/nosuch: no such service, -32601" '200 {"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":1}' \
    "$(post /mcp/nosuch "$(init 2025-06-18)")"

check "/mcp/memory with Idempotency-Key: 400 (a kept reply knows no service)" 400 \
    "$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
        -H "$ACC" -H 'Idempotency-Key: k1' --data-binary "$(init 2025-06-18)" "$HTTP_URL/mcp/memory")"

# ---- honest capabilities, the version negotiated ----
# server-memory offers tools.listChanged, resources.listChanged and
# resources.subscribe: listChanged reaches a client on the MCP path (the
# server's messages do), subscribe does not (not declared).
check "initialize: capabilities with listChanged, without subscribe" \
    '200 {"jsonrpc":"2.0","result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true},"resources":{"listChanged":true}},"serverInfo":{"name":"memory-server","version":"0.6.3"}},"id":1}' \
    "$(post /mcp/memory "$(init 2025-06-18)")"
check "initialize 2025-03-26: answered 2025-03-26 (the server agreed)" '"protocolVersion":"2025-03-26"' \
    "$(post /mcp/memory "$(init 2025-03-26)" | grep -o '"protocolVersion":"[0-9-]*"')"
check "initialize 2025-03-26: capabilities filtered too" \
    '"capabilities":{"tools":{"listChanged":true},"resources":{"listChanged":true}}' \
    "$(post /mcp/memory "$(init 2025-03-26)" | grep -o '"capabilities":{.*}},"serverInfo"' | sed 's/,"serverInfo"$//')"
out=$(sdk "$HTTP_URL/mcp/memory" caps)
check "SDK: the capabilities it got, the version it asked" \
    'caps {"resources":{"listChanged":true},"tools":{"listChanged":true}} version=2025-11-25' \
    "$(echo "$out" | grep '^caps')"

# ---- GET on the MCP path: 405, not counted as an invalid body ----
invalid() { curl -s --max-time 5 "$ADMIN/metrics" | grep '^jrpc_bodies_total{transport="http",outcome="invalid"}' | awk '{print $2}'; }
before=$(invalid)
get=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code} %header{allow}' -H 'Accept: text/event-stream' "$HTTP_URL/mcp/memory")
check "GET /mcp/memory: 405, Allow: POST" "405 POST" "$get"
curl -sS --max-time 10 -o /dev/null -H 'Accept: text/event-stream' "$HTTP_URL/mcp"
sdk "$HTTP_URL/mcp/filesystem" lists 1 > /dev/null   # the SDK's own GET on connect
check "GET: not counted as invalid bodies" "$before" "$(invalid)"

# ---- sustained load on one client: no MaxListenersExceededWarning ----
out=$(sdk "$HTTP_URL/mcp/memory" load 300)
check "300 calls on one SDK client: all answered, no MaxListenersExceededWarning" "load ok=300 warnings=0" \
    "$(echo "$out" | grep '^load')"
check "no warning printed" 0 "$(echo "$out" | grep -c '^warning')"

e2e_finish
