#!/usr/bin/env bash
# WebSocket on the HTTP port (issue 14, point 5; docs/WEBSOCKET.md), driven
# by clients no one here wrote: Python's websockets (Debian) and Node's ws
# (npm, tests/deploy/node_modules), plus a raw socket for broken clients.
# Both send batches and get answers; a batch of sleep 1500/50/500 ms over
# jrpc.stream arrives in the order 50, 500, 1500 (order asserted, times
# printed); each limit gives its close code (1009, 1008, 1007, 1003, 1002,
# 1001 for a missing pong, for idle and for a drain); the in-flight limit
# holds the next call back; upgrade refusals (400, 426, 403, 401, 409);
# CORS preflight and headers with curl; signed upgrades with a real
# redis-server and the key's ACL on the messages; a client that leaves
# mid-stream has its body cancelled; the broker (ASan build: nothing
# leaked) exits 0 after a drain.
source "$JRPC_E2E_LIB"
HERE=$(dirname "$JRPC_E2E_LIB")
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3   # Debian's, with python3-websockets
$PY -c 'import websockets' 2>/dev/null ||
    { echo "python3-websockets is needed (deploy/deps.sh)"; exit 1; }
NODE_MODS=$(cd "$HERE/../deploy" && pwd)/node_modules
[ -f "$NODE_MODS/ws/package.json" ] ||
    { echo "Node's ws is not installed: bash tests/deploy/npm_install.sh (tests/run.sh does)"; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server is not installed"; exit 1; }
WSPY="$PY $HERE/ws_client.py"
wsnode() { NODE_PATH=$NODE_MODS node "$HERE/ws_client.cjs" "$@"; }
T=$E2E_TMP
# ids: the ids of the "answer" lines of a client's output, in arrival order
ids() { sed -n 's/^t=[0-9.]* answer \([^ ]*\).*/\1/p' "$1" | tr '\n' ' ' | sed 's/ $//'; }
show() { sed "s/^/    $1: /" "$2"; }

E2E_HTTP=1 e2e_start_broker --max-body 65536 --ws-max-inflight 4 --ws-max-queued 65536 \
    --ws-ping-ms 1000 --idle-timeout-ms 2000 --admin 127.0.0.1:0 \
    --cors-origin https://app.example,http://localhost:3000
B1=$BROKER_PID
ADMIN=$(e2e_admin_url)
e2e_start_worker --credit 64
W1=$LAST_PID
e2e_wait_workers 1
WS=ws://127.0.0.1:$HTTP_PORT
metric() { curl -s "$ADMIN/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }

# ---- streamed answers, and whole ones ----

$WSPY "$WS/rpc" stream > "$T/s1" 2>&1
show python "$T/s1"
check "python, jrpc.stream: the subprotocol is echoed" "protocol jrpc.stream" "$(head -n 1 "$T/s1")"
check "python, jrpc.stream: invalid member first, then 50, 500, 1500 ms" "d b c a" "$(ids "$T/s1")"
check "python, jrpc.stream: each answer is the unstreamed array's object" 1 \
    "$(grep -c '^t=[0-9.]* answer b {"jsonrpc":"2.0","result":50,"id":"b"}$' "$T/s1")"
check "python, jrpc.stream: no summary message after the answers" "after the answers: none" \
    "$(tail -n 1 "$T/s1")"
$WSPY "$WS/?stream=1" stream-query > "$T/s2" 2>&1
check "python, GET /?stream=1 without a subprotocol: streamed, none echoed" \
    "protocol None|d b c a" "$(head -n 1 "$T/s2")|$(ids "$T/s2")"
wsnode "$WS/rpc" stream > "$T/s3" 2>&1
show node "$T/s3"
check "node ws, jrpc.stream: 50, 500, 1500 ms, then a normal close" \
    "protocol jrpc.stream|b c a|closed 1000" "$(head -n 1 "$T/s3")|$(ids "$T/s3")|$(tail -n 1 "$T/s3")"

$WSPY "$WS/rpc" batch > "$T/b1" 2>&1
check "python, jrpc: a batch is one array message; notifications get none; errors as JSON-RPC" \
    'protocol jrpc
batch: [{"jsonrpc":"2.0","result":3,"id":1},{"jsonrpc":"2.0","result":["x"],"id":2}]
notifications only: none
single: {"jsonrpc":"2.0","result":5,"id":"s"}
not JSON: {"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}
empty array: {"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}' \
    "$(cat "$T/b1")"
wsnode "$WS/rpc" batch > "$T/b2" 2>&1
check "node ws, jrpc: a batch is one array message" \
    'protocol jrpc|batch: [{"jsonrpc":"2.0","result":3,"id":1},{"jsonrpc":"2.0","result":7,"id":2}]|closed 1000' \
    "$(tr '\n' '|' < "$T/b2" | sed 's/|$//')"

# ---- in flight: 4 per connection, batch items counted ----

$WSPY "$WS/rpc" inflight 4 > "$T/i1" 2>&1
show python "$T/i1"
check "in flight full (4 calls of 800 ms): the next call is answered after them, not before" \
    next "$(sed -n '1s/.* //p' "$T/i1")"
check "a batch of 6 (over the limit) waits for the call in flight, then runs whole" \
    "first 7" "$(sed -n '2s/.*order: \([a-z0-9]*\) .*/\1/p' "$T/i1") $(sed -n '2s/.*order: //p' "$T/i1" | wc -w)"

# ---- the handshake ----

$WSPY "$WS/rpc" raw accept > "$T/r1" 2>&1
check "raw: RFC 6455's example key gets its accept value; a close is answered 1000" \
    "HTTP/1.1 101 Switching Protocols Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=|close answered 1000" \
    "$(tr '\n' '|' < "$T/r1" | sed 's/|$//')"
$WSPY "$WS/rpc" raw early > "$T/r2" 2>&1
check "raw: a message sent with the handshake, before the 101, is read as WebSocket" \
    "HTTP/1.1 101 Switching Protocols ['{\"jsonrpc\":\"2.0\",\"result\":42,\"id\":\"early\"}']" "$(cat "$T/r2")"
$WSPY "$WS/rpc" raw fragments > "$T/r3" 2>&1
check "raw: a fragmented message with a ping between its frames" \
    "pong ['hi'] text ['{\"jsonrpc\":\"2.0\",\"result\":3,\"id\":9}']" "$(cat "$T/r3")"

upgrade() { # PATH [curl args] -> "STATUS" ; headers in $T/uh
    local path=$1; shift
    curl -s -m 5 -o "$T/ub" -D "$T/uh" -w '%{http_code}' "$@" "http://127.0.0.1:$HTTP_PORT$path"
}
WSH=(-H 'Upgrade: websocket' -H 'Connection: Upgrade')
KEY=(-H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==')
check "upgrade without Sec-WebSocket-Key: 400" 400 "$(upgrade /rpc "${WSH[@]}" -H 'Sec-WebSocket-Version: 13')"
check "... with a key that is not 16 bytes: 400" 400 \
    "$(upgrade /rpc "${WSH[@]}" -H 'Sec-WebSocket-Key: abc' -H 'Sec-WebSocket-Version: 13')"
check "... without Sec-WebSocket-Version: 400" 400 "$(upgrade /rpc "${WSH[@]}" "${KEY[@]}")"
check "... without Connection: Upgrade: 400" 400 \
    "$(upgrade /rpc -H 'Upgrade: websocket' "${KEY[@]}" -H 'Sec-WebSocket-Version: 13')"
check "... Sec-WebSocket-Version: 8: 426 with Sec-WebSocket-Version: 13" "426 yes" \
    "$(upgrade /rpc "${WSH[@]}" "${KEY[@]}" -H 'Sec-WebSocket-Version: 8') $(grep -qi '^Sec-WebSocket-Version: 13' "$T/uh" && echo yes)"
check "... over HTTP/1.0: 400" 400 \
    "$(upgrade /rpc -0 "${WSH[@]}" "${KEY[@]}" -H 'Sec-WebSocket-Version: 13')"
check "... on another path: 405 (only / and /rpc)" 405 \
    "$(upgrade /other "${WSH[@]}" "${KEY[@]}" -H 'Sec-WebSocket-Version: 13')"
check "... from an Origin not listed: 403" 403 \
    "$(upgrade /rpc "${WSH[@]}" "${KEY[@]}" -H 'Sec-WebSocket-Version: 13' -H 'Origin: https://evil.example')"
$WSPY "$WS/rpc" origin https://app.example > "$T/o1" 2>&1
check "python from a listed Origin: open" 'open {"jsonrpc":"2.0","result":2,"id":1}' "$(cat "$T/o1")"
check "a POST with Upgrade: websocket is an ordinary POST" 200 \
    "$(upgrade /rpc "${WSH[@]}" -H 'Content-Type: application/json' \
        --data-binary '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}')"
check "a plain GET is still 405" 405 "$(upgrade /rpc)"

# ---- CORS ----

PRE=(-X OPTIONS -H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: content-type,x-jrpc-key')
check "preflight from a listed Origin: 204" 204 "$(upgrade /rpc "${PRE[@]}" -H 'Origin: https://app.example')"
hdr() { grep -i "^$1:" "$T/uh" | tr -d '\r' | sed 's/^[^:]*: //'; }
check "... Access-Control-Allow-Origin is that origin, Vary: Origin" "https://app.example|Origin" \
    "$(hdr Access-Control-Allow-Origin)|$(hdr Vary)"
check "... Access-Control-Allow-Methods, -Headers, -Max-Age" \
    "POST|Content-Type, Accept, X-JRPC-Key, X-JRPC-Timestamp, X-JRPC-Nonce, X-JRPC-Signature, X-JRPC-Timeout-Ms, traceparent, MCP-Protocol-Version, Mcp-Session-Id, Authorization, Idempotency-Key|7200" \
    "$(hdr Access-Control-Allow-Methods)|$(hdr Access-Control-Allow-Headers)|$(hdr Access-Control-Max-Age)"
check "preflight from another Origin: 403, no CORS headers" "403 0" \
    "$(upgrade /rpc "${PRE[@]}" -H 'Origin: https://evil.example') $(grep -ci '^Access-Control' "$T/uh")"
check "OPTIONS without an Origin: 405 as before" 405 "$(upgrade /rpc -X OPTIONS)"
POST=(-H 'Content-Type: application/json' --data-binary '{"jsonrpc":"2.0","method":"add","params":[2,2],"id":1}')
check "POST from a listed Origin: 200 with Access-Control-Allow-Origin and Vary" \
    "200 http://localhost:3000|Origin" \
    "$(upgrade /rpc "${POST[@]}" -H 'Origin: http://localhost:3000') $(hdr Access-Control-Allow-Origin)|$(hdr Vary)"
check "a streamed (SSE) answer to a listed Origin carries Access-Control-Allow-Origin" \
    "200 https://app.example" \
    "$(upgrade /rpc "${POST[@]}" -H 'Accept: text/event-stream' -H 'Origin: https://app.example') $(hdr Access-Control-Allow-Origin)"
check "POST from another Origin: 200, no CORS headers" "200 0" \
    "$(upgrade /rpc "${POST[@]}" -H 'Origin: https://evil.example') $(grep -ci '^Access-Control' "$T/uh")"
check "Content-Type: application/json-rpc is taken like application/json" \
    '200 {"jsonrpc":"2.0","result":7,"id":1}' \
    "$(upgrade /rpc -H 'Content-Type: application/json-rpc; charset=utf-8' \
        --data-binary '{"jsonrpc":"2.0","method":"add","params":[3,4],"id":1}') $(cat "$T/ub")"

# ---- limits and their close codes ----

$WSPY "$WS/rpc" too-big 70000 > "$T/l1" 2>&1
check "python: a message over --max-body: 1009" "closed 1009" "$(cat "$T/l1")"
wsnode "$WS/rpc" too-big 70000 > "$T/l2" 2>&1
check "node ws: a message over --max-body: 1009" "closed 1009" "$(cat "$T/l2")"
$WSPY "$WS/rpc" raw utf8 > "$T/l3" 2>&1
check "raw: invalid UTF-8 in a text message: 1007" "closed 1007" "$(cat "$T/l3")"
$WSPY "$WS/rpc" raw binary > "$T/l4" 2>&1
check "raw: a binary message: 1003" "closed 1003" "$(cat "$T/l4")"
$WSPY "$WS/rpc" raw unmasked > "$T/l5" 2>&1
check "raw: an unmasked client frame: 1002" "closed 1002" "$(cat "$T/l5")"
# Frame heads wslay's reader failed hard on (the TCP connection was reset),
# and a close of one byte (answered without a status): each gets the close
# 1002 (its payload 03 ea), then a clean EOF.
# (Mask key 0: the payload bytes are as written.)
for c in "a ping of 126 bytes|89fe007e00000000$(printf '70%.0s' $(seq 126))" \
         "a ping without FIN|0982000000006869" \
         "a 64-bit length of 2^63|81ff800000000000000000000000" \
         "a 16-bit length of 3|81fe0003000000005b315d" \
         "a 64-bit length of 3|81ff0000000000000003000000005b315d" \
         "a close of one byte|88810000000003"; do
    check "raw: $(echo "$c" | cut -d'|' -f1): close 1002 (88 02 03 ea), then EOF, not a reset" \
        "close 03ea eof" "$($WSPY "$WS/rpc" raw header "${c#*|}" 2>&1)"
done
$WSPY "$WS/rpc" queued 300 60000 > "$T/l6" 2>&1
check "python, not reading its answers: 1008 once the send queue passes --ws-max-queued" \
    "answers before the close: some|closed 1008" "$(tr '\n' '|' < "$T/l6" | sed 's/|$//')"
$WSPY "$WS/rpc" raw noping 2.6 > "$T/l7" 2>&1
check "raw, never answering a ping: 1001 one interval after it" "pings yes closed 1001" "$(cat "$T/l7")"
$WSPY "$WS/rpc" idle > "$T/l8" 2>&1
show python "$T/l8"
check "python, idle (it answers pings, sends nothing): 1001 after --idle-timeout-ms" "closed 1001" \
    "$(sed 's/^t=[0-9.]* //' "$T/l8")"

# ---- a client that leaves mid-stream ----

C0=$(metric 'jrpc_bodies_total{transport="ws",outcome="cancelled"}')
$WSPY "$WS/rpc" leave > "$T/g1" 2>&1
check "a client leaving after the first answer" "fast" "$(ids "$T/g1")"
e2e_wait_for "[ \"\$(metric 'jrpc_bodies_total{transport=\"ws\",outcome=\"cancelled\"}')\" = $((C0 + 1)) ]" 5
check "... its body is cancelled at the broker" 1 \
    "$(( $(metric 'jrpc_bodies_total{transport="ws",outcome="cancelled"}') - C0 ))"
$WSPY "$WS/rpc" batch > "$T/g2" 2>&1
check "... and the broker serves on" "$(cat "$T/b1")" "$(cat "$T/g2")"
e2e_wait_for "[ \"\$(metric jrpc_ws_connections)\" = 0 ]" 5
check "metrics: ws bodies counted, no WebSocket left open" "yes 0" \
    "$([ "$(metric 'jrpc_bodies_total{transport="ws",outcome="ok"}')" -ge 10 ] && echo yes) $(metric jrpc_ws_connections)"
check "metrics: close codes sent (1007 1008 1009 counted)" "1 1 2" \
    "$(metric 'jrpc_ws_closes_total{code="1007"}') $(metric 'jrpc_ws_closes_total{code="1008"}') $(metric 'jrpc_ws_closes_total{code="1009"}')"

# ---- the bench tool (bench/README.md, "WebSocket"): a short run, answers checked ----

"$JRPC_BIN/jrpc-bench-ws-load" --port "$HTTP_PORT" --connections 2 --batch 10 --duration 0.3 \
    > "$T/bench" 2>&1
check "jrpc-bench-ws-load: both phases, every answer right" "0 yes" \
    "$? $(grep -q '^ratio ws/http: ' "$T/bench" && echo yes)"

# ---- drain: answers in flight are sent, then 1001; the broker exits 0 ----

$WSPY "$WS/rpc" drain > "$T/d1" 2>&1 &
DC=$!
e2e_wait_for "grep -q sent '$T/d1'" 5
sleep 0.3
kill -TERM "$B1"
wait "$DC"
show python "$T/d1"
check "drain: the answers in flight arrive, then the close 1001" "x y|closed 1001" \
    "$(ids "$T/d1")|$(tail -n 1 "$T/d1" | sed 's/^t=[0-9.]* //')"
wait "$B1"
check "the broker exits 0 after the drain (ASan: nothing leaked)" 0 $?
kill "$W1" 2>/dev/null

# ---- signing: the key authenticates the upgrade ----

e2e_start_redis
cat > "$T/keys" <<KEYS
demo      s3cr3t-s3cr3t-s3cr3t
limited   limited-secret-0123456789   add
KEYS
E2E_HTTP=1 e2e_start_broker --keys "$T/keys" --redis "redis://127.0.0.1:$RPORT" --redis-timeout-ms 3000
B2=$BROKER_PID
e2e_start_worker
e2e_wait_workers 1
WS=ws://127.0.0.1:$HTTP_PORT
$WSPY "$WS/rpc" unsigned > "$T/k1" 2>&1
check "--keys: an unsigned upgrade is refused 401" "refused 401" "$(cat "$T/k1")"
check "... with WWW-Authenticate and the reason" "401 yes" \
    "$(upgrade /rpc "${WSH[@]}" "${KEY[@]}" -H 'Sec-WebSocket-Version: 13') $(grep -qi '^WWW-Authenticate: JRPC-HMAC-SHA256' "$T/uh" && grep -q 'request is not signed' "$T/ub" && echo yes)"
$WSPY "$WS/rpc" signed demo s3cr3t-s3cr3t-s3cr3t replay > "$T/k2" 2>&1
check "a signed upgrade: its messages run (unsigned themselves); the same headers again: 409" \
    'signed: [{"jsonrpc":"2.0","result":4,"id":1},{"jsonrpc":"2.0","result":[1],"id":2}]|replay: 409' \
    "$(tr '\n' '|' < "$T/k2" | sed 's/|$//')"
$WSPY "$WS/rpc" signed limited limited-secret-0123456789 > "$T/k3" 2>&1
check "the key's ACL applies to each call of each message" \
    'signed: [{"jsonrpc":"2.0","result":4,"id":1},{"jsonrpc":"2.0","error":{"code":-32002,"message":"Unauthorized","data":"this key may not call this method"},"id":2}]' \
    "$(cat "$T/k3")"
check "a stale timestamp: 401" "refused 401" "$($WSPY "$WS/rpc" signed-bad demo s3cr3t-s3cr3t-s3cr3t stale 2>&1)"
check "a bad signature: 401" "refused 401" "$($WSPY "$WS/rpc" signed-bad demo s3cr3t-s3cr3t-s3cr3t badsig 2>&1)"
check "without --cors-origin, an upgrade with an Origin is 403" "refused 403" \
    "$($WSPY "$WS/rpc" origin https://app.example 2>&1)"
check "without --cors-origin, OPTIONS is 405 as before" 405 \
    "$(upgrade /rpc "${PRE[@]}" -H 'Origin: https://app.example')"
kill "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null
check "Redis down: a signed upgrade is refused 503" "refused 503" \
    "$($WSPY "$WS/rpc" signed-bad demo s3cr3t-s3cr3t-s3cr3t fresh 2>&1)"
kill -TERM "$B2"
wait "$B2"
check "the signing broker exits 0 (ASan: nothing leaked)" 0 $?
e2e_finish
