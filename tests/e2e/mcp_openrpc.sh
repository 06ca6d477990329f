#!/usr/bin/env bash
# MCP services' tools in the discovery document (docs/MCP.md "Tools in the
# discovery document", issue 32): each `jrpc-stdio --mcp` bridge asks its
# child tools/list after the handshake and declares tools/call from it
# (name's enum, arguments' anyOf, x-mcp-tools); again when the child says
# notifications/tools/list_changed (a SCHEMAS frame, PROTOCOL.md 2.7); a
# list over 64 KiB is cut with a log line. Servers: npm server-memory and
# server-everything (nobody here wrote them) and tests/e2e/mcp_tools_server.cjs
# (ours: add_tool changes its list). Every document is validated with the
# OpenRPC meta-schema (ajv, as e2e_openrpc); a key whose ACL does not name
# a service sees none of its tools.
source "$JRPC_E2E_LIB"
source "$(dirname "$JRPC_E2E_LIB")/mcp_lib.sh"
mcp_need server-memory server-everything
VALIDATE="node $HERE/openrpc_validate.cjs"
[ -d "$HERE/../deploy/node_modules/@open-rpc/meta-schema" ] ||
    { echo "no @open-rpc/meta-schema: run bash tests/deploy/npm_install.sh first"; exit 1; }
MEMORY=$NODE_MODS/@modelcontextprotocol/server-memory/dist/index.js
EVERYTHING=$NODE_MODS/@modelcontextprotocol/server-everything/dist/index.js
TOOLS=$HERE/mcp_tools_server.cjs

ALL=mcp-openrpc-all-0123456789abcdefghijklmnopqrs
MEM=mcp-openrpc-mem-0123456789abcdefghijklmnopqrs
{ printf 'ops bearer-sha256:%s\n' "$(printf %s "$ALL" | sha256sum | cut -d' ' -f1)"
  printf 'memonly bearer-sha256:%s memory.*\n' "$(printf %s "$MEM" | sha256sum | cut -d' ' -f1)"
} > "$E2E_TMP/keys"
chmod 600 "$E2E_TMP/keys"
E2E_HTTP=1 e2e_start_broker --timeout-ms 20000 --keys "$E2E_TMP/keys" --admin 127.0.0.1:0
ADMIN=$(e2e_admin_url)
bridge() {   # bridge SERVICE [ENV=V...] -- COMMAND...
    local svc=$1
    shift
    env NODE_PATH="$NODE_MODS" MEMORY_FILE_PATH="$E2E_TMP/memory.jsonl" "$@" 2>>"$E2E_TMP/$svc.log" &
    E2E_PIDS+=("$!")
}
bridge memory "$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" --mcp --service memory \
    --method shared_custom -- node "$MEMORY"
bridge everything "$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" --mcp --service everything \
    -- node "$EVERYTHING" stdio
bridge tools "$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" --mcp --service tools \
    --method shared_custom -- node "$TOOLS"
bridge bulk MANY_TOOLS=300 "$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" --mcp --service bulk \
    -- node "$TOOLS"
bridge paged MANY_TOOLS=5 PAGE_SIZE=2 "$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" --mcp \
    --service paged -- node "$TOOLS"
bridge endless PAGE_SIZE=1 ENDLESS=1 "$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" --mcp \
    --service endless -- node "$TOOLS"
e2e_wait_workers 6
declared() { grep -c event=mcp_tools_declared "$E2E_TMP/$1.log"; }
e2e_wait_for "[ \$(declared memory) -ge 1 ] && [ \$(declared everything) -ge 1 ] && \
              [ \$(declared tools) -ge 1 ] && [ \$(declared bulk) -ge 1 ] && \
              [ \$(declared paged) -ge 1 ] && [ \$(declared endless) -ge 1 ]" 60
# (server-everything says list_changed once it runs: it may declare twice)
check "each bridge declared its child's tools (ours once)" "1 1 1 1 1" \
    "$(declared memory) $(declared tools) $(declared bulk) $(declared paged) $(declared endless)"

