"""The checks of tests/e2e/py_client.sh, run with the installed package's
python. argv[1] names the phase; the brokers' addresses come in the
environment. Prints one line per check, "CHECK<TAB>name<TAB>expected<TAB>actual",
which the shell counts with check()."""

import asyncio
import json
import os
import sys
import time

import jrpc
from jrpc import Call, CallMayHaveRunError, Client, JsonRpcError, TransportError

E = os.environ
TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def check(name, expected, actual):
    print("CHECK\t%s\t%s\t%s" % (name, json.dumps(expected), json.dumps(actual, default=repr)),
          flush=True)


def err(fn):
    """(class name, code) of what fn raises, or ("none", result)."""
    try:
        return ["none", fn()]
    except JsonRpcError as e:
        return ["JsonRpcError", e.code]
    except CallMayHaveRunError:
        return ["CallMayHaveRunError", None]
    except TransportError:
        return ["TransportError", None]


def common(u, c, tag):
    check("%s: call returns the result" % tag, 3, c.call("add", [1, 2]))
    check("%s: named params" % tag, 7, c.call("subtract", {"minuend": 10, "subtrahend": 3}))
    check("%s: a JSON-RPC error is one exception with code, message, data" % tag,
          [-32602, "Invalid params"], _cmd(c, "add", [1]))
    check("%s: an application error keeps its data" % tag,
          [4001, "Insufficient funds", {"balance": 3}],
          _cmd(c, "py.fail", {"code": 4001, "message": "Insufficient funds", "data": {"balance": 3}}))
    # A batch: answers matched by id whatever their order (sleep 300 first).
    res = c.batch([("sleep", {"ms": 300}), ("add", [2, 2]), Call("update", [1], notify=True),
                   ("nosuch",), {"method": "get_data"}])
    check("%s: batch: results in the calls' order, errors as values, None for a notification"
          % tag, [300, 4, None, ["JsonRpcError", -32601], ["hello", 5]],
          [res[0], res[1], res[2], [type(res[3]).__name__, getattr(res[3], "code", None)], res[4]])
    check("%s: notify returns None" % tag, None, c.notify("update", [1]))
    check("%s: a batch of notifications only" % tag, [None, None],
          c.batch([Call("update", notify=True), Call("update", notify=True)]))
    # Deadlines: sent to the broker, which answers -32003 at them.
    t = time.monotonic()
    got = err(lambda: c.call("sleep", {"ms": 3000}, timeout_ms=300))
    check("%s: timeout_ms reaches the broker: -32003 at the deadline" % tag,
          ["JsonRpcError", -32003, True], got + [time.monotonic() - t < 2.5])
    r = c.batch([("sleep", {"ms": 50}), ("sleep", {"ms": 3000})], timeout_ms=400)
    check("%s: a batch past its deadline: what is done, -32003 for the rest" % tag,
          [50, -32003], [r[0], getattr(r[1], "code", None)])
    # Streams: answers in the order they arrive, positions, the end.
    st = c.stream([("sleep", {"ms": 400}), ("sleep", {"ms": 10}), ("nosuch",),
                   Call("update", notify=True)])
    first = next(st)
    rest = list(st)
    got_order = [first.get("result", first.get("error", {}).get("code"))] + \
        [a.get("result", a.get("error", {}).get("code")) for a in rest]
    check("%s: stream: in arrival order (broker's own answer, then 10 ms, then 400 ms)" % tag,
          [-32601, 10, 400], got_order)
    check("%s: stream: the end" % tag, {"answered": 3, "timed_out": 0}, st.end)
    if u.startswith("http"):
        check("%s: stream positions (SSE id:)" % tag, [2, 1, 0], st.positions)
        st = c.stream([("sleep", {"ms": 200}), ("sleep", {"ms": 10})], fmt="ndjson")
        check("%s: NDJSON stream in arrival order" % tag, [10, 200], [a["result"] for a in st])
    if u.startswith("tcp") or u.startswith("ipc"):
        check("%s: stream positions (ZeroMQ pos)" % tag, [2, 1, 0], st.positions)
    st = c.stream([("sleep", {"ms": 50}), ("sleep", {"ms": 3000})], timeout_ms=400)
    codes = [a.get("result", a.get("error", {}).get("code")) for a in st]
    check("%s: stream past its deadline: -32003 last, counted in the end" % tag,
          [[50, -32003], 1], [codes, st.end["timed_out"]])
    # traceparent passthrough, per call and per client.
    if u.startswith("ws"):
        # The broker's WebSocket front takes no traceparent (docs/WEBSOCKET.md).
        try:
            c.call("py.trace", traceparent=TP)
            check("%s: a traceparent over WebSocket is refused, not dropped" % tag, "ValueError", "none")
        except ValueError:
            check("%s: a traceparent over WebSocket is refused, not dropped" % tag, "ValueError",
                  "ValueError")
    else:
        check("%s: traceparent reaches the worker" % tag, TP, c.call("py.trace", traceparent=TP))
        check("%s: the client's traceparent reaches the worker" % tag, TP,
              Client(u, traceparent=TP, **KW).call("py.trace"))
    # asyncio: ten calls of 300 ms together take about one.
    async def many():
        ac = jrpc.AsyncClient(u, **KW)
        t = time.monotonic()
        r = await asyncio.gather(*[ac.call("sleep", {"ms": 300}) for _ in range(10)])
        b = await ac.batch([("add", [1, 1]), ("add", [2, 2])])
        s = [a["result"] async for a in ac.stream([("sleep", {"ms": 200}), ("sleep", {"ms": 1})])]
        return r, time.monotonic() - t < 2.5, b, s
    r, fast, b, s = asyncio.run(many())
    check("%s: AsyncClient: calls run together, batch, stream" % tag,
          [[300] * 10, True, [2, 4], [1, 200]], [r, fast, b, s])
    check("%s: the numbers rule: 2**70 as a double, 2**64-1 exact, Decimal 2.5, Decimal 12"
          % tag, [1.1805916207174113e21, 18446744073709551615, 2.5, 12],
          [c.call("py.number", {"kind": k})["value"] for k in ("big", "u64", "decimal",
                                                               "decimal_int")])
    check("%s: ... 10**400 and Decimal NaN: -32010, not -32603" % tag, [-32010, -32010],
          [_cmd(c, "py.number", {"kind": "huge"})[0], _cmd(c, "py.number", {"kind": "nan"})[0]])


