"""The worker: one ZeroMQ DEALER per broker, the sessions of PROTOCOL.md
(READY, credit, heartbeats, DISCONNECT, REJECT, drain), and the handlers.

Brokers found by name (``dns+tcp://NAME:PORT``, issue 16): each address of
NAME is a broker of its own; NAME is resolved at the start, every
resolve_ms, and when one of its brokers is lost (socket.getaddrinfo in a
short-lived thread: the I/O loop never waits on DNS). An address that
appears gets a session; one that disappears is left as a drain leaves
(DISCONNECT, its calls answered, then closed): nothing is served twice or
dropped by the worker. An answer with no address keeps the set in force.

Threads: every socket belongs to the thread that calls :meth:`Worker.run`
(the I/O thread). Sync handlers run on a thread pool, ``async def`` handlers
on an asyncio loop in a thread of its own; both hand their answers back
through a queue and a wake-up pipe, and only the I/O thread sends."""

import asyncio
import collections
import concurrent.futures
import logging
import os
import re
import signal
import socket
import threading
import time
from typing import Any, Deque, Dict, List, Optional, Tuple

import zmq

from . import dns, wire
from ..errors import JsonRpcError
from .methods import CallInfo, Method, Methods, _current

log = logging.getLogger("jrpc.worker")

RECONNECT_IVL_MS = 100
SERVICE_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")  # READY "service"
RECONNECT_IVL_MAX_MS = 1000
RECV_BATCH = 256  # messages read from one socket per loop turn


