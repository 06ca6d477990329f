"""``--admin HOST:PORT``: /metrics (Prometheus text), /healthz, /readyz,
as the admin listener of jrpc-broker and jrpc-stdio (docs/METRICS.md). The
metric names follow jrpc-stdio's (``jrpc_stdio_calls_total`` ...) with this
program's prefix, ``jrpc_pyworker_``."""

from __future__ import annotations

import http.server
import logging
import socket
import threading
from typing import Any, Tuple

from .._version import __version__

log = logging.getLogger("jrpc.admin")


def metrics_text(w: Any) -> str:
    with w._stats_lock:
        s = dict(w.stats)
    out = []

    def one(name: str, kind: str, help_: str, value: Any) -> None:
        out.append("# HELP %s %s\n# TYPE %s %s\n%s %s\n" % (name, help_, name, kind, name, value))

    one("jrpc_pyworker_info", "gauge", "The worker's version.", "1")
    out[-1] = out[-1].replace("jrpc_pyworker_info 1", 'jrpc_pyworker_info{version="%s"} 1'
                              % __version__)
    one("jrpc_pyworker_brokers_connected", "gauge",
        "Broker sessions that have heard from their broker.", w.brokers_up())
    one("jrpc_pyworker_inflight", "gauge", "Calls held, all brokers together.", w.inflight())
    one("jrpc_pyworker_calls_total", "counter", "Answers given (errors and notifications too).",
        s["calls"])
    one("jrpc_pyworker_call_errors_total", "counter", "Answers that were error objects.",
        s["errors"])
    one("jrpc_pyworker_calls_late_total", "counter",
        "Calls answered -32003 at their deadline.", s["late"])
    one("jrpc_pyworker_draining", "gauge", "1 once a graceful stop began.",
        1 if w.draining() else 0)
    return "".join(out)


class _Handler(http.server.BaseHTTPRequestHandler):
    worker: Any = None
    server_version = "jrpc-py-worker"

    def do_GET(self) -> None:   # noqa: N802 (http.server's name)
        w = self.worker
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, metrics_text(w), "text/plain; version=0.0.4")
        elif path == "/healthz":
            self._send(200, "ok\n")
        elif path == "/readyz":
            if w.draining():
                self._send(503, "not ready: draining\n")
            elif w.brokers_up() == 0:
                self._send(503, "not ready: no broker connected\n")
            else:
                self._send(200, "ready\n")
        else:
            self._send(404, "not found\n")

    def _send(self, status: int, body: str, ctype: str = "text/plain") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:   # noqa: A002
        pass


class _Server6(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6


def split_hostport(v: str) -> Tuple[str, int]:
    host, _, port = v.rpartition(":")
    return host.strip("[]"), int(port)


def start(listen: str, worker: Any) -> http.server.ThreadingHTTPServer:
    """Serves the admin endpoints in a daemon thread; raises OSError when
    the address cannot be bound."""
    host, port = split_hostport(listen)
    handler = type("AdminHandler", (_Handler,), {"worker": worker})
    server_cls = _Server6 if ":" in host else http.server.ThreadingHTTPServer   # [V6]:PORT
    srv = server_cls((host, port), handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, name="jrpc-admin", daemon=True)
    t.start()
    log.info("event=listening address=%s:%d", host, srv.server_address[1])
    return srv
