#!/usr/bin/env python3
"""WebSocket clients for tests/e2e/ws.sh: Python's `websockets` (Debian's
python3-websockets, a client no one here wrote) for what a well-behaved
client does, and a raw socket with hand-made frames for what a broken or
hostile one does (no pongs, invalid UTF-8, binary, bytes before the 101).

    ws_client.py URL COMMAND [ARGS...]

(also used by tests/e2e/reload.sh: signed-hold)

Each command prints lines the shell test compares; times are printed as
"t=SECONDS" for the reader, never asserted on."""
import asyncio, base64, hashlib, hmac, json, os, secrets, socket, struct, sys, time

import websockets

URL, CMD, ARGS = sys.argv[1], sys.argv[2], sys.argv[3:]
T0 = time.monotonic()


def t():
    return "t=%.3f" % (time.monotonic() - T0)


def sleeps(*ms, extra=()):
    return [{"jsonrpc": "2.0", "method": "sleep", "params": {"ms": m}, "id": i}
            for i, m in ms] + list(extra)


def ident(msg):
    """The id of a response object, or "array[n]" for an array."""
    v = json.loads(msg)
    if isinstance(v, list):
        return "array[%d]" % len(v)
    return str(v.get("id"))


def closed_code(ws):
    return ws.close_code if ws.close_code is not None else "none"


async def quiet(ws, secs):
    """Nothing more arrives within secs: "none", else what came."""
    try:
        m = await asyncio.wait_for(ws.recv(), secs)
        return "extra " + m
    except asyncio.TimeoutError:
        return "none"


STREAM_BATCH = sleeps(("a", 1500), ("b", 50), ("c", 500),
                      extra=[{"id": "d"}, {"jsonrpc": "2.0", "method": "sleep", "params": {"ms": 10}}])


async def stream(url, protocols):
    async with websockets.connect(url, subprotocols=protocols) as ws:
        print("protocol", ws.subprotocol)
        await ws.send(json.dumps(STREAM_BATCH))
        for _ in range(4):
            m = await ws.recv()
            print(t(), "answer", ident(m), m)
        print("after the answers:", await quiet(ws, 0.4))


async def batch(url):
    async with websockets.connect(url, subprotocols=["jrpc"]) as ws:
        print("protocol", ws.subprotocol)
        await ws.send(json.dumps([{"jsonrpc": "2.0", "method": "add", "params": [1, 2], "id": 1},
                                  {"jsonrpc": "2.0", "method": "echo", "params": ["x"], "id": 2},
                                  {"jsonrpc": "2.0", "method": "add", "params": [5, 5]}]))
        print("batch:", await ws.recv())
        await ws.send('{"jsonrpc":"2.0","method":"add","params":[1,1]}')
        await ws.send('[{"jsonrpc":"2.0","method":"add","params":[1,1]}]')
        print("notifications only:", await quiet(ws, 0.3))
        await ws.send('{"jsonrpc":"2.0","method":"add","params":[2,3],"id":"s"}')
        print("single:", await ws.recv())
        await ws.send('[1,')
        print("not JSON:", await ws.recv())
        await ws.send('[]')
        print("empty array:", await ws.recv())


async def inflight(url, n):
    """n calls of 800 ms fill the connection; one more call may not start
    before one of them is answered. Then a batch of n + 2 (more than the
    limit) waits for the call in flight before it, and is answered whole."""
    async with websockets.connect(url, subprotocols=["jrpc.stream"]) as ws:
        await ws.send(json.dumps(sleeps(*[("full%d" % i, 800) for i in range(n)])))
        await ws.send(json.dumps({"jsonrpc": "2.0", "method": "sleep", "params": {"ms": 10},
                                  "id": "next"}))
        order = []
        for _ in range(n + 1):
            order.append(ident(await ws.recv()))
        print(t(), "order:", " ".join(order))
        await ws.send(json.dumps({"jsonrpc": "2.0", "method": "sleep", "params": {"ms": 600},
                                  "id": "first"}))
        await ws.send(json.dumps(sleeps(*[("big%d" % i, 10) for i in range(n + 2)])))
        order = []
        for _ in range(n + 3):
            order.append(ident(await ws.recv()))
        print(t(), "order:", " ".join(order))


async def idle(url):
    async with websockets.connect(url) as ws:
        try:
            await asyncio.wait_for(ws.recv(), 10)
        except websockets.exceptions.ConnectionClosed:
            pass
        print(t(), "closed", closed_code(ws))


