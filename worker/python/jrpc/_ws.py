"""WebSocket (ws://, wss://, docs/WEBSOCKET.md): a small RFC 6455 client of
our own over the standard library's socket and ssl. Why not Debian's
python3-websockets: its version in Debian 12 (10.4) has only an asyncio
API, and the client's core is synchronous (the asyncio client runs it in
threads); a text-only client that masks its frames, answers pings and reads
one message at a time is a hundred lines."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import select
import socket
import ssl
import struct
import threading
import time
from typing import Dict, List, Optional, Set, Tuple

from ._http import split_url
from ._transport import Lost, NoAnswer, NotSent, Request, StreamEvents
from .errors import JsonRpcError, TransportError

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class _Closed(Exception):
    pass


class _Conn:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def fill(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout()
        self.sock.settimeout(left)
        chunk = self.sock.recv(65536)
        if not chunk:
            raise _Closed("connection closed")
        self.buf += chunk

    def _read(self, n: int, deadline: float) -> bytes:
        while len(self.buf) < n:
            self.fill(deadline)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send_frame(self, opcode: int, payload: bytes) -> None:
        head = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i & 3] for i, b in enumerate(payload)) if n < 4096 else \
            (int.from_bytes(payload, "big") ^ int.from_bytes((mask * (n // 4 + 1))[:n], "big")
             ).to_bytes(n, "big")
        self.sock.sendall(head + mask + masked)

    def recv_message(self, deadline: float) -> bytes:
        """The next text message (pings answered, fragments joined)."""
        parts: List[bytes] = []
        while True:
            b0, b1 = self._read(2, deadline)
            opcode, fin, n = b0 & 0x0F, b0 & 0x80, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2, deadline))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8, deadline))[0]
            if b1 & 0x80:
                raise TransportError("a masked frame from the server")
            payload = self._read(n, deadline)
            if opcode == 0x9:
                self.send_frame(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            if opcode == 0x8:
                code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else 1005
                try:
                    self.send_frame(0x8, payload[:2])
                except OSError:
                    pass
                raise _Closed("closed by the broker (%d)" % code)
            parts.append(payload)
            if fin:
                return b"".join(parts)


class WsTransport:
    keyed = False   # the broker takes an idempotency key per body on this transport

    def __init__(self, url: str, connect_timeout_s: float, ssl_ctx: Optional[ssl.SSLContext],
                 bearer: Optional[str], signer: Optional[object]) -> None:
        self.url = url
        scheme, self.host, self.port, self.path = split_url(url)
        self.secure = scheme == "wss"
        self.connect_timeout_s = connect_timeout_s
        self.ssl_ctx = ssl_ctx
        self.bearer = bearer
        self.signer = signer
        self._local = threading.local()

    def _connect(self, stream: bool, timeout_ms: int) -> _Conn:
        # The deadline is the connection's (X-JRPC-Timeout-Ms at the upgrade):
        # one connection per mode and deadline asked for.
        key = ("stream" if stream else "whole", timeout_ms)
        conns: Dict[Tuple[str, int], _Conn] = self._local.__dict__.setdefault("conns", {})
        c = conns.get(key)
        if c is not None:
            # Anything readable on an idle connection is its close (the
            # broker's idle timeout, a restart) or a late answer of a body
            # given up on: start afresh, so that a body is never written
            # into a connection already closing (it could not tell "not
            # run" from "may have run" then).
            if c.buf or select.select([c.sock], [], [], 0)[0]:
                self._drop(c)
            else:
                return c
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout_s)
        except OSError as e:
            raise NotSent("%s: %s" % (self.url, e)) from None
        try:
            if self.secure:
                assert self.ssl_ctx is not None
                sock = self.ssl_ctx.wrap_socket(sock, server_hostname=self.host)
            wskey = base64.b64encode(os.urandom(16)).decode()
            lines = ["GET %s HTTP/1.1" % self.path, "Host: %s:%d" % (self.host, self.port),
                     "Upgrade: websocket", "Connection: Upgrade",
                     "Sec-WebSocket-Key: " + wskey, "Sec-WebSocket-Version: 13",
                     "Sec-WebSocket-Protocol: " + ("jrpc.stream" if stream else "jrpc"),
                     "X-JRPC-Timeout-Ms: %d" % timeout_ms]
            if self.bearer is not None:
                lines.append("Authorization: Bearer " + self.bearer)
            if self.signer is not None:
                for k, v in self.signer.sign(b"").items():   # type: ignore[attr-defined]
                    lines.append("%s: %s" % (k, v))
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            conn = _Conn(sock)
            deadline = time.monotonic() + self.connect_timeout_s
            while b"\r\n\r\n" not in conn.buf:
                conn.fill(deadline)
            head, _, conn.buf = conn.buf.partition(b"\r\n\r\n")
            status = head.split(b"\r\n")[0].split(b" ")
            code = int(status[1]) if len(status) > 1 and status[1].isdigit() else 0
            if code != 101:
                body = conn.buf
                try:
                    sock.settimeout(0.5)
                    while True:
                        more = sock.recv(65536)
                        if not more:
                            break
                        body += more
                except OSError:
                    pass
                sock.close()
                try:
                    obj = json.loads(body.decode("utf-8"))
                    raise JsonRpcError.from_object(obj["error"])
                except (ValueError, KeyError, TypeError):
                    raise TransportError("%s: upgrade refused, HTTP %d" % (self.url, code)) \
                        from None
            want = base64.b64encode(hashlib.sha1(wskey.encode() + _GUID).digest())
            if want not in head:
                sock.close()
                raise TransportError("%s: a wrong Sec-WebSocket-Accept" % self.url)
        except (OSError, _Closed) as e:
            sock.close()
            raise NotSent("%s: %s" % (self.url, e)) from None
        conns[key] = conn
        return conn

    def _drop(self, c: _Conn) -> None:
        conns: Dict[Tuple[str, int], _Conn] = self._local.__dict__.get("conns", {})
        for k, v in list(conns.items()):
            if v is c:
                del conns[k]
        try:
            c.sock.close()
        except OSError:
            pass

    def close(self) -> None:
        for c in list(self._local.__dict__.get("conns", {}).values()):
            self._drop(c)

    def _send(self, req: Request, stream: bool) -> _Conn:
        if "traceparent" in req.headers:
            raise ValueError("%s: the broker's WebSocket front takes no traceparent "
                             "(docs/WEBSOCKET.md): use http(s):// or tcp:// to trace" % self.url)
        c = self._connect(stream, req.asked_ms or req.timeout_ms)
        try:
            c.send_frame(0x1, req.body)
        except OSError as e:
            self._drop(c)
            raise NotSent("%s: %s" % (self.url, e)) from None
        return c

    def send(self, req: Request) -> bytes:
        c = self._send(req, False)
        if not req.ids:
            return b""                 # notifications only: no message comes
        deadline = time.monotonic() + req.wait_s
        want: Set[str] = {json.dumps(i) for i in req.ids}
        while True:
            msg = self._recv(c, False, deadline)
            try:
                obj = json.loads(msg)
            except ValueError:
                raise TransportError("%s: an answer that is not JSON" % self.url) from None
            got = obj if isinstance(obj, list) else [obj]
            ids = {json.dumps(o.get("id")) for o in got if isinstance(o, dict)}
            if ids & want or ids == {"null"}:
                return msg
            # else: the late answer of an earlier body that timed out: skipped

    def _recv(self, c: _Conn, stream: bool, deadline: float) -> bytes:
        try:
            return c.recv_message(deadline)
        except (socket.timeout, TimeoutError):
            self._drop(c)
            raise NoAnswer("%s: no answer within the deadline" % self.url) from None
        except (OSError, _Closed) as e:
            self._drop(c)
            raise Lost("%s: %s" % (self.url, e)) from None

    def stream(self, req: Request, fmt: str) -> StreamEvents:
        c = self._send(req, True)
        deadline = time.monotonic() + req.wait_s
        want: Set[str] = {json.dumps(i) for i in req.ids}
        answered = timed_out = 0
        done = False
        try:
            while want:
                msg = self._recv(c, True, deadline)
                obj = json.loads(msg)
                if not isinstance(obj, dict):
                    raise TransportError("%s: a streamed message that is not one answer"
                                         % self.url)
                rid = json.dumps(obj.get("id"))
                if rid == "null" and "error" in obj and not want & {"null"}:
                    done = True
                    yield ("whole", None, msg)   # the body refused whole
                    return
                if rid not in want:
                    continue
                want.discard(rid)
                answered += 1
                if isinstance(obj.get("error"), dict) and obj["error"].get("code") == -32003:
                    timed_out += 1
                yield ("answer", None, msg)
            done = True
            yield ("end", None, json.dumps({"answered": answered,
                                            "timed_out": timed_out}).encode())
        finally:
            if not done:
                self._drop(c)
