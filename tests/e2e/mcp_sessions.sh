#!/usr/bin/env bash
# MCP sessions and messages from server to client (docs/MCP.md, issue 32):
# npm @modelcontextprotocol/server-memory (a stateful server: its graph in a
# file each child reads and rewrites per call) behind jrpc-stdio --mcp
# --procs 2, driven by the official MCP SDK client (mcp_sessions.cjs):
#   - without --sessions, 10 concurrent writes land on both children, whose
#     read-modify-write cycles overlap: some are lost;
#   - with --sessions, initialize begins a session (Mcp-Session-Id) pinned to
#     one child: all 10 kept; DELETE ends it, and its id is then 404; a GET
#     stream for an id that names no connected bridge is 404;
# and server-everything's progress notifications reach the SDK's onprogress
# (the POST answered as SSE once the child sends something before the answer),
# its logging notifications outside calls the session's GET stream, and its
# sampling request the client (offered because the client's initialize and
# notifications/initialized reach the session's child), whose answer goes back.
source "$JRPC_E2E_LIB"
source "$(dirname "$JRPC_E2E_LIB")/mcp_lib.sh"
mcp_need server-memory server-everything
MEMORY=$NODE_MODS/@modelcontextprotocol/server-memory/dist/index.js
EVERYTHING=$NODE_MODS/@modelcontextprotocol/server-everything/dist/index.js

E2E_HTTP=1 e2e_start_broker --timeout-ms 30000
MCP="$HTTP_URL/mcp"
NB=0
bridge() {  # LOG [jrpc-stdio options...] -- COMMAND...: starts a bridge, waits for its 2 handshakes
    local log=$1; shift
    NB=$((NB + 1))
    "$JRPC_BIN/jrpc-stdio" --connect "$WORKERS_EP" --mcp --procs 2 --log-level debug "$@" >>"$log" 2>&1 &
    BRIDGE=$!
    E2E_PIDS+=("$BRIDGE")
    e2e_wait_workers 1
    e2e_wait_for "[ \$(grep -c event=mcp_initialized '$log') -ge 2 ]" 30
}
bridge_stop() {
    kill -TERM "$BRIDGE"; wait "$BRIDGE" 2>/dev/null
    e2e_wait_workers 0
}
client() { NODE_PATH=$NODE_MODS timeout 90 node "$HERE/mcp_sessions.cjs" "$@"; }

# ---- without --sessions: writes are lost ------------------------------------
MEMORY_FILE_PATH=$E2E_TMP/mem1.jsonl bridge "$E2E_TMP/b1.log" -- node "$MEMORY"
lost=0
for round in 1 2 3; do   # the loss is a race: a round may happen to keep all
    client memory "$MCP" "r$round" > "$E2E_TMP/m1.out" 2>&1
    cat "$E2E_TMP/m1.out"
    kept=$(sed -n 's/^kept n=//p' "$E2E_TMP/m1.out")
    [ -n "$kept" ] && [ "$kept" -lt 10 ] && { lost=1; break; }
done
check "without --sessions: no session issued" "session=none" "$(grep '^session' "$E2E_TMP/m1.out")"
check "without --sessions: some of 10 concurrent writes lost (two children, one file)" 1 "$lost"
bridge_stop

# ---- with --sessions: all kept, DELETE ends the session ---------------------
MEMORY_FILE_PATH=$E2E_TMP/mem2.jsonl bridge "$E2E_TMP/b2.log" --sessions -- node "$MEMORY"
client memory "$MCP" s > "$E2E_TMP/m2.out" 2>&1
cat "$E2E_TMP/m2.out"
check "--sessions: initialize answered with Mcp-Session-Id" "session=yes" "$(grep '^session' "$E2E_TMP/m2.out")"
check "--sessions: 10 of 10 concurrent writes kept" "kept n=10" "$(grep '^kept' "$E2E_TMP/m2.out")"
check "--sessions: after DELETE the session's id is 404" "after_delete status=404" \
    "$(grep '^after_delete' "$E2E_TMP/m2.out")"
check "bridge: the session began and was deleted" "1 1" \
    "$(grep -c 'event=session_begin' "$E2E_TMP/b2.log") $(grep -c 'event=session_end .*reason=deleted' "$E2E_TMP/b2.log")"
# (each child also answered the bridge's own initialize, and the first one
# its tools/list: at most two answers that are no client's)
served=$(grep -o 'event=child_answer pid=[0-9]*' "$E2E_TMP/b2.log" | sort | uniq -c | awk '$1 > 2' | wc -l)
check "--sessions: one child served the session's calls" 1 "$served"
ACC='Accept: application/json, text/event-stream'
code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -H "$ACC" \
    -H 'Mcp-Session-Id: 0123456789abcdef-0000-00000000000000000000000000000000' \
    --data-binary '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' "$MCP")
check "a session id no bridge issued: 404" 404 "$code"
code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -X DELETE \
    -H 'Mcp-Session-Id: 0123456789abcdef-0000-00000000000000000000000000000000' "$MCP")
check "DELETE of a session id no bridge issued: 404" 404 "$code"
# a GET stream for a session that does not exist: 404 (MCP transports), not a 200 stream
gcode() { curl -s --max-time "${2:-5}" -o /dev/null -w '%{http_code}' -H 'Accept: text/event-stream' \
              -H "Mcp-Session-Id: $1" "$MCP"; }
check "GET stream, a session id no bridge issued: 404" 404 \
    "$(gcode 0123456789abcdef-0000-00000000000000000000000000000000)"