async def drain(url):
    async with websockets.connect(url, subprotocols=["jrpc.stream"]) as ws:
        await ws.send(json.dumps(sleeps(("x", 100), ("y", 900))))
        print("sent", flush=True)
        try:
            while True:
                m = await ws.recv()
                print(t(), "answer", ident(m), flush=True)
        except websockets.exceptions.ConnectionClosed:
            pass
        print(t(), "closed", closed_code(ws))


async def leave(url):
    """Leaves mid-stream: the first answer, then the TCP connection is cut."""
    ws = await websockets.connect(url, subprotocols=["jrpc.stream"])
    await ws.send(json.dumps(sleeps(("slow", 1500), ("fast", 50), ("slower", 2500))))
    print(t(), "answer", ident(await ws.recv()))
    ws.transport.abort()
    print(t(), "left")


async def queued(url, n, size):
    """A client that stops reading: the answers pile up in the broker until
    its send queue passes --ws-max-queued, and the connection closes 1008
    after the answers queued before the close."""
    async with websockets.connect(url, max_queue=1, max_size=None) as ws:
        blob = "x" * size
        for i in range(n):
            await ws.send(json.dumps({"jsonrpc": "2.0", "method": "echo", "params": [blob],
                                      "id": i}))
        await asyncio.sleep(3)
        got = 0
        try:
            while True:
                await ws.recv()
                got += 1
        except websockets.exceptions.ConnectionClosed:
            pass
        print("answers before the close:", "some" if 0 < got < n else got)
        print("closed", closed_code(ws))


async def too_big(url, n):
    async with websockets.connect(url) as ws:
        await ws.send("[" + " " * n + "]")
        try:
            await asyncio.wait_for(ws.recv(), 5)
        except websockets.exceptions.ConnectionClosed:
            pass
        print("closed", closed_code(ws))


def sign(key, secret, body=b"", ts=None, nonce=None):
    ts = int(time.time()) if ts is None else ts
    nonce = nonce or secrets.token_urlsafe(16)[:22]
    s = "v1\n%s\n%d\n%s\n%s" % (key, ts, nonce, hashlib.sha256(body).hexdigest())
    sig = hmac.new(secret.encode(), s.encode(), hashlib.sha256).hexdigest()
    return {"X-JRPC-Key": key, "X-JRPC-Timestamp": str(ts), "X-JRPC-Nonce": nonce,
            "X-JRPC-Signature": sig}


async def signed(url, key, secret, replay):
    """A signed upgrade, then messages under the key's ACL; with replay,
    the same headers a second time (refused: the nonce is claimed)."""
    headers = sign(key, secret)
    async with websockets.connect(url, extra_headers=headers) as ws:
        await ws.send(json.dumps([{"jsonrpc": "2.0", "method": "add", "params": [2, 2], "id": 1},
                                  {"jsonrpc": "2.0", "method": "echo", "params": [1], "id": 2}]))
        print("signed:", await ws.recv())
    if replay:
        try:
            async with websockets.connect(url, extra_headers=headers):
                print("replay: accepted")
        except websockets.exceptions.InvalidStatusCode as e:
            print("replay:", e.status_code)


async def signed_hold(url, key, secret, go_file):
    """A signed upgrade and a call; then, on the same connection, another
    call once go_file exists (the test reloaded the keys meanwhile): its
    answer, or the close the broker sent instead."""
    call = '{"jsonrpc":"2.0","method":"add","params":[%d,1],"id":%d}'
    async with websockets.connect(url, extra_headers=sign(key, secret)) as ws:
        await ws.send(call % (1, 1))
        print("before:", await ws.recv(), flush=True)
        for _ in range(600):
            if os.path.exists(go_file):
                break
            await asyncio.sleep(0.05)
        try:
            await ws.send(call % (2, 2))
            print("after:", await ws.recv(), flush=True)
        except websockets.exceptions.ConnectionClosed:
            print("after: closed", closed_code(ws), flush=True)


async def origin(url, value):
    """An upgrade from a browser page at origin value: "open", or the status."""
    try:
        async with websockets.connect(url, origin=value) as ws:
            await ws.send('{"jsonrpc":"2.0","method":"add","params":[1,1],"id":1}')
            print("open", await ws.recv())
    except websockets.exceptions.InvalidStatusCode as e:
        print("refused", e.status_code)


async def unsigned(url):
    try:
        async with websockets.connect(url):
            print("open")
    except websockets.exceptions.InvalidStatusCode as e:
        print("refused", e.status_code)


