"""The client: ``Client`` (blocking) and ``AsyncClient`` (asyncio).

Every body is serialised once, signed per attempt (a fresh nonce each time,
docs/SIGNING.md) and sent to one of the brokers given. What happens when a
broker fails:

- the body never reached it (connection refused, no handshake, the write
  failed): it is sent to the next broker, always (it cannot have run);
- it reached it and the connection died, or no answer came by the
  deadline: it is sent again elsewhere only when that is safe -- the client
  was made with ``retry="safe"`` (every body then carries an
  ``Idempotency-Key`` the client makes, so a broker sharing the first one's
  Redis answers the first run's kept reply instead of running it again; a
  key the lost run still holds means it may have run: never run again), or
  the call was marked ``retryable=True`` by the caller. Otherwise
  ``CallMayHaveRunError`` says the call may or may not have run."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import re
import socket
import threading
import time
import uuid
from typing import (Any, AsyncIterator, Dict, Iterable, Iterator, List, Mapping, Optional,
                    Sequence, Tuple, Union)

from ._http import HttpTransport, tls_context
from ._transport import Lost, NoAnswer, NotSent, Request
from .errors import CallMayHaveRunError, JsonRpcError, TransportError
from .sign import SigningKey, load_key

Params = Union[Sequence[Any], Mapping[str, Any], None]
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\Z")
_RETRY_AFTER_S = 2.0      # a broker that failed is tried last for this long
_IDEM_MIN_S = 4.8         # a lost run's claim on its key lasts 5 s past its deadline
                          # (broker IDEM_RUN_SLACK_MS): at least 5 s from its arrival
_RESEND_MIN_MS = 100      # a resend with less time than this is not sent


def _still_running(reply: bytes) -> bool:
    """A whole-body -32008 saying the first run under the key still runs."""
    if b"-32008" not in reply:
        return False
    try:
        obj = json.loads(reply)
    except ValueError:
        return False
    return isinstance(obj, dict) and isinstance(obj.get("error"), dict) and \
        obj["error"].get("code") == -32008 and "still running" in json.dumps(obj["error"])


class Call:
    """One call of a batch: ``Call("add", [1, 2])``; ``notify=True`` for a
    notification (no id, no answer)."""

    __slots__ = ("method", "params", "notify")

    def __init__(self, method: str, params: Params = None, notify: bool = False) -> None:
        if not isinstance(method, str) or not method:
            raise ValueError("a method is a non-empty str")
        if params is not None and not isinstance(params, (list, tuple, dict, Mapping)):
            raise TypeError("params are a list, a tuple, a dict or None")
        self.method = method
        self.params = params
        self.notify = notify

    def __repr__(self) -> str:
        return "Call(%r, %r%s)" % (self.method, self.params, ", notify=True" if self.notify else "")


CallLike = Union[Call, Tuple[Any, ...], Mapping[str, Any]]


def _as_call(c: CallLike) -> Call:
    if isinstance(c, Call):
        return c
    if isinstance(c, tuple):
        return Call(*c)
    if isinstance(c, Mapping):
        return Call(c["method"], c.get("params"), bool(c.get("notify", False)))
    raise TypeError("a batch item is a Call, a (method, params) tuple or a dict")


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def _result(obj: Any) -> Any:
    if not isinstance(obj, dict) or obj.get("jsonrpc") != "2.0":
        raise TransportError("an answer that is not a JSON-RPC response: %.200r" % (obj,))
    if "error" in obj:
        raise JsonRpcError.from_object(obj["error"])
    if "result" not in obj:
        raise TransportError("a response with neither result nor error")
    return obj["result"]


class Stream(Iterator[Dict[str, Any]]):
    """The answers of a streamed body, as response objects (dicts) in the
    order they arrive. ``positions`` holds each one's position in the body
    where the transport says it (SSE ``id:``, ZeroMQ ``pos``), else None.
    When the iteration ends, ``end`` is the summary
    ``{"answered": N, "timed_out": M}``. A body refused whole raises its
    JsonRpcError from ``next()``."""

    def __init__(self, events: Iterator[Tuple[str, Optional[int], bytes]]) -> None:
        self._events = events
        self._pending: List[Dict[str, Any]] = []   # the answers of an unstreamed reply
        self.end: Optional[Dict[str, Any]] = None
        self.positions: List[Optional[int]] = []
        self._answered = 0
        self._timed_out = 0

    def __iter__(self) -> "Stream":
        return self

    def _count(self, obj: Any, pos: Optional[int]) -> None:
        self.positions.append(pos)
        self._answered += 1
        if isinstance(obj, dict) and isinstance(obj.get("error"), dict) \
                and obj["error"].get("code") == -32003:
            self._timed_out += 1

    def __next__(self) -> Dict[str, Any]:
        if self._pending:
            return self._pending.pop(0)
        if self.end is not None:
            raise StopIteration
        try:
            kind, pos, data = next(self._events)
        except StopIteration:
            raise TransportError("the stream ended without its end") from None
        except Lost as e:
            raise CallMayHaveRunError("%s: the connection died mid-stream: the calls not "
                                      "answered yet may or may not have run" % e) from None
        except NoAnswer as e:
            raise CallMayHaveRunError("%s: the calls not answered yet may or may not have run"
                                      % e) from None
        try:
            obj = json.loads(data)
        except ValueError:
            raise TransportError("a streamed answer that is not JSON: %.200r" % data) from None
        if kind == "answer":
            self._count(obj, pos)
            return obj
        if isinstance(obj, dict) and "error" in obj and obj.get("id") is None \
                and "answered" not in obj:
            # The body refused whole (unauthorized, busy, too large, ...).
            self.end = {"answered": 0, "timed_out": 0}
            raise JsonRpcError.from_object(obj["error"])
        if kind == "whole":
            # One unstreamed reply (a broker that does not stream): its answers.
            items = obj if isinstance(obj, list) else [obj]
            for o in items:
                self._count(o, None)
            self._pending = list(items)
            self.end = {"answered": self._answered, "timed_out": self._timed_out}
            return next(self)
        if not isinstance(obj, dict) or obj.get("timed_out") is None:
            obj = {"answered": self._answered, "timed_out": self._timed_out}
        self.end = obj
        raise StopIteration


def _expand(urls: Sequence[str]) -> List[str]:
    """The URLs with each ``dns+tcp://NAME:PORT`` replaced, in its place, by
    one ``tcp://ADDRESS:PORT`` per IPv4 and IPv6 address NAME resolves to
    now, each once, in the order of the C client and the workers
    (jrpc.worker.dns: sorted, at most 64). Blocks on the resolver. Raises
    ValueError for a malformed name URL or a name that resolves to no
    address."""
    out: List[str] = []
    for u in urls:
        if not isinstance(u, str) or not u.startswith("dns+"):
            out.append(u)
            continue
        from .worker import dns
        host, port = dns.parse(u)
        try:
            answer = socket.getaddrinfo(host, None, 0, socket.SOCK_STREAM)
        except (OSError, UnicodeError) as e:
            raise ValueError("%s: the name resolves to no address (%s)" % (u, e)) from None
        eps, _ = dns.endpoints(answer, port)
        if not eps:
            raise ValueError("%s: the name resolves to no address (neither IPv4 nor IPv6)" % u)
        out.extend(eps)
    return out


class Client:
    """A blocking JSON-RPC client of one or more jrpc brokers.

    ``url_or_urls``: one URL or a list, each ``tcp://HOST:PORT``,
    ``ipc://PATH`` (ZeroMQ), ``http(s)://HOST[:PORT][/PATH]`` (path /rpc by
    default), ``ws(s)://HOST[:PORT][/PATH]``, or ``dns+tcp://NAME:PORT``:
    one ``tcp://`` broker per IPv4 and IPv6 address NAME resolves to, as
    the C client and the workers take it, resolved once here (a name that
    resolves to nothing raises ValueError, as a bad URL does). ``urls`` is
    the list the client uses, names expanded in their place. Several: each
    body goes to the next in turn; one that fails is skipped for a while.

    ``key_file``: sign every body with a key from a file in the broker's key
    file format (``key_id`` picks one, else the first); or ``key_id`` and
    ``secret``. ``bearer``: send ``Authorization: Bearer TOKEN`` instead
    (HTTP and WebSocket). ``retry``: None or ``"safe"`` (module docstring).
    ``timeout_ms``: the deadline sent with every body (default 10000); the
    client waits 500 ms more. ``curve_secret``/``server_key``: CURVE key
    files (``jrpc keygen``) for tcp:// and ipc://. ``cafile``/``insecure``:
    TLS for https:// and wss://. ``traceparent``: sent with every body
    unless a call gives its own. Thread-safe: each thread has its own
    connections."""

    def __init__(self, url_or_urls: Union[str, Sequence[str]], key_file: Optional[str] = None,
                 bearer: Optional[str] = None, retry: Optional[str] = None, *,
                 key_id: Optional[str] = None, secret: Optional[str] = None,
                 timeout_ms: int = 10000, connect_timeout_ms: int = 2000,
                 curve_secret: Optional[str] = None, server_key: Optional[str] = None,
                 cafile: Optional[str] = None, insecure: bool = False,
                 traceparent: Optional[str] = None) -> None:
        urls = [url_or_urls] if isinstance(url_or_urls, str) else list(url_or_urls)
        if not urls:
            raise ValueError("give at least one broker URL")
        if retry not in (None, "safe"):
            raise ValueError("retry is None or 'safe'")
        if not 1 <= timeout_ms <= 86400000:
            raise ValueError("timeout_ms is 1 to 86400000")
        self.retry = retry
        self.timeout_ms = timeout_ms
        self.traceparent = self._check_tp(traceparent)
        self.signer: Optional[SigningKey] = None
        if key_file is not None:
            if secret is not None:
                raise ValueError("secret and key_file are exclusive")
            self.signer = load_key(key_file, key_id)
        elif key_id is not None or secret is not None:
            if key_id is None or secret is None:
                raise ValueError("a key needs both key_id and secret")
            self.signer = SigningKey(key_id, secret)
        if bearer is not None and self.signer is not None:
            raise ValueError("a bearer token or a signing key, not both")
        if (curve_secret is None) != (server_key is None):
            raise ValueError("curve_secret and server_key go together")
        curve: Optional[Tuple[str, str, str]] = None
        if curve_secret is not None and server_key is not None:
            from .keys import load_keypair, load_public
            pub, sec = load_keypair(curve_secret)
            curve = (pub, sec, load_public(server_key))
        urls = _expand(urls)      # after the other checks: a misuse costs no lookup
        self.urls: List[str] = urls
        connect_s = connect_timeout_ms / 1000.0
        ssl_ctx = None
        self._transports: List[Any] = []
        for u in urls:
            scheme = u.split("://", 1)[0] if "://" in u else ""
            if scheme in ("tcp", "ipc"):
                if bearer is not None:
                    raise ValueError("%s: there is no bearer token over ZeroMQ: sign, or use "
                                     "CURVE" % u)
                from ._zmq import ZmqTransport
                self._transports.append(ZmqTransport(u, connect_s, curve))
            elif scheme in ("http", "https"):
                if scheme == "https" and ssl_ctx is None:
                    ssl_ctx = tls_context(cafile, insecure)
                self._transports.append(HttpTransport(u, connect_s, ssl_ctx, bearer))
            elif scheme in ("ws", "wss"):
                if scheme == "wss" and ssl_ctx is None:
                    ssl_ctx = tls_context(cafile, insecure)
                from ._ws import WsTransport
                self._transports.append(WsTransport(u, connect_s, ssl_ctx, bearer, self.signer))
            else:
                raise ValueError("unknown URL scheme: %r (tcp://, ipc://, http://, https://, "
                                 "ws://, wss://, dns+tcp://)" % u)
        self._ids = itertools.count(1)
        self._next = random.randrange(len(self._transports))
        self._failed_at: Dict[int, float] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _check_tp(tp: Optional[str]) -> Optional[str]:
        if tp is not None and not _TRACEPARENT.match(tp):
            raise ValueError("a traceparent is 00-<32 hex>-<16 hex>-<2 hex>, lower-case")
        return tp

    # ---- the public calls ----

    def call(self, method: str, params: Params = None, *, timeout_ms: Optional[int] = None,
             traceparent: Optional[str] = None, idempotency_key: Optional[str] = None,
             retryable: bool = False) -> Any:
        """Calls ``method`` and returns its result; raises JsonRpcError for an
        error answer, TransportError (CallMayHaveRunError) without one."""
        c = Call(method, params)
        rid = next(self._ids)
        body = _dumps(self._request(c, rid))
        reply = self._exchange(body, [rid], timeout_ms, traceparent, idempotency_key, retryable)
        obj = self._parse(reply)
        if isinstance(obj, list):
            raise TransportError("a batch answer to a single request")
        if obj.get("id") not in (rid, None):
            raise TransportError("an answer for another id: %r" % obj.get("id"))
        return _result(obj)

    def notify(self, method: str, params: Params = None, *, timeout_ms: Optional[int] = None,
               traceparent: Optional[str] = None, retryable: bool = False) -> None:
        """Sends a notification; returns once the broker took it (an error
        object it answers instead, e.g. -32002, is raised)."""
        body = _dumps(self._request(Call(method, params, notify=True), None))
        reply = self._exchange(body, [], timeout_ms, traceparent, None, retryable)
        if reply.strip():
            obj = self._parse(reply)
            if isinstance(obj, dict) and "error" in obj:
                raise JsonRpcError.from_object(obj["error"])

    def batch(self, calls: Iterable[CallLike], *, timeout_ms: Optional[int] = None,
              traceparent: Optional[str] = None, idempotency_key: Optional[str] = None,
              retryable: bool = False) -> List[Any]:
        """Sends the calls as one batch and returns one entry per call, in
        the calls' order (answers are matched by id, whatever their order):
        the result, a JsonRpcError instance (not raised) for an error
        answer, None for a notification. A body refused whole raises its
        JsonRpcError."""
        items = [_as_call(c) for c in calls]
        if not items:
            raise ValueError("a batch needs at least one call")
        ids: List[Optional[int]] = [None if c.notify else next(self._ids) for c in items]
        body = _dumps([self._request(c, i) for c, i in zip(items, ids)])
        want = [i for i in ids if i is not None]
        reply = self._exchange(body, want, timeout_ms, traceparent, idempotency_key, retryable)
        if not want:
            if reply.strip():
                obj = self._parse(reply)
                if isinstance(obj, dict) and "error" in obj:
                    raise JsonRpcError.from_object(obj["error"])
            return [None] * len(items)
        obj = self._parse(reply)
        if isinstance(obj, dict):
            _result(obj)   # a whole-body error object: raised
            raise TransportError("a single answer to a batch")
        by_id: Dict[Any, Any] = {}
        for o in obj:
            if isinstance(o, dict) and o.get("id") in want:
                try:
                    by_id[o["id"]] = _result(o)
                except JsonRpcError as e:
                    by_id[o["id"]] = e
        out: List[Any] = []
        for i in ids:
            if i is None:
                out.append(None)
            elif i in by_id:
                out.append(by_id[i])
            else:
                raise TransportError("the answer has no response for id %d" % i)
        return out

    def stream(self, calls: Union[CallLike, Iterable[CallLike]], *, fmt: str = "sse",
               timeout_ms: Optional[int] = None, traceparent: Optional[str] = None,
               retryable: bool = False) -> Stream:
        """Sends one call or a batch with its answers streamed (SSE or
        ``fmt="ndjson"`` over HTTP, the header frame's ``stream`` over
        ZeroMQ, the ``jrpc.stream`` subprotocol over WebSocket) and returns
        a Stream: the response objects as they arrive. Not sent again after
        the first answer came; before, as ``call``."""
        if fmt not in ("sse", "ndjson"):
            raise ValueError("fmt is 'sse' or 'ndjson'")
        single = isinstance(calls, (Call, tuple, Mapping))
        items = [_as_call(calls)] if single else [_as_call(c) for c in calls]  # type: ignore
        ids = [None if c.notify else next(self._ids) for c in items]
        reqs = [self._request(c, i) for c, i in zip(items, ids)]
        body = _dumps(reqs[0] if single else reqs)
        want = [i for i in ids if i is not None]
        return Stream(self._stream_events(body, want, fmt, timeout_ms, traceparent, retryable))

    def send(self, body: bytes, *, timeout_ms: Optional[int] = None,
             traceparent: Optional[str] = None, idempotency_key: Optional[str] = None,
             retryable: bool = False) -> bytes:
        """Sends raw JSON bytes (signed as they are) and returns the raw
        answer (b"" when none: notifications only). Over WebSocket the
        answer is awaited only for bodies that carry ids."""
        ids: List[Any] = []
        try:
            obj = json.loads(body)
            for o in (obj if isinstance(obj, list) else [obj]):
                if isinstance(o, dict) and "id" in o:
                    ids.append(o["id"])
        except ValueError:
            ids = [None]
        return self._exchange(body, ids, timeout_ms, traceparent, idempotency_key, retryable)

    def close(self) -> None:
        """Closes this thread's connections."""
        for t in self._transports:
            if hasattr(t, "close"):
                t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- the machinery ----

    @staticmethod
    def _request(c: Call, rid: Optional[int]) -> Dict[str, Any]:
        r: Dict[str, Any] = {"jsonrpc": "2.0", "method": c.method}
        if c.params is not None:
            r["params"] = list(c.params) if isinstance(c.params, tuple) else c.params
        if rid is not None:
            r["id"] = rid
        return r

    @staticmethod
    def _parse(reply: bytes) -> Any:
        try:
            obj = json.loads(reply)
        except ValueError:
            raise TransportError("an answer that is not JSON: %.200r" % reply) from None
        if not isinstance(obj, (dict, list)):
            raise TransportError("an answer that is not JSON-RPC")
        return obj

    def _order(self) -> List[int]:
        """The brokers to try for one body: the next in turn first, those
        that failed lately last."""
        with self._lock:
            n = len(self._transports)
            start = self._next
            self._next = (self._next + 1) % n
            now = time.monotonic()
            order = [(start + k) % n for k in range(n)]
            fresh = [i for i in order if now - self._failed_at.get(i, -1e9) > _RETRY_AFTER_S]
            return fresh + [i for i in order if i not in fresh]

    def _mark_failed(self, i: int) -> None:
        with self._lock:
            self._failed_at[i] = time.monotonic()

    def _prepare(self, body: bytes, ids: List[Any], timeout_ms: Optional[int], deadline: float,
                 traceparent: Optional[str], idem: Optional[str]) -> Request:
        left_ms = max(1, int((deadline - time.monotonic()) * 1000) - 500)
        t = min(timeout_ms or self.timeout_ms, left_ms)
        req = Request(body=body, timeout_ms=t, wait_s=t / 1000.0 + 0.5, ids=list(ids),
                      asked_ms=timeout_ms or self.timeout_ms)
        tp = self._check_tp(traceparent) or self.traceparent
        if tp is not None:
            req.headers["traceparent"] = tp
            req.zmq_header["traceparent"] = tp
        if idem is not None:
            req.headers["Idempotency-Key"] = '"%s"' % idem
            req.zmq_header["idempotency_key"] = idem
        if self.signer is not None:
            req.headers.update(self.signer.sign(body))       # a fresh nonce per attempt
            h = req.headers
            req.zmq_header.update({"key": h["X-JRPC-Key"],
                                   "timestamp": int(h["X-JRPC-Timestamp"]),
                                   "nonce": h["X-JRPC-Nonce"], "signature": h["X-JRPC-Signature"]})
        return req

    def _exchange(self, body: bytes, ids: List[Any], timeout_ms: Optional[int],
                  traceparent: Optional[str], idem: Optional[str], retryable: bool) -> bytes:
        """Sends the body to a broker and returns its answer's bytes, by the
        rules of the module docstring.

        With an idempotency key, a body whose broker was lost is sent again
        at once to another broker, signed anew, with a deadline that ends
        before the lost run's claim on the key could (a claim lasts that
        run's deadline + 5 s, so at least 5 s from when the body first
        left): the new broker answers the kept reply, or runs the body when
        no claim was made, or finds the key still held (409 -32008 at that
        deadline). Held means the lost run may have reached a worker: it is
        never run again, CallMayHaveRunError says so. A resend whose wait
        could outlast the claim would take the key over and run the body a
        second time, so none is sent that late."""
        t = timeout_ms or self.timeout_ms
        if not 1 <= t <= 86400000:
            raise ValueError("timeout_ms is 1 to 86400000")
        if idem is None and self.retry == "safe" and not retryable:
            idem = uuid.uuid4().hex     # retryable bodies are sent again without one
        t0 = time.monotonic()
        deadline = t0 + t / 1000.0 + 0.5
        errors: List[str] = []
        lost: Optional[str] = None      # the broker that took the body and died
        for i in self._order():
            tr = self._transports[i]
            ask = t
            if lost is not None and not retryable:
                ask = min(t, int((t0 + _IDEM_MIN_S - time.monotonic()) * 1000))
                if ask < _RESEND_MIN_MS:
                    errors.append("too late to send it again before the first run's claim "
                                  "could end")
                    break
            elif time.monotonic() >= deadline:
                break
            safe = retryable or (idem is not None and tr.keyed)
            req = self._prepare(body, ids, ask, max(deadline, time.monotonic() + ask / 1000.0
                                                    + 0.5), traceparent, idem)
            try:
                reply = tr.send(req)
            except NotSent as e:
                self._mark_failed(i)
                errors.append(str(e))
                continue
            except (Lost, NoAnswer) as e:
                self._mark_failed(i)
                errors.append(str(e))
                if not safe:
                    raise CallMayHaveRunError(
                        "%s: the call may or may not have run (its broker took the body and "
                        "gave no answer; not sent again: use retry='safe' or retryable=True "
                        "where that is safe)" % e, tr.url) from None
                lost = lost or tr.url
                continue
            if lost is not None and not retryable and _still_running(reply):
                raise CallMayHaveRunError(
                    "%s: the broker took the body and died, and its run still holds the "
                    "idempotency key: the call may or may not have run (not run again)"
                    % lost, lost)
            return reply
        if lost is not None:
            raise CallMayHaveRunError("no broker answered; the call may or may not have run: "
                                      + "; ".join(errors[-6:]), lost)
        raise TransportError("no broker reached, the body was not sent: " + "; ".join(errors))

    def _stream_events(self, body: bytes, ids: List[Any], fmt: str, timeout_ms: Optional[int],
                       traceparent: Optional[str],
                       retryable: bool) -> Iterator[Tuple[str, Optional[int], bytes]]:
        t = timeout_ms or self.timeout_ms
        deadline = time.monotonic() + t / 1000.0 + 0.5
        errors: List[str] = []
        for i in self._order():
            tr = self._transports[i]
            req = self._prepare(body, ids, timeout_ms, deadline, traceparent, None)
            got_any = False
            try:
                for ev in tr.stream(req, fmt):
                    got_any = True
                    yield ev
                return
            except NotSent as e:
                self._mark_failed(i)
                errors.append(str(e))
                continue
            except (Lost, NoAnswer) as e:
                self._mark_failed(i)
                if got_any or not retryable:
                    raise
                errors.append(str(e))
                continue
        raise TransportError("no broker reached, the body was not sent: " + "; ".join(errors))


