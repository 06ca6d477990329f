#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/.

  python3 tests/fuzz/make_corpus.py [JSONTESTSUITE_DIR]

body/: the JSON-RPC 2.0 specification's examples, a few batches and edge
cases, plus small files of JSONTestSuite (MIT, see corpus/body/LICENSE).
http/: POSTs as clients send them (Content-Length, chunked, pipelined,
100-continue, HTTP/1.0 keep-alive) and a few request-smuggling attempts.
http-reader/: the same, and what the reader alone decides (empty lines,
trailers, CONNECT, Upgrade, kept values, limits), each behind the two
bytes that choose the reader's limits (fuzz_http_reader.c).
http-diff/: the http-reader seeds with two more bytes after the limits
(the cut point, 0: the fuzzer moves it; fuzz_http_diff.c).
wire/: one frame of each worker-protocol message type (PROTOCOL.md), and
client header frames, packed here by hand (no msgpack module needed).
workers/: scripts for fuzz_workers.c (READYs, calls, answers, timeouts,
heartbeat ticks, a READY again, DISCONNECT, an unreachable worker).
ws/: client frames for fuzz_ws.c behind its two bytes (the message limit,
the piece seed): messages whole and fragmented, pings between fragments,
closes, limits, and the malformed headers of issue 36 (mask keys of zero,
so that the fuzzer edits the payloads as they are).
Run it again after changing it; the fuzzers never write into the tree."""
import os, shutil, struct, sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")

# ---- body -------------------------------------------------------------------
SPEC = [
    '{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}',
    '{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}',
    '{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}',
    '{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}',
    '{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}',
    '{"jsonrpc": "2.0", "method": "foobar"}',
    '{"jsonrpc": "2.0", "method": "foobar", "id": "1"}',
    '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]',
    '{"jsonrpc": "2.0", "method": 1, "params": "bar"}',
    '[\n  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},\n'
    '  {"jsonrpc": "2.0", "method"\n]',
    '[]',
    '[1]',
    '[1,2,3]',
    '[\n {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},\n'
    ' {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},\n'
    ' {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},\n'
    ' {"foo": "boo"},\n'
    ' {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},\n'
    ' {"jsonrpc": "2.0", "method": "get_data", "id": "9"}\n]',
    '[\n {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},\n'
    ' {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}\n]',
]
EXTRA = [
    '{"jsonrpc":"2.0","method":"echo","params":{"a":[1,-2,3.5,1e300,-0,"\\u00e9\\ud83d\\ude00",true,false,null]},"id":1.0}',
    '{"jsonrpc":"2\\u002e0","method":"e\\u0063ho","params":[],"id":"\\"q\\""}',
    '{"jsonrpc":"2.0","method":"rpc.discover","id":7}',
    '{"jsonrpc":"2.0","method":"rpc.ping"}',
    '{"jsonrpc":"2.0","method":"x","id":1,"id":2}',
    '{"jsonrpc":"2.0","method":"x","params":[1e400],"id":1}',
    '{"jsonrpc":"2.0","method":"x","params":[18446744073709551615,-9223372036854775808,18446744073709551616],"id":null}',
    '{"jsonrpc":"2.0","method":"","id":1}',
    '{"jsonrpc":"2.0","method":"x","params":' + '[' * 70 + ']' * 70 + ',"id":1}',
    '[{"jsonrpc":"2.0","method":"a","id":1},{"jsonrpc":"2.0","method":"b","params":{"k":{"k":[{}]}},"id":[1]},'
    '{"jsonrpc":"1.0","method":"c","id":{}},{"jsonrpc":"2.0","method":"d","unknown":1,"id":"z"}]',
    ' \t\r\n{"id":-1,"params":{"x":"\\u0000\\u001f\\\\\\/\\b\\f\\n\\r\\t"},"method":"m","jsonrpc":"2.0"} ',
    '\xef\xbb\xbf{"jsonrpc":"2.0","method":"bom","id":1}',
]

JTS_MAX = 64  # bytes: only small JSONTestSuite files


def body(jts):
    d = os.path.join(OUT, "body")
    os.makedirs(d, exist_ok=True)
    for i, s in enumerate(SPEC):
        open(os.path.join(d, "spec-%02d.json" % i), "wb").write(s.encode("latin-1"))
    for i, s in enumerate(EXTRA):
        open(os.path.join(d, "edge-%02d.json" % i), "wb").write(s.encode("latin-1"))
    if jts and os.path.isdir(os.path.join(jts, "test_parsing")):
        src = os.path.join(jts, "test_parsing")
        names = sorted(n for n in os.listdir(src) if os.path.getsize(os.path.join(src, n)) <= JTS_MAX)
        # A handful of each kind (y_ accepted, n_ refused, i_ either).
        picked = []
        for kind in ("y_", "n_", "i_"):
            picked += [n for n in names if n.startswith(kind)][::12][:12]
        for n in picked:
            shutil.copy(os.path.join(src, n), os.path.join(d, "jts-" + n))
        shutil.copy(os.path.join(jts, "LICENSE"), os.path.join(d, "LICENSE"))


# ---- http -------------------------------------------------------------------
def post(b, extra="", path="/", ver="1.1", te=False):
    if te:
        chunks = "%x\r\n%s\r\n0\r\n\r\n" % (len(b), b) if b else "0\r\n\r\n"
        return ("POST %s HTTP/%s\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n%s\r\n%s" % (path, ver, extra, chunks))
    return ("POST %s HTTP/%s\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n%s\r\n%s" % (path, ver, len(b.encode()), extra, b))


ECHO = '{"jsonrpc":"2.0","method":"echo","params":[1,"a",{"b":null}],"id":1}'
LATE = '{"jsonrpc":"2.0","method":"late","id":2}'
FAIL = '{"jsonrpc":"2.0","method":"fail","params":{},"id":3}'
NOTE = '{"jsonrpc":"2.0","method":"echo"}'
BATCH = '[%s,%s,%s,%s,{"jsonrpc":"2.0","method":"nope","id":4}]' % (ECHO, LATE, FAIL, NOTE)


def http():
    d = os.path.join(OUT, "http")
    os.makedirs(d, exist_ok=True)
    seeds = {
        "cl": post(ECHO),
        "cl-rpc": post(LATE, path="/rpc"),
        "cl-batch": post(BATCH),
        "notification-204": post(NOTE),
        "chunked": post(BATCH, te=True),
        "chunked-split": ("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json; charset=utf-8\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n5\r\n[{\"js\r\n%x;ext=1\r\n%s\r\n0\r\nTrailer: 1\r\n\r\n"
                          % (len(BATCH) - 6, BATCH[6:])),
        "pipelined": post(ECHO) + post(LATE) + post(FAIL, te=True) + post(NOTE) + post(BATCH),
        "pipelined-20": post(LATE) * 20,
        "continue": post(ECHO, extra="Expect: 100-continue\r\n"),
        "http10": post(ECHO, ver="1.0"),
        "http10-keepalive": post(ECHO, ver="1.0", extra="Connection: keep-alive\r\n") + post(LATE, ver="1.0"),
        "close": post(ECHO, extra="Connection: close\r\n") + post(LATE),
        "timeout-hdr": post(LATE, extra="X-JRPC-Timeout-Ms: 5\r\n"),
        "signed-hdrs": post(ECHO, extra="X-JRPC-Key: k1\r\nX-JRPC-Timestamp: 1700000000\r\n"
                                        "X-JRPC-Nonce: abc\r\nX-JRPC-Signature: 00ff\r\n"),
        "get": "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        "head": "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n",
        "wrong-ct": post(ECHO).replace("application/json", "text/plain"),
        # The harness runs the front with --max-body 4096, --max-header-bytes 2048.
        "413-cl": post(ECHO).replace("Content-Length: %d" % len(ECHO), "Content-Length: 70000"),
        "413-chunked": post("[" + "1," * 2100 + "1]", te=True),
        "431": "POST / HTTP/1.1\r\nHost: x\r\nX-Pad: " + "a" * 2100 + "\r\n\r\n",
        "incomplete-body": post(ECHO)[:-10],
        # Smuggling attempts: each must be refused or read one way only.
        "smuggle-cl-te": ("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + post(ECHO)),
        "smuggle-te-cl": ("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n5\r\n[1,2]\r\n0\r\n\r\n"),
        "smuggle-2cl": ("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        "Content-Length: 2\r\nContent-Length: 40\r\n\r\n[]" + post(ECHO)),
        "smuggle-te-obfuscated": ("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                  "Transfer-Encoding : chunked\r\nTransfer-Encoding: xchunked\r\n\r\n2\r\n[]\r\n0\r\n\r\n"),
        "smuggle-bare-lf": ("POST / HTTP/1.1\nHost: x\nContent-Type: application/json\n"
                            "Transfer-Encoding: chunked\n\n2\n[]\n0\n\n"),
        "smuggle-chunk-ext-lf": ("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                 "Transfer-Encoding: chunked\r\n\r\n2;a\nx\r\n[]\r\n0\r\n\r\n"),
        "smuggle-obs-fold": ("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             "Transfer-Encoding: identity\r\n chunked\r\nContent-Length: 2\r\n\r\n[]"),
        "upgrade": post(ECHO, extra="Connection: Upgrade\r\nUpgrade: websocket\r\n") + post(LATE),
    }
    for name, s in seeds.items():
        open(os.path.join(d, name + ".http"), "wb").write(s.encode("latin-1"))


# ---- http-reader ---------------------------------------------------------------
# The in-process reader's inputs start with two bytes that choose its limits
# (fuzz_http_reader.c): ff ff is max_header_bytes 4112, max_body 65536.
def http_reader():
    d = os.path.join(OUT, "http-reader")
    os.makedirs(d, exist_ok=True)
    H = "Host: x\r\n"
    seeds = {}
    # every seed of the TCP target, with the largest limits
    src = os.path.join(OUT, "http")
    for n in sorted(os.listdir(src)):
        seeds["tcp-" + n.rsplit(".", 1)[0]] = "\xff\xff" + open(os.path.join(src, n), "rb").read().decode("latin-1")
    big = "\xff\xff"
    seeds.update({
        "empty-lines": big + "\r\n\r\nGET / HTTP/1.1\r\n" + H + "\r\n",
        "bare-lf-before": big + "\nGET / HTTP/1.1\r\n" + H + "\r\n",
        "head-cr-x": big + "POST / HTTP/1.1\r\n" + H + "Content-Length: 1\r\n\rZa",
        "trailers": big + post(ECHO, te=True).replace("0\r\n\r\n", "0\r\nX-JRPC-Timeout-Ms: 1\r\n"
                                                  "traceparent: x\r\nX-After: 1\r\n\r\n"),
        "connect": big + "CONNECT a:443 HTTP/1.1\r\n" + H + "Content-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n\r\n",
        "upgrade-ws": big + "GET /rpc HTTP/1.1\r\n" + H + "Connection: keep-alive, Upgrade\r\n"
                      "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n" + post(ECHO),
        "accept-sse": big + post(ECHO, extra="Accept: text/event-stream\r\nAccept: application/x-ndjson\r\n"
                                          "Accept:\r\n"),
        "long-values": big + post(ECHO, extra="X-JRPC-Key: " + "k" * 200 + "\r\nContent-Type: application/json;"
                                           + "a" * 300 + "\r\ntraceparent: " + "0" * 140 + "\r\n"),
        "content-encoding": big + post(ECHO, extra="Content-Encoding: identity\r\nContent-Encoding: , gzip\r\n"),
        "expect-other": big + post(ECHO, extra="Expect: 100-continue\r\nExpect: x\r\n"),
        "chunk-ext-long": big + ("POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n2;" + "e" * 5000
                                 + "\r\n[]\r\n0\r\n\r\n"),
        "absolute-form": big + post(ECHO, path="http://example.com/rpc?x=1"),
        "http10-te": big + post(ECHO, ver="1.0", te=True),
        "two-host": big + post(ECHO, extra=H),
        "no-host": big + post(ECHO).replace(H, ""),
        "version-2": big + post(ECHO, ver="2.0"),
        # small limits: a 32-byte head, no body at all; then 96 and 100
        "small-431": "\x00\x00" + post(ECHO),
        "small-413": "\x04\x03" + ("POST / HTTP/1.1\r\n" + H + "Transfer-Encoding: chunked\r\n\r\n"
                                     "3c\r\n" + "x" * 60 + "\r\n3c\r\n" + "y" * 60 + "\r\n0\r\n\r\n"),
        "small-exact": "\x02\x03" + "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + "p" * 27 + "\r\n\r\n",
    })
    # the same head again (the reader reads it from its kept copy): other
    # lengths, leading zeros, a space after the digits, 20 digits, over the
    # body limit, a byte changed, then a head that outgrows the head limit
    # only by its longer length (data[0] 3: max_header_bytes 80)
    same = "POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Length: "
    seeds["same-heads"] = big + (same + "2\r\n\r\n[]" + same + "13\r\n\r\n" + '{"a":1234567}'
                                 + same + "0002\r\n\r\n[]" + same + "2 \r\n\r\n[]"
                                 + same.replace("x", "y") + "2\r\n\r\n[]" + same + "70000\r\n\r\n"
                                 + same + "9" * 20 + "\r\n\r\n")
    for pad in (22, 23):   # the one-digit head 79 and 80 bytes long
        tight = same.replace("Host: x\r\n", "Host: x\r\nX-P: " + "p" * pad + "\r\n")
        seeds["same-heads-431-%d" % pad] = "\x03\x00" + tight + "2\r\n\r\n[]" + tight + "13\r\n\r\n" + "x" * 13
    for name, s in seeds.items():
        open(os.path.join(d, name + ".http"), "wb").write(s.encode("latin-1"))


# ---- wire (msgpack by hand) --------------------------------------------------
# ---- http-diff -------------------------------------------------------------------
# The differential target's inputs: the http-reader seeds, their two limit
# bytes, then two bytes for the cut point (fuzz_http_diff.c).
def http_diff():
    d = os.path.join(OUT, "http-diff")
    os.makedirs(d, exist_ok=True)
    src = os.path.join(OUT, "http-reader")
    for n in sorted(os.listdir(src)):
        b = open(os.path.join(src, n), "rb").read()
        open(os.path.join(d, n), "wb").write(b[:2] + b"\x00\x00" + b[2:])


def mp(v):
    if v is None:
        return b"\xc0"
    if v is True:
        return b"\xc3"
    if v is False:
        return b"\xc2"
    if isinstance(v, int):
        if 0 <= v < 128:
            return bytes([v])
        if v >= 0:
            return b"\xcf" + struct.pack(">Q", v)
        if v >= -32:
            return struct.pack(">b", v)
        return b"\xd3" + struct.pack(">q", v)
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, bytes):
        return b"\xc4" + bytes([len(v)]) + v
    if isinstance(v, str):
        e = v.encode()
        return (bytes([0xa0 | len(e)]) if len(e) < 32 else b"\xd9" + bytes([len(e)])) + e
    if isinstance(v, list):
        return bytes([0x90 | len(v)]) + b"".join(mp(x) for x in v)
    if isinstance(v, dict):
        return bytes([0x80 | len(v)]) + b"".join(mp(k) + mp(x) for k, x in v.items())
    raise TypeError(v)


def wire():
    d = os.path.join(OUT, "wire")
    os.makedirs(d, exist_ok=True)
    params = [42, -23, 1.5, "s", None, True, {"k": [1]}]
    seeds = {
        "ready": mp([1, 1, 64, ["echo", "sum", "subtract"]]),
        "ready-opts": mp([1, 1, 1, ["a"], {"name": "w1", "idempotent": ["a"]}]),
        "request": mp([1, 2, [[1, "echo", params, 30000], [2, "sum", None, 5], [3, "x", {"a": 1}, 0]]]),
        "request-trace": mp([1, 2, [[1, "echo", params, 30000,
                                     "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"],
                                    [2, "sum", None, 5, None, "future"]]]),
        "response": mp([1, 3, [[1, 0, params], [2, 1, {"code": -32602, "message": "Invalid params",
                                                         "data": [1]}], [3, 0, None], [4, 0, b"bin"]]]),
        "response-bad-error": mp([1, 3, [[5, 1, {"code": 1.5, "message": "m"}], [6, 1, {"message": "m"}]]]),
        "heartbeat": mp([1, 4]),
        "disconnect": mp([1, 5]),
        "version-2": mp([2, 4]),
        "array32-uint64": b"\xdd\x00\x00\x00\x02\xcf" + struct.pack(">Q", 1) + b"\xcc\x04",
        "deep": mp([1, 3, [[1, 0, None]]])[:-1] + b"\x91" * 200 + b"\xc0",
        "header": mp({"key": "k1", "timestamp": 1700000000, "nonce": "n", "signature": "00ff",
                      "timeout_ms": 500, "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}),
        "header-dup": b"\x82\xa3key\xa1a\xa3key\xa1b",
        "ext-str32": b"\x93\x01\x03\x91\x93\x07\x00\xd6\x01" + b"abcd",
        # JSON text (PROTOCOL.md 2.1 "json", 2.2, 2.3): params, results and data as bin
        "ready-json": mp([1, 1, 8, ["echo", "sum"], {"idempotent": ["echo"], "json": ["echo"]}]),
        "request-json": mp([1, 2, [[1, "echo", b'[1, {"a" : 2.5, "b":"\\u00e9"}]', 3000],
                                   [2, "echo", b"", 5], [3, "sum", [1, 2], 0]]]),
        "response-json": mp([1, 3, [[1, 0, b' {"a" : [1, 2.50]} '],
                                    [2, 1, {"code": -1, "message": "m", "data": b"[true]"}],
                                    [3, 0, b"[1,"], [4, 0, b"1e400"]]]),
    }
    for name, s in seeds.items():
        open(os.path.join(d, name + ".mp"), "wb").write(s)



# ---- workers: scripts for fuzz_workers.c (record format in its header) ------
def workers():
    d = os.path.join(OUT, "workers")
    os.makedirs(d, exist_ok=True)

    def ready(credit, methods, opts=None):
        return mp([1, 1, credit, methods] + ([opts] if opts else []))

    def frame(wid, f):
        return bytes([0, wid, len(f) & 255, len(f) >> 8]) + f

    hb, dc = mp([1, 4]), mp([1, 5])
    named = {"name": "w.a", "idempotent": ["m0"]}
    seeds = {
        "ready_call_answer": frame(0, ready(4, ["m0", "m1"], named)) + bytes([1, 0, 1, 6, 7, 0, 0, 3]),
        "two_workers_queue": frame(0, ready(1, ["m0"])) + frame(1, ready(2, ["m0", "m2"])) +
        bytes([1, 0, 1, 1, 0, 2, 1, 0, 3, 1, 0, 4, 6, 7, 0, 0, 7, 1, 0, 6]),
        "timeouts_eject": frame(0, ready(4, ["m0"])) +
        bytes([1, 0, 1, 1, 0, 2, 6, 2, 1, 1, 2, 2, 1, 1, 0, 3, 6, 5, 3, 1, 0, 5, 6]),
        "liveness_redispatch": frame(0, ready(4, ["m0"])) + frame(2, ready(4, ["m0"])) +
        bytes([1, 0, 1, 6, 4, 3, 3, 6, 7, 2, 0]),
        "ready_again_churn": frame(0, ready(2, ["m0", "m1", "m2"])) + frame(0, ready(2, ["m3", "m4", "m5"])) +
        frame(0, ready(2, ["m6", "m7"])) + bytes([3, 6]),
        "disconnect_drain": frame(1, ready(2, ["m1"])) + bytes([1, 1, 3, 6]) + frame(1, dc) +
        bytes([7, 1, 0, 6]) + frame(1, hb),
        "grace_unknown": bytes([1, 8, 1, 1, 3, 2]) + frame(0, ready(1, ["m3"])) + bytes([6, 3]),
        "too_many": frame(0, ready(4, ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "a", "b"])),
        "unreachable": frame(3, ready(4, ["m0"])) + bytes([1, 0, 1, 6, 3]),
        "json_and_msgpack": frame(0, ready(4, ["m0", "m1"], {"idempotent": ["m0"], "json": ["m0"]})) +
        frame(2, ready(4, ["m0"])) + bytes([1, 0, 1, 1, 1, 2, 6, 4, 3, 3, 6, 7, 2, 0]),
    }
    for name, s in seeds.items():
        open(os.path.join(d, name), "wb").write(s)


# ---- ws ---------------------------------------------------------------------
def ws():
    d = os.path.join(OUT, "ws")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d, exist_ok=True)

    def fr(op, payload=b"", fin=True, key=b"\0\0\0\0", rsv=0, ext=None):
        n = len(payload)
        h = bytes([(0x80 if fin else 0) | rsv | op])
        if ext == 16 or (ext is None and 126 <= n < 65536):
            h += bytes([0x80 | 126]) + struct.pack(">H", n)
        elif ext == 64 or (ext is None and n >= 65536):
            h += bytes([0x80 | 127]) + struct.pack(">Q", n)
        else:
            h += bytes([0x80 | n])
        return h + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))

    call = b'{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}'
    big = b"[" + b"1," * 100 + b"1]"
    seeds = {
        "one_call": bytes([255, 1]) + fr(1, call),
        "batch_fragments_ping": bytes([255, 3]) + fr(1, b'[{"jsonrpc":', fin=False) + fr(9, b"hi") +
        fr(0, b'"2.0","method":"b"}', fin=False) + fr(0, b"]") + fr(10, b"jrpc"),
        "close_normal": bytes([255, 5]) + fr(1, b"[1]") + fr(8, struct.pack(">H", 1000) + b"bye") + fr(1, b"[2]"),
        "close_empty": bytes([255, 7]) + fr(8),
        "close_one_byte": bytes([255, 9]) + fr(8, b"\x03"),
        "close_bad_code": bytes([255, 11]) + fr(8, struct.pack(">H", 1005)),
        "over_limit": bytes([16, 13]) + fr(1, big),
        "over_limit_fragments": bytes([40, 15]) + fr(1, big[:30], fin=False) + fr(0, big[30:]),
        "length_16": bytes([255, 17]) + fr(1, big),
        "length_64": bytes([16, 19]) + fr(1, b"[" + b"0," * 32768 + b"0]")[:24],   # 1009 at its head
        "nonminimal_16": bytes([255, 21]) + fr(1, b"[3]", ext=16),
        "nonminimal_64": bytes([255, 23]) + fr(1, b"[3]", ext=64),
        "length_2_63": bytes([255, 25]) + b"\x81\xff\x80" + b"\0" * 7 + b"\0\0\0\0",
        "ping_126": bytes([255, 27]) + fr(9, b"p" * 126),
        "ping_fragmented": bytes([255, 29]) + fr(9, b"hi", fin=False),
        "binary": bytes([255, 31]) + fr(2, b"[1]"),
        "invalid_utf8": bytes([255, 33]) + fr(1, b'["\xed\xa0\x80"]'),
        "utf8_split": bytes([255, 35]) + fr(1, b'["\xf0\x9f', fin=False) + fr(0, b'\x98\x80"]'),
        "unmasked": bytes([255, 37]) + b"\x81\x03[1]",
        "rsv": bytes([255, 39]) + fr(1, b"[1]", rsv=0x40),
        "lone_continuation": bytes([255, 41]) + fr(0, b"[1]"),
        "masked_key": bytes([255, 43]) + fr(1, call, key=b"\x37\xfa\x21\x3d") + fr(9, b"", key=b"\x01\x02\x03\x04"),
        "server_acts": bytes([255, 45]) + fr(1, b"\x00\x00") + fr(1, b"[1]") + fr(9, b"\x01") +
        fr(1, b"[2]"),
    }
    for name, s in seeds.items():
        open(os.path.join(d, name), "wb").write(s)


if __name__ == "__main__":
    jts = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../data/jsontestsuite")
    body(jts)
    http()
    http_reader()
    http_diff()
    wire()
    workers()
    ws()