async def signed_bad(url, key, secret, how):
    h = sign(key, secret, ts=int(time.time()) - 3600 if how == "stale" else None)
    if how == "badsig":
        h["X-JRPC-Signature"] = "0" * 64
    try:
        async with websockets.connect(url, extra_headers=h):
            print("open")
    except websockets.exceptions.InvalidStatusCode as e:
        print("refused", e.status_code)


# ---- a raw client: hand-made frames (masked, as a client must) -------------------

def frame(opcode, payload, fin=True, mask=True):
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    mbit = 0x80 if mask else 0
    if n < 126:
        head += bytes([mbit | n])
    elif n < 65536:
        head += bytes([mbit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([mbit | 127]) + struct.pack("!Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def raw_connect(extra=b"", path="/rpc", headers=None):
    host, port = URL.split("//")[1].split("/")[0].split(":")
    s = socket.create_connection((host, int(port)), timeout=10)
    more = "".join("%s: %s\r\n" % kv for kv in (headers or {}).items()).encode()
    s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
              b"Sec-WebSocket-Version: 13\r\n" + more + b"\r\n" + extra)
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            raise SystemExit("closed during the handshake: %r" % buf)
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    status = head.split(b"\r\n")[0].decode()
    accept = [l for l in head.split(b"\r\n") if l.lower().startswith(b"sec-websocket-accept:")]
    return s, status, accept, rest


def raw_frames(s, rest, until_close=True, secs=10, count=0):
    """Reads server frames until a close (or EOF; or count text frames, or
    a close, when count is given): [(opcode, payload)]."""
    s.settimeout(secs)
    buf, out = rest, []
    while True:
        while len(buf) >= 2:
            op, n = buf[0] & 0x0F, buf[1] & 0x7F
            if buf[1] & 0x80:
                raise SystemExit("a masked frame from the server")
            off = 2
            if n == 126:
                if len(buf) < 4:
                    break
                n, off = struct.unpack("!H", buf[2:4])[0], 4
            elif n == 127:
                if len(buf) < 10:
                    break
                n, off = struct.unpack("!Q", buf[2:10])[0], 10
            if len(buf) < off + n:
                break
            out.append((op, buf[off:off + n]))
            buf = buf[off + n:]
            if op == 8 and (until_close or count):
                return out
            if count and sum(1 for o, _ in out if o == 1) >= count:
                return out
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return out
        if not chunk:
            return out
        buf += chunk


def close_code(frames):
    for op, p in frames:
        if op == 8:
            return struct.unpack("!H", p[:2])[0] if len(p) >= 2 else "no code"
    return "none"


def hold(auth, go_file, expect):
    """A raw socket opened with auth ("bearer:TOKEN" or "sign:KEY:SECRET"),
    a call answered; then, once go_file exists (the test rotated the key
    file and reloaded): expect "open": another call and its answer;
    expect "close": the close the broker sends (10 s at most), then a call
    sent anyway and what comes back before EOF ("no answer", or the text)."""
    if auth.startswith("bearer:"):
        h = {"Authorization": "Bearer " + auth[7:]}
    else:
        _, key, secret = auth.split(":", 2)
        h = sign(key, secret)
    s, status, _, rest = raw_connect(b"", headers=h)
    if not status.endswith("101 Switching Protocols"):
        print("refused", status, flush=True)
        return
    call = '{"jsonrpc":"2.0","method":"add","params":[%d,1],"id":%d}'
    s.sendall(frame(1, (call % (1, 1)).encode()))
    frames = raw_frames(s, rest, until_close=False, secs=10, count=1)
    print("before:", " ".join(p.decode() for op, p in frames if op == 1), flush=True)
    for _ in range(600):
        if os.path.exists(go_file):
            break
        time.sleep(0.05)
    if expect == "open":
        s.sendall(frame(1, (call % (2, 2)).encode()))
        frames = raw_frames(s, b"", secs=10, count=1)
        print("after:", " ".join(p.decode() if op == 1 else "close %s" % close_code([(op, p)])
                                 for op, p in frames), flush=True)
        return
    frames = raw_frames(s, b"", secs=10)
    closes = [(op, p) for op, p in frames if op == 8]
    print("closed", close_code(closes), closes[0][1][2:].decode() if closes else "", flush=True)
    try:
        s.sendall(frame(1, (call % (3, 3)).encode()))
        frames = raw_frames(s, b"", until_close=False, secs=10)
    except OSError:
        frames = []
    texts = [p.decode() for op, p in frames if op == 1]
    print("after:", " ".join(texts) if texts else "no answer", flush=True)


def raw(kind):
    if kind == "accept":   # RFC 6455's own example key
        s, status, accept, rest = raw_connect()
        print(status, accept[0].decode() if accept else "no accept")
        s.sendall(frame(8, struct.pack("!H", 1000)))
        print("close answered", close_code(raw_frames(s, rest)))
    elif kind == "early":   # a message sent with the handshake, before the 101
        msg = json.dumps({"jsonrpc": "2.0", "method": "add", "params": [20, 22], "id": "early"})
        s, status, accept, rest = raw_connect(frame(1, msg.encode()))
        frames = raw_frames(s, rest, secs=3)
        print(status, [p.decode() for op, p in frames if op == 1][:1])
    elif kind == "utf8":
        s, _, _, rest = raw_connect()
        s.sendall(frame(1, b'{"x":"\xc3\x28"}'))
        print("closed", close_code(raw_frames(s, rest)))
    elif kind == "binary":
        s, _, _, rest = raw_connect()
        s.sendall(frame(2, b"[1,2]"))
        print("closed", close_code(raw_frames(s, rest)))
    elif kind == "unmasked":
        s, _, _, rest = raw_connect()
        s.sendall(frame(1, b"[]", mask=False))
        print("closed", close_code(raw_frames(s, rest)))
    elif kind == "fragments":   # one message in three frames, a ping between them
        s, _, _, rest = raw_connect()
        msg = json.dumps({"jsonrpc": "2.0", "method": "add", "params": [1, 2], "id": 9}).encode()
        s.sendall(frame(1, msg[:10], fin=False) + frame(9, b"hi") + frame(0, msg[10:20], fin=False))
        time.sleep(0.1)
        s.sendall(frame(0, msg[20:]))
        frames = raw_frames(s, rest, until_close=False, secs=1)
        print("pong", [p.decode() for op, p in frames if op == 10],
              "text", [p.decode() for op, p in frames if op == 1])
    elif kind == "noping":   # never reads, never answers a ping
        s, _, _, rest = raw_connect()
        wait = float(ARGS[1])
        time.sleep(wait)
        frames = raw_frames(s, rest)
        print("pings", "yes" if any(op == 9 for op, _ in frames) else "no",
              "closed", close_code(frames))
    elif kind == "header":   # hand-made frame bytes (hex): the close, then a clean EOF?
        s, _, _, rest = raw_connect()
        s.sendall(bytes.fromhex(ARGS[1]))
        try:
            frames = raw_frames(s, rest)
            s.settimeout(10)
            end = "eof" if s.recv(1) == b"" else "more bytes"
        except ConnectionResetError:
            frames, end = [], "reset"
        close = [p for op, p in frames if op == 8]
        print("close", close[0].hex() if close else "none", end)
    else:
        raise SystemExit("unknown raw kind " + kind)


if CMD == "stream":
    asyncio.run(stream(URL, ["jrpc.stream"]))
elif CMD == "stream-query":
    asyncio.run(stream(URL, None))
elif CMD == "batch":
    asyncio.run(batch(URL))
elif CMD == "inflight":
    asyncio.run(inflight(URL, int(ARGS[0])))
elif CMD == "idle":
    asyncio.run(idle(URL))
elif CMD == "drain":
    asyncio.run(drain(URL))
elif CMD == "leave":
    asyncio.run(leave(URL))
elif CMD == "queued":
    asyncio.run(queued(URL, int(ARGS[0]), int(ARGS[1])))
elif CMD == "too-big":
    asyncio.run(too_big(URL, int(ARGS[0])))
elif CMD == "signed":
    asyncio.run(signed(URL, ARGS[0], ARGS[1], len(ARGS) > 2 and ARGS[2] == "replay"))
elif CMD == "signed-hold":
    asyncio.run(signed_hold(URL, ARGS[0], ARGS[1], ARGS[2]))
elif CMD == "origin":
    asyncio.run(origin(URL, ARGS[0]))
elif CMD == "unsigned":
    asyncio.run(unsigned(URL))
elif CMD == "signed-bad":
    asyncio.run(signed_bad(URL, ARGS[0], ARGS[1], ARGS[2]))
elif CMD == "raw":
    raw(ARGS[0])
elif CMD == "hold":
    hold(ARGS[0], ARGS[1], ARGS[2])
else:
    raise SystemExit("unknown command " + CMD)