# ---- the bare names of MCP's methods: the first MCP service keeps them;
# the others are told at INFO in one line each (12 names: initialize,
# ping, tools/..., counted all the same); a clash of the services' own
# methods (shared_custom, declared by memory and tools) stays a WARN ----
check "no WARN method_refused for MCP's own methods" 0 \
    "$(grep 'level=warn' "$E2E_TMP/broker.log" | grep 'event=method_refused' | grep -vc 'method=shared_custom')"
check "five INFO lines, one per later MCP service, 12 names each" "5 5" \
    "$(grep 'level=info' "$E2E_TMP/broker.log" | grep -c 'event=method_refused reason=mcp_protocol') \
$(grep -c 'event=method_refused reason=mcp_protocol methods=12 ' "$E2E_TMP/broker.log")"
check "a real clash of two services' own methods: one WARN" 1 \
    "$(grep 'level=warn' "$E2E_TMP/broker.log" | grep -c 'event=method_refused reason=service_conflict method=shared_custom')"
check "refusals still counted (5 x 12 + 1)" 61 \
    "$(curl -s "$ADMIN/metrics" | awk '/^jrpc_methods_refused_total/ {print $2}')"

doc() { curl -s -H "Authorization: Bearer $1" "$HTTP_URL/openrpc.json"; }
# facts FILE SERVICE: "tools=N enum=N anyof=N same=true|false NAMES..." of SERVICE.tools/call
facts() { /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m = {x["name"]: x for x in d["methods"]}.get(sys.argv[2] + ".tools/call")
if m is None:
    print("none"); sys.exit()
tools = m.get("x-mcp-tools", [])
names = [t["name"] for t in tools]
enum = m["params"][0]["schema"].get("enum", [])
anyof = m["params"][1]["schema"].get("anyOf", [])
same = names == enum and [t["inputSchema"] for t in tools] == anyof
print("tools=%d enum=%d anyof=%d same=%s %s" % (len(tools), len(enum), len(anyof), same,
                                                  " ".join(sorted(names))))
PY
}
doc "$ALL" > "$E2E_TMP/all.doc"
check "the document with six MCP services validates" "$E2E_TMP/all.doc: valid" \
    "$($VALIDATE "$E2E_TMP/all.doc" 2>&1 | head -c 600)"
f=$(facts "$E2E_TMP/all.doc" memory)
check "memory.tools/call: server-memory's 9 tools, the same in enum, anyOf and x-mcp-tools" \
    "tools=9 enum=9 anyof=9 same=True add_observations create_entities create_relations delete_entities delete_observations delete_relations open_nodes read_graph search_nodes" \
    "$f"
f=$(facts "$E2E_TMP/all.doc" everything)
check "everything.tools/call: server-everything's tools (echo among them)" "True 1" \
    "$(awk '{print $4}' <<<"$f" | cut -d= -f2) $(grep -cw echo <<<"$f")"
check "tools.tools/call: our server's 2 tools" "tools=2 enum=2 anyof=2 same=True add_tool hello" \
    "$(facts "$E2E_TMP/all.doc" tools)"
check "paramStructure by-name" '"by-name"' \
    "$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps([m["paramStructure"] for m in d["methods"] if m["name"]=="tools.tools/call"][0]))' "$E2E_TMP/all.doc")"

# ---- cut: 302 tools of ~450 bytes each do not fit 64 KiB ----
check "bulk: the cut is logged" 1 "$(grep -c 'event=mcp_tools_cut .*tools=302' "$E2E_TMP/bulk.log")"
n=$(facts "$E2E_TMP/all.doc" bulk | sed -E 's/^tools=([0-9]+).*/\1/')
check "bulk: fewer than 302 tools declared, more than 100" "yes" \
    "$([ "$n" -lt 302 ] && [ "$n" -gt 100 ] && echo yes || echo "no: $n")"

