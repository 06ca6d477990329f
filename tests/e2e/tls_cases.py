#!/usr/bin/env python3
"""TLS cases for tests/e2e/tls.sh, with Python's ssl module (OpenSSL under
it, but a client no one here wrote) and raw sockets for the broken clients.

Usage: tls_cases.py PORT CAFILE CASE [ARG]
One line per check ("ok   NAME" / "FAIL NAME: ..."), exit 1 on a failure.
  keepalive        three calls on one connection, the same TLS session
  pipeline N       N requests in one write, N answers in order
  large KB         a body of KB kilobytes (one echo call) across many records
  truncated MS     half a ClientHello, then silence: closed within MS + 2 s
  garbage          bytes that are neither TLS nor HTTP: closed at once
  resume           a second connection resumes the first one's session
  across FILE      a call, then (same connection) another once FILE exists
  wss [CERT,KEY]   a call over wss:// (python3-websockets), jrpc subprotocol,
                   with a client certificate when given (mutual TLS)
"""
import asyncio
import json
import socket
import ssl
import sys
import time

HOST = "127.0.0.1"
PORT = int(sys.argv[1])
CA = sys.argv[2]
CASE = sys.argv[3]
ARG = sys.argv[4] if len(sys.argv) > 4 else ""
FAILED = 0


def check(name, expected, actual):
    global FAILED
    if expected == actual:
        print("ok   " + name)
    else:
        FAILED += 1
        print("FAIL %s: expected %r, got %r" % (name, expected, actual))


def ctx():
    c = ssl.create_default_context(cafile=CA)
    c.set_alpn_protocols(["http/1.1"])
    return c


def connect(c=None, session=None):
    s = socket.create_connection((HOST, PORT), timeout=10)
    return (c or ctx()).wrap_socket(s, server_hostname=HOST, session=session)


def request(body, extra=b""):
    return (b"POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra +
            b"Content-Length: %d\r\n\r\n" % len(body) + body)


class Reader:
    def __init__(self, s):
        self.s, self.buf = s, b""

    def fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError("connection closed")
        self.buf += d

    def response(self):
        while b"\r\n\r\n" not in self.buf:
            self.fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        n = 0
        for ln in lines[1:]:
            k, v = ln.split(b":", 1)
            if k.strip().lower() == b"content-length":
                n = int(v)
        while len(self.buf) < n:
            self.fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, body


def call(i, method="add", params=None):
    return json.dumps({"jsonrpc": "2.0", "method": method,
                       "params": params if params is not None else [i, 1], "id": i},
                      separators=(",", ":")).encode()


def keepalive():
    s = connect()
    check("ALPN chose http/1.1", "http/1.1", s.selected_alpn_protocol())
    check("TLS 1.3 by default", "TLSv1.3", s.version())
    r = Reader(s)
    for i in range(3):
        s.sendall(request(call(i)))
        check("keep-alive call %d" % i, (200, b'{"jsonrpc":"2.0","result":%d,"id":%d}' % (i + 1, i)),
              r.response())
    s.close()


def pipeline(n):
    s = connect()
    s.sendall(b"".join(request(call(i)) for i in range(n)))
    r = Reader(s)
    got = [r.response() for _ in range(n)]
    check("%d pipelined answers, in order" % n,
          [(200, b'{"jsonrpc":"2.0","result":%d,"id":%d}' % (i + 1, i)) for i in range(n)], got)
    s.close()


def large(kb):
    text = "x" * (kb * 1024)
    s = connect()
    s.sendall(request(call(7, "echo", [text])))
    st, body = Reader(s).response()
    d = json.loads(body)
    check("%d KB body echoed whole" % kb, (200, 7, len(text), True),
          (st, d.get("id"), len(d.get("result", [""])[0]), d.get("result", [""])[0] == text))
    s.close()


def closed_within(s, secs):
    """Seconds until EOF/reset, or None when the connection stays open."""
    t0 = time.monotonic()
    s.settimeout(secs)
    try:
        while True:
            d = s.recv(4096)
            if not d:
                return time.monotonic() - t0
    except (ConnectionResetError, BrokenPipeError):
        return time.monotonic() - t0
    except socket.timeout:
        return None


def client_hello():
    """The first flight of a real client, taken from an in-memory handshake."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx().wrap_bio(inc, out, server_hostname=HOST)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def truncated(ms):
    hello = client_hello()
    s = socket.create_connection((HOST, PORT), timeout=10)
    s.sendall(hello[:len(hello) // 2])
    t = closed_within(s, ms / 1000.0 + 2.0)
    check("a truncated handshake is closed by the handshake timeout", True,
          t is not None and t >= ms / 1000.0 - 0.2)
    s.close()


def garbage():
    s = socket.create_connection((HOST, PORT), timeout=10)
    s.sendall(b"\x16\x03\x01\x00\x05hello, this is not TLS at all\r\n\r\n" * 4)
    t = closed_within(s, 3.0)
    check("garbage: closed at once", True, t is not None and t < 2.0)
    s.close()


def resume():
    c = ctx()
    s = connect(c)
    s.sendall(request(call(1)))
    Reader(s).response()   # (TLS 1.3 tickets arrive after the handshake)
    sess = s.session
    s.close()
    s2 = connect(c, session=sess)
    check("the second connection resumed the session", True, s2.session_reused)
    s2.sendall(request(call(2)))
    check("a call on the resumed session", (200, b'{"jsonrpc":"2.0","result":3,"id":2}'),
          Reader(s2).response())
    s2.close()


def across(flag):
    import os
    s = connect()
    r = Reader(s)
    s.sendall(request(call(1)))
    check("before the reload", (200, b'{"jsonrpc":"2.0","result":2,"id":1}'), r.response())
    t0 = time.monotonic()
    while not os.path.exists(flag) and time.monotonic() - t0 < 30:
        time.sleep(0.05)
    s.sendall(request(call(2)))
    check("after the reload, on the connection opened before it",
          (200, b'{"jsonrpc":"2.0","result":3,"id":2}'), r.response())
    s.close()


def wss():
    import websockets
    c = ctx()
    if ARG:
        c.load_cert_chain(*ARG.split(","))

    async def go():
        async with websockets.connect("wss://%s:%d/rpc" % (HOST, PORT), ssl=c,
                                      subprotocols=["jrpc"]) as ws:
            await ws.send(call(5).decode())
            return await asyncio.wait_for(ws.recv(), 10)
    check("a call over wss://" + (" with a client certificate" if ARG else ""), '{"jsonrpc":"2.0","result":6,"id":5}', asyncio.run(go()))


{"keepalive": keepalive, "pipeline": lambda: pipeline(int(ARG)),
 "large": lambda: large(int(ARG)), "truncated": lambda: truncated(int(ARG)),
 "garbage": garbage, "resume": resume, "wss": wss, "across": lambda: across(ARG)}[CASE]()
sys.exit(1 if FAILED else 0)
