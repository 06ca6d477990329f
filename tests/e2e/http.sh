#!/usr/bin/env bash
# The HTTP front door end to end, through the real broker and two real
# workers: every JSON-RPC 2.0 specification example (section 7) with the jrpc
# CLI and with curl, byte for byte (the same bytes as spec_examples.sh), then
# keep-alive, pipelining, chunked request bodies, Expect: 100-continue,
# HTTP/1.0, and the CLI over http://. Every request is bounded in time.
# shellcheck source=lib.sh
source "$JRPC_E2E_LIB"
command -v curl >/dev/null || { echo "curl is required"; exit 1; }

TMP=$E2E_TMP
# shellcheck disable=SC2034  # read by lib.sh
E2E_HTTP=1
e2e_start_broker
e2e_start_worker
e2e_start_worker
e2e_wait_workers 2
RPC=$HTTP_URL/rpc
CURL=(curl -sS --max-time 5 -H 'Content-Type: application/json')

# Exact bytes of a file, trailing newlines kept.
bytes() { cat "$1"; printf x; }

# run CMD...: runs CMD and sets RC, OUT and ERR (exact bytes).
run() {
    "$@" </dev/null >"$TMP/out" 2>"$TMP/err"
    RC=$?
    OUT=$(bytes "$TMP/out"); OUT=${OUT%x}
    ERR=$(bytes "$TMP/err"); ERR=${ERR%x}
}

# jsend BODY: the CLI's raw answer, without the newline it adds.
jsend() { printf '%s' "$1" | "$JRPC" --url "$HTTP_URL" --timeout-ms 5000 send; }

# cpost BODY [CURL_ARGS...]: "STATUS BODY" as curl got them (body exact).
cpost() {
    local body=$1 code out; shift
    code=$("${CURL[@]}" -o "$TMP/body" -w '%{http_code}' "$@" --data-binary "$body" "$RPC")
    out=$(bytes "$TMP/body")
    printf '%s %s' "$code" "${out%x}"
}

# The -32700 answers carry the parser's own message: compare code and id.
code_id() { sed -E 's/.*"code":(-?[0-9]+).*"id":(null)\}$/\1 \2/'; }