def _cmd(c, m, p):
    try:
        c.call(m, p)
        return None
    except JsonRpcError as e:
        return [e.code, e.message] + ([e.data] if e.has_data else [])


KW = {}


def phase_signed():
    global KW
    keys = E["KEYS"]
    for u in (E["ZMQ"], E["HTTP"], E["WS"]):
        tag = "signed " + u.split(":")[0]
        KW = {"key_file": keys}
        c = Client(u, **KW)
        common(u, c, tag)
        check("%s: unsigned: -32002 with the reason in data" % tag,
              [-32002, "Unauthorized", "request is not signed"],
              (lambda r: [r[0], r[1], r[2]["reason"][:21]])(_cmd(Client(u), "add", [1, 2])))
        check("%s: a wrong secret: -32002 signature does not match" % tag, "signature does not match",
              _cmd(Client(u, key_id="demo", secret="not-the-right-secret"), "add", [1, 2])[2]["reason"])
        lim = Client(u, key_file=keys, key_id="limited")
        r = lim.batch([("add", [1, 2]), ("get_data",)])
        check("%s: the key's ACL: -32002 in its call's slot only" % tag, [3, -32002],
              [r[0], getattr(r[1], "code", None)])
        # A fresh nonce per body: the same call many times is never a replay.
        check("%s: 20 calls in a row, each signed anew (no -32005)" % tag, [5] * 20,
              [c.call("add", [2, 3]) for _ in range(20)])
    for u in (E["HTTP"], E["WS"]):
        tag = "bearer " + u.split(":")[0]
        KW = {"bearer": E["BEARER"]}
        c = Client(u, **KW)
        check("%s: a bearer key's call" % tag, 3, c.call("add", [1, 2]))
        check("%s: a stream under a bearer key" % tag, [1, 50],
              [a["result"] for a in c.stream([("sleep", {"ms": 50}), ("sleep", {"ms": 1})])])
        check("%s: an unknown token: -32002" % tag, "unknown bearer token",
              _cmd(Client(u, bearer="not-a-token"), "add", [1, 2])[2]["reason"])
    # Idempotency keys: the same bytes under the same key run once (count is
    # the C worker's call counter: an effect).
    for u in (E["ZMQ"], E["HTTP"]):
        tag = "idempotency " + u.split(":")[0]
        c = Client(u, key_file=keys)
        body = b'{"jsonrpc":"2.0","method":"count","id":1}'
        k = "py-%s-%d" % (u.split(":")[0], os.getpid())
        a = c.send(body, idempotency_key=k)
        b = c.send(body, idempotency_key=k)
        n1 = c.call("count")
        n2 = c.call("count")
        check("%s: sent twice under one key: the same reply, ran once" % tag, [a.decode(), 1], [b.decode(), n2 - n1])
        s = Client(u, key_file=keys, retry="safe")
        x, y = s.call("count"), s.call("count")
        check("%s: retry='safe' adds a new key per call: both run" % tag, 1, y - x)
    # dns+tcp://NAME:PORT: a tcp:// broker per address of NAME (resolved
    # once, here), the same broker as E["ZMQ"] through the name localhost.
    c = Client("dns+tcp://localhost:%s" % E["ZMQ"].rsplit(":", 1)[1], key_file=keys)
    check("dns+tcp://localhost: the broker among the names' brokers, every call answered",
          [True, [3] * 4], [E["ZMQ"] in c.urls, [c.call("add", [1, 2]) for _ in range(4)]])
    try:
        Client(E["ZMQ"], bearer="x")
        check("a bearer token over ZeroMQ is refused at once", "ValueError", "none")
    except ValueError:
        check("a bearer token over ZeroMQ is refused at once", "ValueError", "ValueError")