class _Name:
    """One dns+tcp:// name: its lookups."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.host, self.port = dns.parse(url)
        self.busy = False       # a lookup is running
        self.again = False      # asked for while busy: once more after it
        self.next_at = 0.0      # monotonic s of the next periodic lookup
        self.failures = 0       # lookups in a row with no address (warn at the first)


class _Conn:
    """One broker: its endpoint, its current DEALER and session."""

    def __init__(self, endpoint: str, name: Optional[_Name] = None) -> None:
        self.endpoint = endpoint
        self.name = name        # the _Name it came from, or None (given as is)
        self.sock: Any = None   # the zmq DEALER, None between sessions
        self.gen = 0            # bumped at each fresh socket: answers of older ones are dropped
        self.requests = 0       # REQUESTs received on this socket (REJECT names them)
        self.held: Dict[int, Optional[float]] = {}  # seq -> deadline (monotonic s or None): calls not answered yet
        self.hb_s = 0.0         # the session's heartbeat interval (s) and liveness
        self.liveness = 0
        self.adopted = False    # the broker's settings arrived on this socket
        self.last_sent = 0.0
        self.last_heard = 0.0
        self.last_reset = float("-inf")
        self.reset_due = False  # DISCONNECT came too soon after a reset: reset at the next tick
        self.alive = False      # heard from the broker on this socket
        self.leaving = False    # DISCONNECT sent (drain, or its address left the name): no reconnect


class Worker:
    """Serves ``methods`` (a :class:`Methods`, or None to use
    :meth:`method`) to one or more brokers.

    ``credit``: calls held at once per broker (READY); ``heartbeat_ms`` and
    ``liveness``: own settings, until a broker sends its own (it answers
    READY with them, PROTOCOL.md 5); ``name``: READY's "name"; ``service``:
    READY's "service" (``[a-z0-9][a-z0-9_-]{0,62}``: clients call its methods
    ``service.method``, docs/ARCHITECTURE.md "Services"); the methods' type
    hints go in READY's "schemas" (rpc.discover);
    ``curve_keypair``/``broker_public``: (public, secret) Z85 and the broker's
    public Z85, both or neither (keys.load_keypair / keys.load_public read
    jrpc's key files); ``threads``: the sync handlers' pool (default
    min(credit, 32)); ``drain_timeout_ms``: how long a graceful stop waits
    for the calls held; ``linger_ms``: how long closing may wait to deliver
    DISCONNECT; ``resolve_ms``: how often dns+tcp:// names are resolved
    again."""

    def __init__(self, methods: Optional[Methods] = None, *, credit: int = 64,
                 heartbeat_ms: int = 1000, liveness: int = 3, name: Optional[str] = None,
                 curve_keypair: Optional[Tuple[str, str]] = None,
                 broker_public: Optional[str] = None, threads: Optional[int] = None,
                 drain_timeout_ms: int = 30000, linger_ms: int = 1000,
                 context: Optional[zmq.Context] = None, resolve_ms: int = 5000,
                 service: Optional[str] = None) -> None:
        if not 1 <= credit <= wire.U32_MAX:
            raise ValueError("credit must be 1..2**32-1")
        if not 10 <= heartbeat_ms <= 3600000:
            raise ValueError("heartbeat_ms must be 10..3600000")
        if not 1 <= liveness <= 1000:
            raise ValueError("liveness must be 1..1000")
        if not 100 <= resolve_ms <= 3600000:
            raise ValueError("resolve_ms must be 100..3600000")
        if (curve_keypair is None) != (broker_public is None):
            raise ValueError("curve_keypair and broker_public go together")
        if service is not None and not SERVICE_RE.fullmatch(service):
            raise ValueError("service must be [a-z0-9][a-z0-9_-]{0,62}")
        self.service = service
        self.methods = methods if methods is not None else Methods()
        self.credit = credit
        self.heartbeat_ms = heartbeat_ms
        self.liveness = liveness
        self.name = name
        self.curve_keypair = curve_keypair
        self.broker_public = broker_public
        self.threads = threads or min(credit, 32)
        self.drain_timeout_ms = drain_timeout_ms
        self.linger_ms = linger_ms
        self.resolve_ms = resolve_ms
        self._ctx: Any = context
        self._own_ctx = context is None
        self._conns: List[_Conn] = []
        self._names: List[_Name] = []
        # (conn, gen, seq, packed answer) from any thread
        self._done: Deque[Tuple[_Conn, int, int, bytes]] = collections.deque()
        # (name, answer or None, error text) from lookups
        self._resolved: Deque[Tuple[_Name, Any, Optional[str]]] = collections.deque()
        self._getaddrinfo = socket.getaddrinfo  # the resolver (tests replace it)
        self._wake_r: Any = None
        self._wake_w: Any = None
        self._lock = threading.Lock()
        self._drain_asked = False
        self._stop_asked = False
        self._draining = False
        self._drain_until = 0.0
        self._running = False
        self._pool: Any = None      # concurrent.futures.ThreadPoolExecutor while running
        self._aloop: Any = None     # asyncio loop (async handlers) while running
        self._athread: Any = None
        self._io: Any = None        # the I/O thread
        self.answered = 0
        self.stats = {"calls": 0, "errors": 0, "late": 0}  # answers made (admin /metrics)
        self._stats_lock = threading.Lock()
        self._turns = 0  # loop turns (tests: no busy loop)
        self.started = threading.Event()  # set once the sockets are open (tests, embedding)

    def inflight(self) -> int:
        """Calls held now, all brokers together (any thread; approximate)."""
        return sum(len(c.held) for c in list(self._conns))

    def brokers_up(self) -> int:
        """Broker sessions that have heard from their broker."""
        return sum(1 for c in list(self._conns) if c.sock is not None and c.alive)

    def draining(self) -> bool:
        return self._draining or self._drain_asked

    # ---- configuration ----

    def method(self, name: Optional[str] = None, idempotent: bool = False,
               pass_call: bool = False) -> Any:
        """Decorator registering a handler on this worker's table (see
        :class:`Methods`)."""
        return self.methods.method(name, idempotent, pass_call)

    def connect(self, endpoint: str) -> None:
        """Adds a broker's worker endpoint; call it once per broker, before
        :meth:`run`. ZeroMQ connects (and reconnects) in the background.
        ``dns+tcp://NAME:PORT`` stands for every broker NAME resolves to
        (see the module's doc); a malformed one raises ValueError."""
        if self._running:
            raise RuntimeError("connect() before run()")
        if dns.is_name(endpoint):
            self._names.append(_Name(endpoint))
        else:
            self._conns.append(_Conn(endpoint))

    # ---- control, from any thread or a signal handler ----

    def drain(self) -> None:
        """Leaves gracefully (PROTOCOL.md 6): DISCONNECT to every broker,
        then the calls held are served and answered, and :meth:`run`
        returns once none is left (or their deadlines passed, or after
        drain_timeout_ms)."""
        self._drain_asked = True
        self._wake()

    def stop(self) -> None:
        """Leaves at once: answers ready are sent, then DISCONNECT; calls
        still running are dropped (the broker answers them -32004, or
        re-dispatches the idempotent ones)."""
        self._stop_asked = True
        self._wake()

    def _wake(self) -> None:
        w = self._wake_w
        if w is not None:
            try:
                os.write(w, b"x")
            except OSError:  # pipe full (already woken) or closed
                pass

    # ---- running ----

    def run(self, install_signals: Optional[bool] = None) -> int:
        """Serves until stopped. In the main thread (or with
        install_signals=True) SIGTERM and SIGINT start a drain, and a second
        one stops at once."""
        if not self._conns and not self._names:
            raise RuntimeError("connect() to at least one broker first")
        if len(self.methods) == 0:
            raise RuntimeError("no method registered")
        # Checks the table before anything opens (raises ValueError).
        wire.encode_ready(self.credit, self.methods.names())
        if install_signals is None:
            install_signals = threading.current_thread() is threading.main_thread()
        self._running = True
        self._io = threading.current_thread()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        if self._ctx is None:
            self._ctx = zmq.Context()
        self._pool = concurrent.futures.ThreadPoolExecutor(self.threads,
                                                           thread_name_prefix="jrpc-handler")
        if self.methods.has_async():
            self._aloop = asyncio.new_event_loop()
            self._athread = threading.Thread(target=self._aloop.run_forever,
                                             name="jrpc-asyncio", daemon=True)
            self._athread.start()
        old: Dict[int, Any] = {}
        if install_signals:
            for s in (signal.SIGTERM, signal.SIGINT):
                old[s] = signal.signal(s, self._on_signal)
            # As jrpc-worker: a closed terminal must not kill a worker.
            old[signal.SIGHUP] = signal.signal(signal.SIGHUP, self._on_hup)
        try:
            now = time.monotonic()
            for c in self._conns:
                log.info("event=connecting endpoint=%s credit=%d heartbeat_ms=%d curve=%s",
                         c.endpoint, self.credit, self.heartbeat_ms,
                         "on" if self.curve_keypair else "off")
                self._open(c, now)
            for nm in self._names:
                log.info("event=resolving name=%s resolve_ms=%d", nm.url, self.resolve_ms)
                self._resolve(nm)
            self.started.set()
            self._loop()
        finally:
            for sig, h in old.items():
                signal.signal(sig, h)
            self._shutdown()
        log.info("event=stopped calls=%d", self.answered)
        return 0

    def _on_hup(self, signum: int, frame: Any) -> None:
        log.warning("event=signal signal=HUP action=ignored")

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._drain_asked or self._draining:
            log.info("event=signal signal=%d action=stop", signum)
            self.stop()
        else:
            log.info("event=signal signal=%d action=drain", signum)
            self.drain()

    def _loop(self) -> None:
        poller = None
        socks = None
        while True:
            if self._stop_asked:
                self._flush()
                return
            if self._drain_asked and not self._draining:
                self._start_drain()
            if self._draining and self._drain_finished():
                return
            cur = [c.sock for c in self._conns if c.sock is not None]
            if poller is None or cur != socks:
                poller = zmq.Poller()
                poller.register(self._wake_r, zmq.POLLIN)
                for s in cur:
                    poller.register(s, zmq.POLLIN)
                socks = cur
            self._turns += 1
            events = dict(poller.poll(self._timeout_ms()))
            if self._wake_r in events:
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
            for c in list(self._conns):
                if c.sock is not None and c.sock in events:
                    self._read(c)
            while self._resolved:
                self._apply(*self._resolved.popleft())
            self._flush()
            self._tick(time.monotonic())

    def _timeout_ms(self) -> int:
        """Until the next heartbeat or liveness check is due."""
        now = time.monotonic()
        due = now + self.heartbeat_ms / 1000
        for c in self._conns:
            if c.sock is None:
                continue
            # A reset waits at least one own interval after the last one.
            next_reset = c.last_reset + self.heartbeat_ms / 1000
            silent = max(c.last_heard + c.hb_s * c.liveness, next_reset)
            due = min(due, c.last_sent + c.hb_s, silent)
            if c.reset_due:
                due = min(due, next_reset)
        for nm in self._names:
            due = min(due, nm.next_at)
        if self._draining:
            due = min(due, self._drain_until)
        return max(0, int((due - now) * 1000) + 1)

    # ---- sockets ----

    def _open(self, c: _Conn, now: float) -> None:
        """A fresh DEALER (a new routing id) and READY on it."""
        s = self._ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
        s.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_IVL_MAX_MS)
        s.setsockopt(zmq.LINGER, 0)
        if "[" in c.endpoint:
            s.setsockopt(zmq.IPV6, 1)  # libzmq connects to IPv6 only when told
        if self.curve_keypair:
            public, secret = self.curve_keypair
            s.curve_publickey = public.encode() if isinstance(public, str) else public
            s.curve_secretkey = secret.encode() if isinstance(secret, str) else secret
            bp = self.broker_public
            s.curve_serverkey = bp.encode() if isinstance(bp, str) else bp
        try:
            s.connect(c.endpoint)
        except zmq.ZMQError:
            s.close()  # else Context.term() would wait for it forever
            raise
        c.sock = s
        c.gen += 1
        c.requests = 0
        c.held.clear()
        c.hb_s = self.heartbeat_ms / 1000
        c.liveness = self.liveness
        c.adopted = False
        c.alive = False
        c.reset_due = False
        c.last_heard = now
        c.last_reset = now
        self._send(c, wire.encode_ready(self.credit, self.methods.names(),
                                        self.methods.idempotent(), self.name, self.service,
                                        self.methods.schemas_json()))

    def _close(self, c: _Conn, linger_ms: int = 0) -> None:
        if c.sock is not None:
            c.sock.setsockopt(zmq.LINGER, linger_ms)
            c.sock.close()
            c.sock = None
        c.held.clear()

    def _reset(self, c: _Conn, why: str, now: float) -> None:
        held = len(c.held)
        log.info("event=reconnect endpoint=%s reason=%s lost_calls=%d", c.endpoint, why, held)
        self._close(c)
        self._open(c, now)

    def _send(self, c: _Conn, msg: bytes) -> bool:
        # Tried counts as sent for the heartbeat timer: a full queue must
        # not turn the loop into a busy one.
        c.last_sent = time.monotonic()
        try:
            c.sock.send(msg, zmq.NOBLOCK)
        except zmq.Again:
            log.warning("event=send_dropped endpoint=%s bytes=%d err=\"queue full or no peer\"",
                        c.endpoint, len(msg))
            return False
        return True

    # ---- reading ----

    def _read(self, c: _Conn) -> None:
        gen = c.gen
        for _ in range(RECV_BATCH):
            if c.sock is None or c.gen != gen:
                return
            try:
                frames = c.sock.recv_multipart(zmq.NOBLOCK, copy=True)
            except zmq.Again:
                return
            if len(frames) != 1:
                log.warning("event=frame_dropped endpoint=%s frames=%d err=\"not one frame\"",
                            c.endpoint, len(frames))
                continue
            self._handle(c, frames[0])

    def _handle(self, c: _Conn, frame: bytes) -> None:
        try:
            m = wire.decode(frame)
        except wire.Rejected as e:
            # A REQUEST we cannot read still holds credit at the broker: say so.
            c.requests += 1
            if not c.reset_due:
                log.warning("event=request_rejected endpoint=%s request=%d bytes=%d err=\"%s\"",
                            c.endpoint, c.requests, len(frame), e)
                self._send(c, wire.encode_reject(c.requests))
            return
        except wire.Malformed as e:
            log.warning("event=frame_dropped endpoint=%s bytes=%d err=\"%s\"",
                        c.endpoint, len(frame), e)
            return
        now = time.monotonic()
        c.last_heard = now
        if not c.alive and m.type != wire.DISCONNECT:
            c.alive = True
            log.info("event=connected endpoint=%s credit=%d methods=%d",
                     c.endpoint, self.credit, len(self.methods))
        if m.type == wire.REQUEST:
            c.requests += 1
            if c.reset_due:
                return  # the broker told us it does not know us
            for seq in m.bad:
                log.warning("event=call_refused endpoint=%s seq=%d", c.endpoint, seq)
                c.held[seq] = None
                self._complete(c, c.gen, seq, error=wire.error_object(
                    wire.INTERNAL_ERROR, wire.MESSAGES[wire.INTERNAL_ERROR]))
            for call in m.calls:
                self._dispatch(c, call, now)
        elif m.type == wire.HEARTBEAT:
            if m.heartbeat_ms is not None:
                self._adopt(c, m.heartbeat_ms, m.liveness)
        elif m.type == wire.DISCONNECT:
            log.info("event=disconnect_received endpoint=%s", c.endpoint)
            if c.name is not None:
                self._resolve(c.name)  # leaving for good, or restarting: the name will tell
            if self._draining or c.leaving:
                log.info("event=session_closed endpoint=%s reason=disconnect lost_calls=%d",
                         c.endpoint, len(c.held))
                self._close(c)
            elif now - c.last_reset >= self.heartbeat_ms / 1000:
                self._reset(c, "disconnect", now)
            else:
                c.reset_due = True  # not in a tight loop with a broker that keeps refusing
        else:
            log.warning("event=frame_dropped endpoint=%s type=%d err=\"unexpected\"",
                        c.endpoint, m.type)

    def _adopt(self, c: _Conn, heartbeat_ms: int, liveness: int) -> None:
        hb_s = heartbeat_ms / 1000
        if c.adopted and c.hb_s == hb_s and c.liveness == liveness:
            return
        c.hb_s, c.liveness, c.adopted = hb_s, liveness, True
        level = logging.INFO if (heartbeat_ms, liveness) != (self.heartbeat_ms, self.liveness) \
            else logging.DEBUG
        log.log(level, "event=heartbeat_adopted endpoint=%s heartbeat_ms=%d liveness=%d "
                "own_heartbeat_ms=%d own_liveness=%d", c.endpoint, heartbeat_ms, liveness,
                self.heartbeat_ms, self.liveness)

    # ---- calls ----

    def _dispatch(self, c: _Conn, call: wire.Call, now: float) -> None:
        deadline = now + call.timeout_ms / 1000 if call.timeout_ms else None
        if call.seq in c.held:
            log.warning("event=seq_reused endpoint=%s seq=%d", c.endpoint, call.seq)
        c.held[call.seq] = deadline
        if len(c.held) > self.credit:
            log.warning("event=credit_exceeded endpoint=%s inflight=%d credit=%d",
                        c.endpoint, len(c.held), self.credit)
        gen = c.gen
        m = self.methods.get(call.method)
        if m is None:
            log.warning("event=unknown_method endpoint=%s seq=%d method=%.64s",
                        c.endpoint, call.seq, call.method)
            self._complete(c, gen, call.seq, error=wire.error_object(
                wire.METHOD_NOT_FOUND, wire.MESSAGES[wire.METHOD_NOT_FOUND]))
            return
        info = CallInfo(call.method, call.seq, call.traceparent, deadline)
        try:
            args, kwargs = m.bind(call.params, info)
        except JsonRpcError as e:
            self._complete(c, gen, call.seq, error=e.to_object())
            return
        if m.is_async:
            asyncio.run_coroutine_threadsafe(self._run_async(c, gen, m, args, kwargs, info),
                                             self._aloop)
        else:
            self._pool.submit(self._run_sync, c, gen, m, args, kwargs, info)

    def _late(self, c: _Conn, gen: int, info: CallInfo) -> bool:
        """A call already past its deadline is not run: the broker has
        answered the client -32003 and drops whatever comes, but the answer
        still returns the credit (PROTOCOL.md 2.2, 4)."""
        if info.deadline is not None and time.monotonic() >= info.deadline:
            log.info("event=call_skipped endpoint=%s seq=%d method=%s reason=deadline_passed",
                     c.endpoint, info.seq, info.method)
            self._complete(c, gen, info.seq, error=wire.error_object(
                wire.TIMEOUT, wire.MESSAGES[wire.TIMEOUT]))
            return True
        return False

    def _run_sync(self, c: _Conn, gen: int, m: Method, args: List[Any],
                  kwargs: Dict[str, Any], info: CallInfo) -> None:
        if self._stop_asked or self._late(c, gen, info):
            return
        token = _current.set(info)
        try:
            result = m.fn(*args, **kwargs)
        except JsonRpcError as e:
            self._complete(c, gen, info.seq, error=e.to_object())
        except Exception:
            self._failed(c, gen, info)
        else:
            self._complete(c, gen, info.seq, result=result)
        finally:
            _current.reset(token)

    async def _run_async(self, c: _Conn, gen: int, m: Method, args: List[Any],
                         kwargs: Dict[str, Any], info: CallInfo) -> None:
        if self._late(c, gen, info):
            return
        _current.set(info)  # this task's own context
        try:
            coro = m.fn(*args, **kwargs)
            if info.deadline is None:
                result = await coro
            else:
                # Abandoned at the deadline: the broker no longer waits for it.
                result = await asyncio.wait_for(coro, max(0.0, info.deadline - time.monotonic()))
        except JsonRpcError as e:
            self._complete(c, gen, info.seq, error=e.to_object())
        except asyncio.TimeoutError:
            if info.deadline is not None and time.monotonic() >= info.deadline:
                log.info("event=call_abandoned endpoint=%s seq=%d method=%s "
                         "reason=deadline_passed", c.endpoint, info.seq, info.method)
                self._complete(c, gen, info.seq, error=wire.error_object(
                    wire.TIMEOUT, wire.MESSAGES[wire.TIMEOUT]))
            else:
                self._failed(c, gen, info)
        except Exception:
            self._failed(c, gen, info)
        else:
            self._complete(c, gen, info.seq, result=result)

    def _failed(self, c: _Conn, gen: int, info: CallInfo) -> None:
        """A handler raised something else than JsonRpcError: logged with its
        traceback, answered -32603; the worker goes on."""
        log.exception("event=handler_failed method=%s seq=%d", info.method, info.seq)
        self._complete(c, gen, info.seq, error=wire.error_object(
            wire.INTERNAL_ERROR, wire.MESSAGES[wire.INTERNAL_ERROR]))

    def _complete(self, c: _Conn, gen: int, seq: int, result: Any = None,
                  error: Optional[Dict[str, Any]] = None) -> None:
        """Any thread: queues the answer for the I/O thread. A result with
        no msgpack form answers -32603 instead."""
        try:
            packed = wire.encode_answer(seq, result, error)
        except wire.NotRepresentable as e:
            log.warning("event=result_not_representable seq=%d err=\"%s\"", seq, e)
            error = wire.error_object(wire.NOT_REPRESENTABLE,
                                      wire.MESSAGES[wire.NOT_REPRESENTABLE], {"reason": str(e)})
            packed = wire.encode_answer(seq, error=error)
        except Exception as e:
            log.error("event=result_unpackable seq=%d err=\"%s: %s\"", seq, type(e).__name__, e)
            error = wire.error_object(wire.INTERNAL_ERROR, wire.MESSAGES[wire.INTERNAL_ERROR])
            packed = wire.encode_answer(seq, error=error)
        with self._stats_lock:
            self.stats["calls"] += 1
            if error is not None:
                self.stats["errors"] += 1
                if error.get("code") == wire.TIMEOUT:
                    self.stats["late"] += 1
        self._done.append((c, gen, seq, packed))
        if threading.current_thread() is not self._io:
            self._wake()

    def _flush(self) -> None:
        """Sends the answers completed since the last turn, one RESPONSE per
        broker; answers for an older socket of the broker are dropped."""
        batches: Dict[int, Tuple[_Conn, List[bytes]]] = {}
        while self._done:
            c, gen, seq, packed = self._done.popleft()
            if c.sock is None or c.gen != gen or seq not in c.held:
                continue  # that session is gone: never on the new socket
            del c.held[seq]
            batches.setdefault(id(c), (c, []))[1].append(packed)
        for c, answers in batches.values():
            if self._send(c, wire.encode_response(answers)):
                self.answered += len(answers)

    # ---- timers ----

    def _tick(self, now: float) -> None:
        for nm in self._names:
            if now >= nm.next_at:
                self._resolve(nm)
        for c in list(self._conns):
            if c.leaving and c.name is not None and not self._draining:
                if c.sock is not None and not c.held:
                    log.info("event=retired_conn_closed endpoint=%s", c.endpoint)
                    self._close(c, self.linger_ms if c.alive else 0)
                if c.sock is None:
                    self._conns.remove(c)  # answers still queued for it are dropped by _flush
                    continue
            if c.sock is None:
                continue
            if c.reset_due and now - c.last_reset >= self.heartbeat_ms / 1000:
                self._reset(c, "disconnect", now)
                continue
            if now - c.last_heard >= c.hb_s * c.liveness:
                if self._draining or c.leaving:
                    log.info("event=session_closed endpoint=%s reason=broker_silent "
                             "lost_calls=%d", c.endpoint, len(c.held))
                    self._close(c)
                    continue
                if now - c.last_reset >= self.heartbeat_ms / 1000:
                    log.warning("event=broker_silent endpoint=%s silent_ms=%d",
                                c.endpoint, int((now - c.last_heard) * 1000))
                    if c.name is not None and c.alive:
                        self._resolve(c.name)  # gone from the name, perhaps
                    self._reset(c, "broker_silent", now)
                    continue
            if now - c.last_sent >= c.hb_s:
                self._send(c, wire.encode_heartbeat())

    # ---- brokers found by name ----

    def _resolve(self, nm: _Name) -> None:
        """Starts a lookup of nm in a thread of its own (the loop never
        waits on DNS), or asks for one more after the one running."""
        nm.next_at = time.monotonic() + self.resolve_ms / 1000
        if self._draining or self._stop_asked:
            return
        if nm.busy:
            nm.again = True
            return
        nm.busy = True

        def lookup() -> None:
            try:
                answer, err = self._getaddrinfo(nm.host, None, type=socket.SOCK_STREAM), None
            except (OSError, UnicodeError) as e:
                answer, err = None, str(e)
            self._resolved.append((nm, answer, err))
            self._wake()

        threading.Thread(target=lookup, name="jrpc-resolve", daemon=True).start()

    def _apply(self, nm: _Name, answer: Any, err: Optional[str]) -> None:
        """I/O thread: makes the sessions of nm match the lookup's answer."""
        nm.busy = False
        if self._draining or self._stop_asked:
            return
        eps, truncated = dns.endpoints(answer or [], nm.port)
        if not eps:
            # More likely a DNS hiccup than every broker gone: keep the set.
            # Warned once per outage, not at every interval.
            log.log(logging.DEBUG if nm.failures else logging.WARNING,
                    "event=resolve_failed name=%s err=\"%s\" action=keep", nm.url,
                    err or "no address")
            nm.failures += 1
        else:
            if nm.failures:
                log.info("event=resolve_recovered name=%s failures=%d", nm.url, nm.failures)
            nm.failures = 0
            if truncated:
                log.warning("event=resolve_truncated name=%s kept=%d", nm.url, dns.ADDRS_MAX)
            cur = [c for c in self._conns if c.name is nm and not c.leaving]
            gone, added = dns.diff([c.endpoint for c in cur], eps)
            now = time.monotonic()
            for c in cur:
                if c.endpoint in gone:
                    self._retire(c)
            for ep in added:
                c = _Conn(ep, nm)
                log.info("event=connecting endpoint=%s name=%s credit=%d heartbeat_ms=%d curve=%s",
                         ep, nm.url, self.credit, self.heartbeat_ms,
                         "on" if self.curve_keypair else "off")
                self._conns.append(c)
                self._open(c, now)
            if gone or added:
                log.info("event=resolved name=%s addrs=%d added=%d dropped=%d", nm.url, len(eps),
                         len(added), len(gone))
        if nm.again:
            nm.again = False
            self._resolve(nm)

    def _retire(self, c: _Conn) -> None:
        """c's address left its name: c leaves as a drain leaves (PROTOCOL.md
        6), alone; _tick closes it once it holds no call."""
        log.info("event=broker_dropped endpoint=%s name=%s held=%d", c.endpoint,
                 c.name.url if c.name else "-", len(c.held))
        c.leaving = True
        if c.sock is not None:
            if c.reset_due:  # the broker does not know this session: nothing to finish
                self._close(c)
                return
            self._flush()
            self._send(c, wire.encode_disconnect())

    # ---- draining and stopping ----

    def _start_drain(self) -> None:
        self._draining = True
        self._drain_until = time.monotonic() + self.drain_timeout_ms / 1000
        self._flush()
        held = 0
        for c in self._conns:
            if c.sock is not None:
                if not c.leaving:  # a retired one sent it already
                    self._send(c, wire.encode_disconnect())
                c.leaving = True
                held += len(c.held)
        log.info("event=draining held=%d timeout_ms=%d", held, self.drain_timeout_ms)

    def _drain_finished(self) -> bool:
        now = time.monotonic()
        held = [d for c in self._conns if c.sock is not None for d in c.held.values()]
        why = None
        if not held:
            why = "done"
        elif all(d is not None and d <= now for d in held):
            why = "deadlines_passed"  # the broker answered them -32003 already
        elif now >= self._drain_until:
            why = "timeout"
        if why:
            log.info("event=drained reason=%s abandoned=%d", why, len(held))
            return True
        return False

    def _shutdown(self) -> None:
        for c in self._conns:
            if c.sock is not None:
                if not c.leaving:
                    self._send(c, wire.encode_disconnect())
                self._close(c, self.linger_ms)
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._aloop is not None:
            self._aloop.call_soon_threadsafe(self._aloop.stop)
            self._athread.join(timeout=1)
            if not self._athread.is_alive():
                self._aloop.close()
        if self._own_ctx:
            self._ctx.term()
            self._ctx = None
        w, r = self._wake_w, self._wake_r
        self._wake_w = self._wake_r = None
        os.close(w)
        os.close(r)
        self._running = False
