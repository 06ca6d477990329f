#!/usr/bin/env bash
# The same head again on a keep-alive connection (issue 35): the front keeps
# the verdicts of a plain POST's head for the next head the reader finds
# byte for byte equal (jrpc_http_reader_again, its Content-Length aside).
# One connection, one request at a time, each sent in one write (so that the
# reader may find it again): every answer is what a head read afresh gets.
# A changed Authorization, Content-Type or X-JRPC-Timeout-Ms never takes the
# kept verdict; the same head again after them still works.
source "$JRPC_E2E_LIB"

TOKEN=same-head-e2e-token-0123456789abcdefghijklm
printf 'k1 bearer-sha256:%s\n' "$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)" > "$E2E_TMP/keys"
chmod 600 "$E2E_TMP/keys"
E2E_HTTP=1 e2e_start_broker --keys "$E2E_TMP/keys"
e2e_start_worker
e2e_wait_workers 1

/usr/bin/python3 - "$HTTP_PORT" "$TOKEN" > "$E2E_TMP/transcript" 2>&1 <<'PY'
import json, socket, sys
port, token = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=20)
buf = b""
def ask(head_lines, body):
    global buf
    head = "POST /rpc HTTP/1.1\r\nHost: x\r\n" + "".join(l + "\r\n" for l in head_lines)
    s.sendall((head + "Content-Length: %d\r\n\r\n" % len(body)).encode() + body.encode())
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return "closed"
        buf += d
    h, _, buf = buf.partition(b"\r\n\r\n")
    status = h.split(b" ", 2)[1].decode()
    n = 0
    for line in h.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(buf) < n:
        d = s.recv(65536)
        if not d:
            return "closed"
        buf += d
    b, buf = buf[:n], buf[n:]
    r = json.loads(b)
    return "%s %s" % (status, r["result"] if "result" in r else r["error"]["code"])
def call(a, b):
    return '{"jsonrpc":"2.0","method":"add","params":[%d,%d],"id":1}' % (a, b)
J = "Content-Type: application/json"
A = "Authorization: Bearer " + token
for i, (lines, a, b) in enumerate([
        ([J, A], 1, 2), ([J, A], 2, 3), ([J, A], 10, 20),   # kept (the length changes too)
        ([J, "Authorization: Bearer nope-0123456789"], 1, 1),       # another token: 401
        ([J, "Authorization: Bearer nope-0123456789"], 1, 1),       # ... again
        ([J, A], 3, 4),
        (["Content-Type: text/plain", A], 1, 1),                     # 415
        (["Content-Type: text/plain", A], 1, 1),                     # ... again
        ([J, A], 4, 5), ([J, A], 5, 6),
        ([J, A, "X-JRPC-Timeout-Ms: 0"], 1, 1),                      # 400
        ([J, A, "X-JRPC-Timeout-Ms: 0"], 1, 1),
        ([J, A, "X-JRPC-Timeout-Ms: 5000"], 6, 7),
        ([J, A, "X-JRPC-Timeout-Ms: 5000"], 7, 8),
        ([J], 1, 1),                                                 # no token: 401
        ([J], 1, 1),
        ([J, A], 100, 200)]):
    print(i, ask(lines, call(a, b)))
PY
check "one connection, answers as for heads read afresh" \
"0 200 3
1 200 5
2 200 30
3 401 -32002
4 401 -32002
5 200 7
6 415 -32600
7 415 -32600
8 200 9
9 200 11
10 400 -32600
11 400 -32600
12 200 13
13 200 15
14 401 -32002
15 401 -32002
16 200 300" "$(cat "$E2E_TMP/transcript")"
e2e_finish
