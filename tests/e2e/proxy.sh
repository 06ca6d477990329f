#!/usr/bin/env bash
# Behind a reverse proxy (issue 36, docs/SIGNING.md "Behind a proxy"):
# with --trusted-proxy, the Forwarded / X-Forwarded-For of a trusted peer
# name the client, so clients behind one proxy get separate rate budgets
# and separate idempotency-key namespaces; IPv6 clients are grouped by /64;
# the left-most (client-written) entries of a chain are not believed; a
# malformed chain counts as the proxy itself; and the same headers from a
# peer that is not trusted are ignored (everyone is the peer, as before).
# The "proxy" is curl on 127.0.0.1 sending the headers a proxy would.
source "$JRPC_E2E_LIB"
command -v redis-server >/dev/null || { echo "redis-server is required"; exit 1; }
e2e_start_redis
# (a generous Redis deadline: past it the limits fall back to the local
# budget, which a loaded machine must not turn into a different answer)
RARGS=(--redis "redis://127.0.0.1:$RPORT" --rate-limit 1 --rate-burst 100 --redis-timeout-ms 5000)
E2E_HTTP=1 e2e_start_broker "${RARGS[@]}" --trusted-proxy 127.0.0.1/32 --trusted-proxy 10.0.0.0/8 \
    --log-level debug
e2e_start_worker
e2e_wait_workers 1

# A batch costing the whole burst (100 calls): one passes per client, the
# next from the same client is refused 429 (the budget refills 1 call/s).
BATCH=$(python3 -c 'import json; print(json.dumps([{"jsonrpc":"2.0","method":"add","params":[1,2],"id":i} for i in range(100)]))')
burst() {  # HEADER...: the HTTP status of one batch sent with these headers
    local args=()
    for h in "$@"; do args+=(-H "$h"); done
    curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' "${args[@]}" \
        --data-binary "$BATCH" "$HTTP_URL/rpc"
}
check "client A (X-Forwarded-For): its burst passes" 200 "$(burst 'X-Forwarded-For: 203.0.113.1')"
check "... A again: 429" 429 "$(burst 'X-Forwarded-For: 203.0.113.1')"
check "client B behind the same proxy: a budget of its own" 200 "$(burst 'X-Forwarded-For: 203.0.113.2')"
check "B claiming to be a proxy for A (left-most entry spoofed): still B, 429" 429 \
    "$(burst 'X-Forwarded-For: 203.0.113.9, 203.0.113.2')"
check "two proxies (A, then 10.0.0.7 trusted): A, 429" 429 \
    "$(burst 'X-Forwarded-For: 203.0.113.1, 10.0.0.7')"
check "Forwarded for= (RFC 7239), IPv6 client C: its own budget" 200 \
    "$(burst 'Forwarded: for="[2001:db8:1:2::5]:4711";proto=http')"
check "D in C's /64: the same budget (grouped by /64), 429" 429 \
    "$(burst 'X-Forwarded-For: 2001:db8:1:2::6')"
check "E in the next /64: its own budget" 200 "$(burst 'Forwarded: for="[2001:db8:1:3::5]"')"
# A WebSocket opened through the proxy is the client its upgrade named:
# one batch over it spends F's budget, and F's next body over HTTP is 429.
cat > "$E2E_TMP/ws.py" <<'PY'
import base64, json, os, socket, struct, sys
port, xff, body = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode()
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(("GET /rpc HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nX-Forwarded-For: %s\r\n\r\n"
           % (base64.b64encode(os.urandom(16)).decode(), xff)).encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
assert head.startswith(b"HTTP/1.1 101"), head
mask = os.urandom(4)
n = len(body)
hdr = bytes([0x81]) + (bytes([0x80 | 126]) + struct.pack(">H", n) if n >= 126 else bytes([0x80 | n]))
s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(body)))
def need(k):
    b = b""
    while len(b) < k:
        b += s.recv(k - len(b))
    return b
