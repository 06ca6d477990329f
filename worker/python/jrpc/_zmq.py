"""ZeroMQ (tcp://, ipc://) with pyzmq: a DEALER per broker and thread, the
optional header frame of PROTOCOL.md 9.1, streamed answers of 9.2, and a
socket monitor to tell "never connected" (the body did not leave) from
"the connection died after the body left" (it may have run)."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import msgpack
import zmq
from zmq.utils.monitor import recv_monitor_message

from ._transport import Lost, NoAnswer, NotSent, Request, StreamEvents
from .errors import TransportError

_CTX_LOCK = threading.Lock()
_CTX: Optional[zmq.Context] = None


def _context() -> zmq.Context:
    global _CTX
    with _CTX_LOCK:
        if _CTX is None:
            _CTX = zmq.Context()
        return _CTX


class _Conn:
    """One DEALER to one broker, with its monitor."""

    def __init__(self, url: str, curve: Optional[Tuple[str, str, str]]) -> None:
        ctx = _context()
        self.sock = ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.IMMEDIATE, 1)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        if curve is not None:
            public, secret, server = curve
            self.sock.setsockopt(zmq.CURVE_PUBLICKEY, public.encode())
            self.sock.setsockopt(zmq.CURVE_SECRETKEY, secret.encode())
            self.sock.setsockopt(zmq.CURVE_SERVERKEY, server.encode())
        self.mon = self.sock.get_monitor_socket(
            zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED | zmq.EVENT_CLOSED)
        self.up = False
        self.dead = False
        try:
            self.sock.connect(url)
        except zmq.ZMQError as e:
            self.close()
            raise TransportError("%s: %s" % (url, e)) from None

    def drain_events(self) -> None:
        while self.mon.poll(0):
            ev = recv_monitor_message(self.mon)
            if ev["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.up = True
            elif ev["event"] in (zmq.EVENT_DISCONNECTED, zmq.EVENT_CLOSED):
                if self.up:
                    self.dead = True
                self.up = False

    def close(self) -> None:
        try:
            self.sock.disable_monitor()
        except zmq.ZMQError:
            pass
        self.mon.close(0)
        self.sock.close(0)


class ZmqTransport:
    keyed = True   # the broker takes an idempotency key per body on this transport

    def __init__(self, url: str, connect_timeout_s: float,
                 curve: Optional[Tuple[str, str, str]]) -> None:
        self.url = url
        self.connect_timeout_s = connect_timeout_s
        self.curve = curve
        self._local = threading.local()

    def _conn(self) -> _Conn:
        c: Optional[_Conn] = getattr(self._local, "conn", None)
        if c is not None:
            c.drain_events()
            if c.dead:
                self._drop()
                c = None
        if c is None:
            c = _Conn(self.url, self.curve)
            self._local.conn = c
        end = time.monotonic() + self.connect_timeout_s
        while not c.up:
            left = end - time.monotonic()
            if left <= 0:
                self._drop()
                raise NotSent("%s: no ZeroMQ handshake within %d ms (broker down, or CURVE keys "
                              "it does not admit)" % (self.url, self.connect_timeout_s * 1000))
            if c.mon.poll(int(left * 1000) + 1):
                c.drain_events()
        return c

    def _drop(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
            self._local.conn = None

    def close(self) -> None:
        self._drop()

    def _send(self, req: Request, stream: bool) -> _Conn:
        c = self._conn()
        hdr: Dict[str, Any] = dict(req.zmq_header)
        hdr["timeout_ms"] = req.timeout_ms
        if stream:
            hdr["stream"] = True
        try:
            c.sock.send_multipart([msgpack.packb(hdr, use_bin_type=True), req.body],
                                  flags=zmq.DONTWAIT)
        except zmq.Again:
            # IMMEDIATE: no connection to queue it on any more.
            self._drop()
            raise NotSent("%s: not connected" % self.url) from None
        return c

    def _recv(self, c: _Conn, deadline: float) -> List[bytes]:
        poller = zmq.Poller()
        poller.register(c.sock, zmq.POLLIN)
        poller.register(c.mon, zmq.POLLIN)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self._drop()   # a late answer must never be read as the next body's
                raise NoAnswer("%s: no answer within the deadline" % self.url)
            events = dict(poller.poll(int(left * 1000) + 1))
            if c.sock in events:
                return c.sock.recv_multipart()
            if c.mon in events:
                c.drain_events()
                if c.dead or not c.up:
                    self._drop()
                    raise Lost("%s: the connection closed before the answer" % self.url)

    def send(self, req: Request) -> bytes:
        c = self._send(req, False)
        frames = self._recv(c, time.monotonic() + req.wait_s)
        if frames and frames[0] == b"" and len(frames) > 1:
            frames = frames[1:]
        return frames[-1]

    def stream(self, req: Request, fmt: str) -> StreamEvents:
        c = self._send(req, True)
        deadline = time.monotonic() + req.wait_s
        done = False
        try:
            yield from self._stream(c, deadline)
            done = True
        finally:
            if not done:
                self._drop()   # left mid-stream: its other answers must not be read later

    def _stream(self, c: _Conn, deadline: float) -> StreamEvents:
        while True:
            frames = self._recv(c, deadline)
            if len(frames) == 1:      # an unstreamed reply (a broker that does not stream)
                yield ("whole", None, frames[0])
                return
            rh = msgpack.unpackb(frames[-2], raw=False)
            if not isinstance(rh, dict):
                raise TransportError("%s: a malformed reply header" % self.url)
            if rh.get("end") is True:
                yield ("end", None, frames[-1])
                return
            pos = rh.get("pos")
            yield ("answer", pos if isinstance(pos, int) else None, frames[-1])
