#!/usr/bin/env python3
"""A notification flood for tests/e2e/flood.sh (issue 36, item 1).

    flood.py MODE PORT CONNS BODIES SECS

MODE is rpc (POST /rpc), mcp (POST /mcp) or ws (a WebSocket on /rpc).
Each of CONNS connections sends at most BODIES notifications of the slow
method `sleep` with about 512 KB of params each, as fast as the socket
takes them (HTTP requests pipelined, WebSocket messages back to back),
for SECS seconds at most; answers are read and counted meanwhile. Prints
one line:

    sent=N answered=A empty=E busy=B other=O

sent: bodies whose bytes the socket took; empty: 204/202 (HTTP), busy: 503
(HTTP) or an error -32000 (WebSocket), other: anything else."""
import os, select, socket, struct, sys, time

MODE, PORT, CONNS, BODIES, SECS = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                   int(sys.argv[4]), float(sys.argv[5]))
PAD = "x" * (512 * 1024)
BODY = ('{"jsonrpc":"2.0","method":"sleep","params":{"ms":200,"pad":"%s"}}' % PAD).encode()


def http_request(path, extra=b""):
    return (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n" % len(BODY) + extra +
            b"\r\n" + BODY)


def ws_frame(payload):
    """A masked text frame with a zero masking key (the payload unchanged)."""
    n = len(payload)
    head = b"\x81" + (bytes([0x80 | n]) if n < 126 else
                      b"\xfe" + struct.pack(">H", n) if n < 65536 else
                      b"\xff" + struct.pack(">Q", n))
    return head + b"\0\0\0\0" + payload


class Conn:
    def __init__(self):
        self.s = socket.create_connection(("127.0.0.1", PORT))
        self.inb = b""
        self.sent = 0
        self.off = 0
        if MODE == "ws":
            self.s.sendall(b"GET /rpc HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                           b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                           b"Sec-WebSocket-Version: 13\r\n\r\n")
            head = b""
            while b"\r\n\r\n" not in head:
                got = self.s.recv(4096)
                if not got:
                    sys.exit("no 101")
                head += got
            if not head.startswith(b"HTTP/1.1 101"):
                sys.exit("upgrade refused: %r" % head[:40])
            self.inb = head.split(b"\r\n\r\n", 1)[1]
            self.msg = ws_frame(BODY)
        elif MODE == "mcp":
            self.msg = http_request(b"/mcp", b"Accept: application/json, text/event-stream\r\n")
        else:
            self.msg = http_request(b"/rpc")
        self.s.setblocking(False)

    def pump_out(self):
        """Sends what the socket takes; False once BODIES are out."""
        while self.sent < BODIES:
            try:
                k = self.s.send(memoryview(self.msg)[self.off:])
            except BlockingIOError:
                return True
            self.off += k
            if self.off == len(self.msg):
                self.off = 0
                self.sent += 1
        return False


def count_http(c, tally):
    while True:
        end = c.inb.find(b"\r\n\r\n")
        if end < 0:
            return
        head = c.inb[:end].decode("latin-1")
        n = 0
        for line in head.split("\r\n")[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == "content-length":
                n = int(v)
        if len(c.inb) < end + 4 + n:
            return
        c.inb = c.inb[end + 4 + n:]
        status = head.split(" ", 2)[1]
        tally["answered"] += 1
        key = {"204": "empty", "202": "empty", "503": "busy"}.get(status, "other")
        tally[key] += 1


def count_ws(c, tally):
    while len(c.inb) >= 2:
        n = c.inb[1] & 0x7F
        at = 2
        if n == 126:
            if len(c.inb) < 4:
                return
            n, at = struct.unpack(">H", c.inb[2:4])[0], 4
        elif n == 127:
            if len(c.inb) < 10:
                return
            n, at = struct.unpack(">Q", c.inb[2:10])[0], 10
        if len(c.inb) < at + n:
            return
        payload, op = c.inb[at:at + n], c.inb[0] & 0x0F
        c.inb = c.inb[at + n:]
        if op != 1:
            continue
        tally["answered"] += 1
        tally["busy" if b"-32000" in payload else "other"] += 1


def main():
    conns = [Conn() for _ in range(CONNS)]
    tally = dict(answered=0, empty=0, busy=0, other=0)
    t_end = time.monotonic() + SECS
    while time.monotonic() < t_end:
        writing = [c.s for c in conns if c.pump_out()]
        r, _, _ = select.select([c.s for c in conns], writing, [], 0.05)
        for c in conns:
            if c.s in r:
                try:
                    got = c.s.recv(1 << 20)
                except (BlockingIOError, ConnectionResetError):
                    got = b""
                c.inb += got
                (count_ws if MODE == "ws" else count_http)(c, tally)
        if not writing and all(c.sent >= BODIES for c in conns):
            break
    print("sent=%d answered=%d empty=%d busy=%d other=%d" %
          (sum(c.sent for c in conns), tally["answered"], tally["empty"], tally["busy"],
           tally["other"]))
    for c in conns:
        c.s.close()


main()