check "GET stream, not a session id at all: 404" 404 "$(gcode not-a-session)"
# The bridge is asked (PROTOCOL.md 2.8): an id of its instance it never
# issued, or one it has ended, is 404 to GET and DELETE, not a 200 stream
# that never carries anything or a 204 for nothing.
dcode() { curl -s --max-time 10 -o /dev/null -w '%{http_code}' -X DELETE -H "Mcp-Session-Id: $1" "$MCP"; }
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
sid=$(curl -s --max-time 20 -D - -o /dev/null -H 'Content-Type: application/json' -H "$ACC" \
      --data-binary "$INIT" "$MCP" | tr -d '\r' | sed -n 's/^[Mm][Cc][Pp]-[Ss]ession-[Ii][Dd]: //p')
check "a session begun with curl: an id of 54 bytes" 54 "${#sid}"
forged=${sid:0:22}00000000000000000000000000000007   # its instance and child, another secret
check "GET stream of the live session: 200" 200 "$(gcode "$sid" 1)"
check "GET stream, the live bridge's instance with a secret it never issued: 404" 404 "$(gcode "$forged")"
check "DELETE of that id: 404" 404 "$(dcode "$forged")"
check "DELETE of the live session: 204, then its GET stream 404, DELETE again 404" "204 404 404" \
    "$(dcode "$sid") $(gcode "$sid") $(dcode "$sid")"
# A session's child killed: the bridge ends its sessions at once, so the
# broker ends the session's open GET stream and its id is 404 from then on.
sid=$(curl -s --max-time 20 -D - -o /dev/null -H 'Content-Type: application/json' -H "$ACC" \
      --data-binary "$INIT" "$MCP" | tr -d '\r' | sed -n 's/^[Mm][Cc][Pp]-[Ss]ession-[Ii][Dd]: //p')
curl -s -N --max-time 30 -D "$E2E_TMP/gstream.h" -o "$E2E_TMP/gstream.out" -w '%{http_code}' \
    -H 'Accept: text/event-stream' -H "Mcp-Session-Id: $sid" "$MCP" > "$E2E_TMP/gstream.code" &
GS=$!
E2E_PIDS+=("$GS")
e2e_wait_for "grep -q '^HTTP/1.1 200' '$E2E_TMP/gstream.h'" 10   # the stream is open
pid=$(grep "event=session_begin session=${sid:0:21}" "$E2E_TMP/b2.log" | sed -n 's/.* pid=\([0-9]*\).*/\1/p' | tail -n 1)
t0=$(date +%s)
kill -9 "$pid"
wait "$GS"
check "child killed: its session's GET stream (200) ends at once, not at curl's 30 s" "200 1" \
    "$(cat "$E2E_TMP/gstream.code") $(( $(date +%s) - t0 < 20 ? 1 : 0 ))"
check "child killed: the bridge ended the session, its id is 404" "1 404" \
    "$(grep -c "event=session_end session=${sid:0:21} .*reason=child_lost" "$E2E_TMP/b2.log") $(gcode "$sid")"
# The whole bridge SIGKILLed (it tells nothing): the broker, losing the last
# worker of that instance, ends the streams of every session of it.
e2e_wait_for "[ \$(grep -c event=mcp_initialized '$E2E_TMP/b2.log') -ge 3 ]" 30   # the child restarted
sid=$(curl -s --max-time 20 -D - -o /dev/null -H 'Content-Type: application/json' -H "$ACC" \
      --data-binary "$INIT" "$MCP" | tr -d '\r' | sed -n 's/^[Mm][Cc][Pp]-[Ss]ession-[Ii][Dd]: //p')
rm -f "$E2E_TMP/gstream.h"
curl -s -N --max-time 30 -D "$E2E_TMP/gstream.h" -o "$E2E_TMP/gstream.out" -w '%{http_code}' \
    -H 'Accept: text/event-stream' -H "Mcp-Session-Id: $sid" "$MCP" > "$E2E_TMP/gstream.code" &
GS=$!
E2E_PIDS+=("$GS")
e2e_wait_for "grep -q '^HTTP/1.1 200' '$E2E_TMP/gstream.h'" 10
kids=$(pgrep -P "$BRIDGE")
t0=$(date +%s)
kill -9 "$BRIDGE"
wait "$BRIDGE" 2>/dev/null
for k in $kids; do kill -9 -- "-$k" 2>/dev/null; done   # each child leads its own group
wait "$GS"
check "bridge killed: its session's GET stream (200) ends at once, not at curl's 30 s" "200 1" \
    "$(cat "$E2E_TMP/gstream.code") $(( $(date +%s) - t0 < 20 ? 1 : 0 ))"
check "bridge killed: the session's id is 404" 404 "$(gcode "$sid")"
e2e_wait_workers 0

# ---- progress notifications reach the client --------------------------------
bridge "$E2E_TMP/b3.log" --sessions -- node "$EVERYTHING" stdio
client progress "$MCP" > "$E2E_TMP/p.out" 2>&1
cat "$E2E_TMP/p.out"
check "progress: 3 notifications reached onprogress" "progress n=3 last=3/3" "$(grep '^progress' "$E2E_TMP/p.out")"
check "progress: then the result" "result ok=true" "$(grep '^result' "$E2E_TMP/p.out")"
# a session's messages outside any call: on its GET stream
client logging "$MCP" > "$E2E_TMP/l.out" 2>&1
cat "$E2E_TMP/l.out"
check "logging: the child's notifications after the call reach the client (GET stream)" \
    "logging n=2+" "$(grep '^logging' "$E2E_TMP/l.out")"
# a server's request (sampling) to the client, the client's answer back to the child
client sampling "$MCP" > "$E2E_TMP/s.out" 2>&1
cat "$E2E_TMP/s.out"
check "sampling: the child's sampling/createMessage reached the client, its answer the child" \
    "sampling asked=1 text=ok" "$(grep '^sampling' "$E2E_TMP/s.out")"
bridge_stop
e2e_finish