b0, b1 = need(2)
ln = b1 & 0x7f
ln = struct.unpack(">H", need(2))[0] if ln == 126 else struct.unpack(">Q", need(8))[0] if ln == 127 else ln
msg = json.loads(need(ln))
print("array" if isinstance(msg, list) else msg["error"]["code"])
PY
check "client F over a WebSocket through the proxy: its batch runs" array \
    "$(python3 "$E2E_TMP/ws.py" "$HTTP_PORT" 203.0.113.50 "$BATCH")"
check "... F's budget is spent: F over HTTP, 429" 429 "$(burst 'X-Forwarded-For: 203.0.113.50')"
check "the proxy's own requests (no header): the peer's budget" 200 "$(burst)"
check "a malformed chain from the proxy: the proxy itself, 429" 429 \
    "$(burst 'X-Forwarded-For: 203.0.113.77, not-an-address')"
check "Forwarded and X-Forwarded-For naming different clients: the proxy, 429" 429 \
    "$(burst 'Forwarded: for=203.0.113.78' 'X-Forwarded-For: 203.0.113.79')"
check "... each said why (debug)" 2 \
    "$(grep -c 'event=forwarded_ignored reason="\(X-Forwarded-For names no address for the client\|Forwarded and X-Forwarded-For name different clients\)"' "$E2E_TMP/broker.log")"

# Idempotency keys: one namespace per client behind the proxy.
E2E_HTTP=1 e2e_restart_broker --redis "redis://127.0.0.1:$RPORT" --redis-timeout-ms 5000 \
    --trusted-proxy 127.0.0.1/32
e2e_wait_workers 1
post() {  # KEY BODY HEADER...: "STATUS BODY REPLAYED(0/1)"
    local key=$1 body=$2; shift 2
    local args=()
    for h in "$@"; do args+=(-H "$h"); done
    curl -s -D "$E2E_TMP/h" -o "$E2E_TMP/b" -w '%{http_code}' -H 'Content-Type: application/json' \
        -H "Idempotency-Key: $key" "${args[@]}" --data-binary "$body" "$HTTP_URL/rpc" > "$E2E_TMP/c"
    echo "$(cat "$E2E_TMP/c") $(cat "$E2E_TMP/b") $(grep -ci '^Idempotent-Replayed: true' "$E2E_TMP/h")"
}
C1='{"jsonrpc":"2.0","method":"count","id":1}'
a1=$(post shared-key "$C1" 'X-Forwarded-For: 203.0.113.1')
check "A's body under a key: runs (count 1), not replayed" '200 {"jsonrpc":"2.0","result":1,"id":1} 0' "$a1"
b1=$(post shared-key "$C1" 'X-Forwarded-For: 203.0.113.2')
check "B, same key and bytes: runs for B (count 2), never A's reply" \
    '200 {"jsonrpc":"2.0","result":2,"id":1} 0' "$b1"
check "B, same key, another body: runs (no 422 telling B that A's key exists)" \
    '200 {"jsonrpc":"2.0","result":3,"id":2} 0' \
    "$(post shared-key '{"jsonrpc":"2.0","method":"count","id":2}' 'Forwarded: for=203.0.113.2')"
check "A's retry: A's kept reply, marked" '200 {"jsonrpc":"2.0","result":1,"id":1} 1' \
    "$(post shared-key "$C1" 'X-Forwarded-For: 203.0.113.1')"

# The same headers from a peer that is not a trusted proxy (127.0.0.1 is not
# in 10.0.0.0/8): ignored, every "client" is 127.0.0.1.
RARGS[1]="redis://127.0.0.1:$RPORT/1"   # budgets of their own (db 1)
E2E_HTTP=1 e2e_restart_broker "${RARGS[@]}" --trusted-proxy 10.0.0.0/8
e2e_wait_workers 1
check "untrusted peer: A's burst passes" 200 "$(burst 'X-Forwarded-For: 203.0.113.11')"
check "... 'B' is the same peer: 429" 429 "$(burst 'X-Forwarded-For: 203.0.113.12')"
check "... so is a Forwarded 'C'" 429 "$(burst 'Forwarded: for=203.0.113.13')"
e2e_finish