# example NAME REQUEST EXPECTED [code_id]: one spec example, CLI and curl.
# EXPECTED empty means "nothing to answer": no CLI output, HTTP 204, no body.
example() {
    local name=$1 req=$2 want=$3 filter=${4:-cat} got status
    check "cli:  $name" "$want" "$(jsend "$req" | $filter)"
    got=$(cpost "$req")
    status=${got%% *}
    if [ -z "$want" ]; then
        check "curl: $name" "204 " "$got"
    else
        check "curl: $name" "200 $want" "$status $(printf '%s' "${got#* }" | $filter)"
    fi
}

# ---- every example of the specification ----

example "positional 1" \
    '{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}' \
    '{"jsonrpc":"2.0","result":19,"id":1}'
example "positional 2" \
    '{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}' \
    '{"jsonrpc":"2.0","result":-19,"id":2}'
example "named 1" \
    '{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}' \
    '{"jsonrpc":"2.0","result":19,"id":3}'
example "named 2" \
    '{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}' \
    '{"jsonrpc":"2.0","result":19,"id":4}'
example "notification update" \
    '{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}' ''
example "notification foobar" '{"jsonrpc": "2.0", "method": "foobar"}' ''
example "non-existent method" '{"jsonrpc": "2.0", "method": "foobar", "id": "1"}' \
    '{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":"1"}'
example "invalid JSON" '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]' \
    '-32700 null' code_id
example "invalid Request object" '{"jsonrpc": "2.0", "method": 1, "params": "bar"}' \
    '{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}'
example "batch, invalid JSON" '[
  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
  {"jsonrpc": "2.0", "method"
]' '-32700 null' code_id
example "empty array" '[]' \
    '{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}'
example "invalid batch [1]" '[1]' \
    '[{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}]'
E='{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}'
example "invalid batch [1,2,3]" '[1,2,3]' "[$E,$E,$E]"
example "mixed batch" '[
        {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
        {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
    ]' \
    '[{"jsonrpc":"2.0","result":7,"id":"1"},{"jsonrpc":"2.0","result":19,"id":"2"},{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null},{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":"5"},{"jsonrpc":"2.0","result":["hello",5],"id":"9"}]'
example "all notifications" '[
        {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
    ]' ''

SUB='{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}'
SUB_ANSWER='{"jsonrpc":"2.0","result":19,"id":1}'

check "answers are application/json" "200 application/json" \
    "$("${CURL[@]}" -o /dev/null -w '%{http_code} %{content_type}' --data-binary "$SUB" "$RPC" |
        sed 's/;.*//')"
check "POST / works like /rpc" "200 $SUB_ANSWER" \
    "$("${CURL[@]}" -o "$TMP/body" -w '%{http_code}' --data-binary "$SUB" "$HTTP_URL/"; printf ' '; cat "$TMP/body")"

# ---- keep-alive: 20 requests, one connection ----
# curl reuses its connection across the URLs of one invocation; num_connects
# is 1 for the transfer that opened it and 0 for those that reused it.
N=20
urls=()
want=
for ((i = 0; i < N; i++)); do
    urls+=("$RPC")
    want+="$SUB_ANSWER"$'\n'"200 $((i == 0 ? 1 : 0))"$'\n'
done
out=$("${CURL[@]}" -w '\n%{http_code} %{num_connects}\n' --data-binary "$SUB" "${urls[@]}"; printf x)
check "keep-alive: $N answers over one connection" "$want" "${out%x}"

# ---- pipelining, raw HTTP: a slow call then two fast ones in one write ----
# The fast ones finish first on the other worker; the answers must still come
# back in request order. Also HTTP/1.0: one answer, then the server closes.
python3 - "$HTTP_PORT" >"$TMP/raw" 2>&1 <<'EOF'
import socket, sys, time

PORT = int(sys.argv[1])

def request(body, version="HTTP/1.1"):
    return (b"POST /rpc %s\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (version.encode(), len(body), body))

def read_answers(s, n):
    """n answers as 'STATUS BODY' lines; Content-Length framing."""
    buf, out = b"", []
    while len(out) < n:
        head_end = buf.find(b"\r\n\r\n")
        if head_end >= 0:
            head = buf[:head_end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v)
            if len(buf) >= head_end + 4 + length:
                body = buf[head_end + 4:head_end + 4 + length]
                out.append("%s %s" % (head[0].split(" ")[1], body.decode()))
                buf = buf[head_end + 4 + length:]
                continue
        chunk = s.recv(65536)
        if not chunk:
            out.append("EOF")
            break
        buf += chunk
    return out, buf

s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
s.sendall(request(b'{"jsonrpc":"2.0","method":"sleep","params":{"ms":300},"id":"slow"}')
          + request(b'{"jsonrpc":"2.0","method":"add","params":[1,2],"id":"fast1"}')
          + request(b'{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":"fast2"}'))
answers, rest = read_answers(s, 3)
print("pipelined:", " | ".join(answers), "| extra bytes:", len(rest))
s.close()

s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
s.sendall(request(b'{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}', "HTTP/1.0"))
answers, rest = read_answers(s, 1)
try:
    closed = s.recv(1) == b"" and not rest
except socket.timeout:
    closed = False
print("http/1.0:", answers[0], "| closed:", closed)
EOF
check "pipelined answers in request order" \
    'pipelined: 200 {"jsonrpc":"2.0","result":300,"id":"slow"} | 200 {"jsonrpc":"2.0","result":3,"id":"fast1"} | 200 {"jsonrpc":"2.0","result":19,"id":"fast2"} | extra bytes: 0' \
    "$(sed -n 1p "$TMP/raw")"
check "HTTP/1.0 raw: answer, then close" \
    "http/1.0: 200 $SUB_ANSWER | closed: True" "$(sed -n 2p "$TMP/raw")"
check "HTTP/1.0 curl" "200 $SUB_ANSWER" "$(cpost "$SUB" --http1.0)"

# ---- chunked request bodies ----
check "chunked body (curl -H Transfer-Encoding)" "200 $SUB_ANSWER" \
    "$(cpost "$SUB" -H 'Transfer-Encoding: chunked' --trace-ascii "$TMP/chunked.trace")"
check "chunked body: really sent chunked" yes \
    "$(grep -qi '^[0-9a-f]*: Transfer-Encoding: chunked' "$TMP/chunked.trace" && echo yes || echo no)"
# A body streamed in three chunks, with pauses between them.
out=$({ printf '%s' '{"jsonrpc":"2.0",'; sleep 0.1; printf '%s' '"method":"subtract",'; sleep 0.1
        printf '%s' '"params":[42,23],"id":1}'; } |
      "${CURL[@]}" -X POST -T - -o "$TMP/body" -w '%{http_code}' "$RPC"; printf ' '; cat "$TMP/body")
check "chunked body in three chunks" "200 $SUB_ANSWER" "$out"

# ---- Expect: 100-continue, body over 1 KiB ----
PADDED="$SUB$(printf '%2000s' '')"   # valid JSON: trailing white space
check "Expect: 100-continue: answer" "200 $SUB_ANSWER" \
    "$(cpost "$PADDED" -H 'Expect: 100-continue' --trace-ascii "$TMP/expect.trace")"
check "Expect: 100-continue: sent Expect" yes \
    "$(grep -qi '^[0-9a-f]*: Expect: 100-continue' "$TMP/expect.trace" && echo yes || echo no)"
check "Expect: 100-continue: got 100 Continue" yes \
    "$(grep -q '^[0-9a-f]*: HTTP/1.1 100 Continue' "$TMP/expect.trace" && echo yes || echo no)"

# ---- the jrpc CLI over http:// ----

run "$JRPC" --url "$HTTP_URL" call subtract '[42,23]'
check "cli call: exit 0" 0 "$RC"
check "cli call: result" $'19\n' "$OUT"
check "cli call: no stderr" "" "$ERR"

run "$JRPC" --url "$RPC" call subtract '{"subtrahend":23,"minuend":42}'
check "cli call, explicit /rpc: result" $'19\n' "$OUT"

run "$JRPC" --url "$HTTP_URL" call no_such_method '[]'
check "cli missing method: exit 1" 1 "$RC"
check "cli missing method: error object" '{"code":-32601,"message":"Method not found"}'$'\n' "$OUT"

run "$JRPC" --url "$HTTP_URL" notify subtract '[42,23]'
check "cli notify: exit 0" 0 "$RC"
check "cli notify: no stdout" "" "$OUT"
check "cli notify: no stderr" "" "$ERR"

printf '%s' '{"jsonrpc":"2.0","method":"subtract","params":{"minuend":5,"subtrahend":3},"id":"x"}' >"$TMP/named.json"
run "$JRPC" --url "$HTTP_URL" send "$TMP/named.json"
check "cli send file: exit 0" 0 "$RC"
check "cli send file: raw answer" '{"jsonrpc":"2.0","result":2,"id":"x"}'$'\n' "$OUT"

printf '%s' '[{"jsonrpc":"2.0","method":"notify_sum","params":[1]}]' >"$TMP/notifs.json"
run "$JRPC" --url "$HTTP_URL" send "$TMP/notifs.json"
check "cli send notifications (204): exit 0" 0 "$RC"
check "cli send notifications (204): no output" "" "$OUT$ERR"

# A body over the broker's --max-body (1 MiB by default): 413 and a JSON-RPC
# error with id null, which `send` prints like any answer. The broker may
# answer before it has read the body: the client must still show it.
python3 -c 'import sys; sys.stdout.write("[" + "1," * 600000 + "1]")' >"$TMP/huge.json"
run "$JRPC" --url "$HTTP_URL" send "$TMP/huge.json"
check "cli send over --max-body: exit 0" 0 "$RC"
check "cli send over --max-body: JSON-RPC error, id null" yes \
    "$([[ $OUT == '{"jsonrpc":"2.0","error":{"code":'*'"id":null}'$'\n' ]] && echo yes || echo "no: $OUT $ERR")"

# Nothing listens on a port just released.
DEAD_PORT=$(e2e_free_port)
run "$JRPC" --url "http://127.0.0.1:$DEAD_PORT" --timeout-ms 2000 call subtract '[42,23]'
check "cli refused: exit 2" 2 "$RC"
check "cli refused: no stdout" "" "$OUT"
check "cli refused: message" \
    "jrpc: cannot connect to http://127.0.0.1:$DEAD_PORT/rpc: Connection refused"$'\n' "$ERR"

e2e_finish
