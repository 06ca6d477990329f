#!/usr/bin/env python3
"""Broker memory per idle keep-alive connection, plaintext or TLS: opens N
connections, makes one call on each (an echo of BYTES, or add), keeps them
open, and prints the growth of the broker's RSS per connection.

    python3 bench/tls_idle.py PORT N plain|tls BROKER_PID [BYTES] [CAFILE]

The broker must serve http(s)://127.0.0.1:PORT with a worker that has echo
(jrpc-worker); use a release build (ASan multiplies every figure)."""
import socket
import ssl
import sys
import time

port, n, mode, pid = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
size = int(sys.argv[5]) if len(sys.argv) > 5 else 0
ca = sys.argv[6] if len(sys.argv) > 6 else "ca.pem"


def rss_kb():
    with open("/proc/%s/status" % pid) as f:
        return int([ln for ln in f if ln.startswith("VmRSS")][0].split()[1])


ctx = ssl.create_default_context(cafile=ca) if mode == "tls" else None
body = (b'{"jsonrpc":"2.0","method":"echo","params":["' + b"x" * size + b'"],"id":1}' if size
        else b'{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}')
req = (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
       % len(body) + body)
r0 = rss_kb()
keep = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    if ctx:
        s = ctx.wrap_socket(s, server_hostname="127.0.0.1")
    s.sendall(req)
    got = b""
    while True:
        got += s.recv(65536)
        if b"\r\n\r\n" in got:
            head, rest = got.split(b"\r\n\r\n", 1)
            cl = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            if len(rest) >= cl:
                break
    keep.append(s)
time.sleep(0.5)
r1 = rss_kb()
print("%s: %d idle connections after one %s call each: +%d KB RSS, %.1f KB per connection"
      % (mode, n, "%d-byte echo" % size if size else "add", r1 - r0, (r1 - r0) / n))