# ---- pagination: tools/list read to its last page (nextCursor) ----
check "paged: 7 tools in 4 pages of 2, all declared" \
    "tools=7 enum=7 anyof=7 same=True add_tool bulk_0 bulk_1 bulk_2 bulk_3 bulk_4 hello" \
    "$(facts "$E2E_TMP/all.doc" paged)"
check "paged: one declaration of the 4 pages" 1 "$(grep -c 'event=mcp_tools_declared .*tools=7 .*pages=4 ' "$E2E_TMP/paged.log")"
check "endless: a list that never ends is read to 64 pages, the cut logged" 1 \
    "$(grep -c 'event=mcp_tools_cut .*pages=64 .*reason=pages' "$E2E_TMP/endless.log")"
check "endless: the 64 pages' tools declared" "tools=64 True" \
    "$(facts "$E2E_TMP/all.doc" endless | awk '{print $1, $4}' | sed 's/same=//')"

# ---- ACL: a memory.* key sees memory's tools, none of the others' ----
doc "$MEM" > "$E2E_TMP/mem.doc"
check "memory.* key: the document validates" "$E2E_TMP/mem.doc: valid" "$($VALIDATE "$E2E_TMP/mem.doc" 2>&1)"
check "memory.* key: memory's tools/call, no other service's method" "memory 0" \
    "$(/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
names = [m["name"] for m in d["methods"]]
print(" ".join(sorted({n.split(".")[0] for n in names if n.endswith("tools/call")})),
      sum(1 for n in names if not n.startswith("memory.")))' "$E2E_TMP/mem.doc")"

# ---- list_changed: add_tool at /mcp/tools, the bridge lists again ----
curl -s -H "Authorization: Bearer $ALL" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    --data-binary '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add_tool","arguments":{}}}' \
    "$HTTP_URL/mcp/tools" > "$E2E_TMP/add.out"
check "add_tool answered" 1 "$(grep -c extra_0 "$E2E_TMP/add.out")"
e2e_wait_for "[ \$(declared tools) -ge 2 ]" 30
check "tools: declared again after list_changed" 2 "$(declared tools)"
e2e_wait_for "doc '$ALL' | grep -q extra_0" 10
doc "$ALL" > "$E2E_TMP/after.doc"
check "the document lists the added tool" "tools=3 enum=3 anyof=3 same=True add_tool extra_0 hello" \
    "$(facts "$E2E_TMP/after.doc" tools)"
check "the document after list_changed validates" "$E2E_TMP/after.doc: valid" \
    "$($VALIDATE "$E2E_TMP/after.doc" 2>&1)"
check "the broker logged both declarations (after the handshake, after list_changed)" 2 \
    "$(grep -c 'event=worker_schemas .*service=tools .*schemas=yes dropped=0' "$E2E_TMP/broker.log")"
# ---- listChanged: offered where the server's messages reach the client ----
# (the MCP path: the POST's stream; with --sessions also the GET stream),
# not where they cannot (/rpc); the SDK client gets the notification.
out=$(NODE_PATH=$NODE_MODS timeout 60 node "$HERE/mcp_list_changed.cjs" "$HTTP_URL/mcp/tools" "$ALL" 2>&1)
echo "$out"
check "SDK at /mcp/tools: tools.listChanged offered" "caps tools.listChanged=true" "$(grep '^caps' <<<"$out")"
check "SDK: notifications/tools/list_changed received once" "list_changed n=1 tool=extra_1" \
    "$(grep '^list_changed' <<<"$out")"
check "SDK: the added tool listed" "tools has_added=true" "$(grep '^tools' <<<"$out")"
caps_rpc=$(curl -s -H "Authorization: Bearer $ALL" -H 'Content-Type: application/json' \
    --data-binary '{"jsonrpc":"2.0","id":1,"method":"tools.initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}' \
    "$HTTP_URL/rpc")
check "initialize over /rpc (no way for messages back): listChanged filtered" '{"tools":{}}' \
    "$(/usr/bin/python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["result"]["capabilities"], separators=(",", ":")))' <<<"$caps_rpc")"
e2e_finish
