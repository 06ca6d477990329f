"""HTTP(S) with the standard library (http.client): one connection per
body, so that a failure is never mistaken for a stale keep-alive
connection (a retry must know whether the body could have run)."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from typing import Dict, List, Optional, Tuple
from urllib.parse import urlsplit

from ._transport import Lost, NoAnswer, NotSent, Request, StreamEvents
from .errors import TransportError


def split_url(url: str) -> Tuple[str, str, int, str]:
    """(scheme, host, port, path) of an http(s):// or ws(s):// URL; the path
    defaults to /rpc as the C client's."""
    u = urlsplit(url)
    if u.scheme not in ("http", "https", "ws", "wss") or not u.hostname:
        raise ValueError("not an http(s):// or ws(s):// URL: %r" % url)
    secure = u.scheme in ("https", "wss")
    port = u.port or (443 if secure else 80)
    path = u.path or "/rpc"
    if u.query:
        path += "?" + u.query
    return u.scheme, u.hostname, port, path


def tls_context(cafile: Optional[str], insecure: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cafile)
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class HttpTransport:
    keyed = True   # the broker takes an idempotency key per body on this transport

    def __init__(self, url: str, connect_timeout_s: float, ssl_ctx: Optional[ssl.SSLContext],
                 bearer: Optional[str]) -> None:
        self.url = url
        scheme, self.host, self.port, self.path = split_url(url)
        self.secure = scheme == "https"
        self.connect_timeout_s = connect_timeout_s
        self.ssl_ctx = ssl_ctx
        self.bearer = bearer

    def _open(self, req: Request, accept: str) -> http.client.HTTPResponse:
        conn: http.client.HTTPConnection
        if self.secure:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.connect_timeout_s,
                                               context=self.ssl_ctx)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.connect_timeout_s)
        try:
            conn.connect()
        except ssl.SSLError as e:
            conn.close()
            raise TransportError("%s: TLS: %s" % (self.url, e)) from None
        except OSError as e:
            conn.close()
            raise NotSent("%s: %s" % (self.url, e)) from None
        headers: Dict[str, str] = {"Content-Type": "application/json", "Accept": accept}
        headers.update(req.headers)
        headers["X-JRPC-Timeout-Ms"] = str(req.timeout_ms)
        if self.bearer is not None:
            headers["Authorization"] = "Bearer " + self.bearer
        try:
            conn.request("POST", self.path, body=req.body, headers=headers)
        except OSError as e:
            # Not all of the body went out: a broker never runs part of one.
            conn.close()
            raise NotSent("%s: %s" % (self.url, e)) from None
        if conn.sock is not None:
            conn.sock.settimeout(max(req.wait_s, 0.001))
        try:
            return conn.getresponse()
        except (socket.timeout, TimeoutError):
            conn.close()
            raise NoAnswer("%s: no answer within %d ms" % (self.url, req.wait_s * 1000)) from None
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise Lost("%s: %s" % (self.url, e or type(e).__name__)) from None

    def send(self, req: Request) -> bytes:
        """The answer's bytes (b"" for 204: notifications only)."""
        resp = self._open(req, "application/json")
        try:
            data = resp.read()
        except (socket.timeout, TimeoutError):
            raise NoAnswer("%s: the answer stopped coming" % self.url) from None
        except (OSError, http.client.HTTPException) as e:
            raise Lost("%s: %s" % (self.url, e or type(e).__name__)) from None
        finally:
            resp.close()
        if resp.status == 204:
            return b""
        ctype = resp.getheader("Content-Type", "")
        if not ctype.startswith("application/json"):
            raise TransportError("%s: HTTP %d without a JSON-RPC answer" % (self.url, resp.status))
        return data

    def stream(self, req: Request, fmt: str) -> StreamEvents:
        accept = "text/event-stream" if fmt == "sse" else "application/x-ndjson"
        resp = self._open(req, accept)
        ctype = resp.getheader("Content-Type", "")
        deadline = time.monotonic() + req.wait_s
        try:
            if not ctype.startswith(("text/event-stream", "application/x-ndjson",
                                     "application/jsonl")):
                # Refused whole (401, 413, 503, ...) or a broker that does not stream.
                data = resp.read()
                if resp.status == 204:
                    yield ("end", None, b'{"answered":0,"timed_out":0}')
                    return
                if not ctype.startswith("application/json"):
                    raise TransportError("%s: HTTP %d without a JSON-RPC answer"
                                         % (self.url, resp.status))
                yield ("whole", None, data)
                return
            if ctype.startswith("text/event-stream"):
                yield from self._sse(resp, deadline)
            else:
                yield from self._ndjson(resp, deadline)
        finally:
            resp.close()

    def _line(self, resp: http.client.HTTPResponse, deadline: float) -> bytes:
        try:
            return resp.readline()
        except (socket.timeout, TimeoutError):
            raise NoAnswer("%s: the stream stopped before its end" % self.url) from None
        except (OSError, http.client.HTTPException) as e:
            raise Lost("%s: %s" % (self.url, e or type(e).__name__)) from None

    def _sse(self, resp: http.client.HTTPResponse, deadline: float) -> StreamEvents:
        event: str = ""
        pos: Optional[int] = None
        data: List[bytes] = []
        while True:
            line = self._line(resp, deadline)
            if not line:
                raise Lost("%s: the stream ended without its end event" % self.url)
            line = line.rstrip(b"\r\n")
            if line == b"":
                if data:
                    payload = b"\n".join(data)
                    if event == "end":
                        yield ("end", None, payload)
                        return
                    yield ("answer", pos, payload)
                event, pos, data = "", None, []
                continue
            if line.startswith(b":"):
                continue            # a ping comment
            name, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                data.append(value)
            elif name == b"event":
                event = value.decode("utf-8", "replace")
            elif name == b"id":
                pos = int(value) if value.isdigit() else None

    def _ndjson(self, resp: http.client.HTTPResponse, deadline: float) -> StreamEvents:
        n = 0
        while True:
            line = self._line(resp, deadline)
            if not line:
                # The chunked body ended: http.client drops the trailers, so the
                # summary is counted here (answers seen, -32003s among them).
                yield ("end", None, json.dumps({"answered": n, "timed_out": None}).encode())
                return
            line = line.strip()
            if line:
                n += 1
                yield ("answer", None, line)