def phase_curve():
    u = E["ZMQ"]
    c = Client(u, curve_secret=E["CURVE_CLIENT"], server_key=E["CURVE_BROKER"])
    check("CURVE tcp: a call", 3, c.call("add", [1, 2]))
    check("CURVE tcp: a stream", [1, 100],
          [a["result"] for a in c.stream([("sleep", {"ms": 100}), ("sleep", {"ms": 1})])])
    bad = Client(u, curve_secret=E["CURVE_OTHER"], server_key=E["CURVE_BROKER"],
                 connect_timeout_ms=500)
    check("CURVE tcp: a key the broker does not list: TransportError (not sent, did not run)",
          "TransportError", err(lambda: bad.call("add", [1, 2]))[0])
    plain = Client(u, connect_timeout_ms=500)
    check("CURVE tcp: a client without CURVE: TransportError", "TransportError",
          err(lambda: plain.call("add", [1, 2]))[0])


def phase_open():
    global KW
    for u in (E["IPC"], E["HTTPS"], E["WSS"]):
        tag = "open " + u.split(":")[0]
        KW = {"cafile": E["CA"]} if u.startswith(("https", "wss")) else {}
        common(u, Client(u, **KW), tag)
    check("https: a certificate not trusted: TransportError", "TransportError",
          err(lambda: Client(E["HTTPS"]).call("add", [1, 2]))[0])
    check("https with insecure=True", 3, Client(E["HTTPS"], insecure=True).call("add", [1, 2]))
    # Several URLs, one of them down: the body goes to one that is up, always
    # (it never reached the one down: it did not run).
    c = Client([E["DOWN"], E["IPC"], "http://127.0.0.1:1/rpc"])
    check("several URLs, two down: every call answered", [3] * 10,
          [c.call("add", [1, 2]) for _ in range(10)])
    check("every URL down: TransportError, and not CallMayHaveRunError", "TransportError",
          err(lambda: Client([E["DOWN"], "http://127.0.0.1:1/rpc"]).call("add", [1, 2]))[0])


{"signed": phase_signed, "curve": phase_curve, "open": phase_open}[sys.argv[1]]()