class AsyncClient:
    """The same client for asyncio: ``await client.call(...)``,
    ``await client.batch(...)``, ``async for answer in client.stream(...)``.
    Each call runs the blocking client in a thread of the loop's default
    executor (its own connections per thread), so calls made together run
    together; cancelling the awaiting task leaves the call to finish in
    its thread (its answer is dropped). ``dns+tcp://`` names are resolved
    by the constructor, which blocks on the resolver meanwhile."""

    def __init__(self, url_or_urls: Union[str, Sequence[str]], key_file: Optional[str] = None,
                 bearer: Optional[str] = None, retry: Optional[str] = None,
                 **kwargs: Any) -> None:
        self.sync = Client(url_or_urls, key_file, bearer, retry, **kwargs)

    async def call(self, method: str, params: Params = None, **kw: Any) -> Any:
        return await asyncio.to_thread(self.sync.call, method, params, **kw)

    async def notify(self, method: str, params: Params = None, **kw: Any) -> None:
        await asyncio.to_thread(self.sync.notify, method, params, **kw)

    async def batch(self, calls: Iterable[CallLike], **kw: Any) -> List[Any]:
        items = list(calls)
        return await asyncio.to_thread(self.sync.batch, items, **kw)

    async def send(self, body: bytes, **kw: Any) -> bytes:
        return await asyncio.to_thread(self.sync.send, body, **kw)

    async def stream(self, calls: Union[CallLike, Iterable[CallLike]],
                     **kw: Any) -> AsyncIterator[Dict[str, Any]]:
        if not isinstance(calls, (Call, tuple, Mapping)):
            calls = list(calls)
        # The stream's connection belongs to the thread that opened it: one
        # single-thread executor for the whole iteration.
        import concurrent.futures
        ex = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        loop = asyncio.get_running_loop()
        try:
            st = await loop.run_in_executor(ex, lambda: self.sync.stream(calls, **kw))
            sentinel = object()
            while True:
                item = await loop.run_in_executor(ex, lambda: next(st, sentinel))
                if item is sentinel:
                    break
                yield item   # type: ignore[misc]
        finally:
            ex.shutdown(wait=False)

    async def close(self) -> None:
        self.sync.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
