"""An example Python worker for jrpc.

    python -m jrpc.worker \
        --connect tcp://127.0.0.1:5556 worker/python/examples/example_worker.py

or run this file directly (it takes the endpoints as arguments)."""

import asyncio
import decimal
import os
import sys
import time


from jrpc.worker import InvalidParams, JsonRpcError, Methods, current_call  # noqa: E402

methods = Methods()


@methods.method("py.mul", idempotent=True)
def mul(a, b):
    """[a, b] or {"a": .., "b": ..}: a * b (numbers only)."""
    for v in (a, b):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise InvalidParams()
    return a * b


@methods.method("py.concat", idempotent=True)
def concat(*parts):
    """["x", "y", ...]: the strs joined."""
    if not all(isinstance(p, str) for p in parts):
        raise InvalidParams()
    return "".join(parts)


@methods.method("py.fail")
def fail(code=4001, message="Insufficient funds", data=None):
    """Answers the error object it is given (an application error)."""
    raise JsonRpcError(code, message, data)


@methods.method("py.crash")
def crash():
    """A bug: any exception other than JsonRpcError answers -32603."""
    return 1 / 0


@methods.method("py.trace")
def trace():
    """The W3C traceparent the client sent (null when none)."""
    return current_call().traceparent


@methods.method("py.depth", idempotent=True)
def depth(*params):
    """How deep the params nest, counting the params array itself: [[[]]] is 3."""
    d, level = 0, [list(params)]
    while level:
        d += 1
        level = [v for x in level for v in (x.values() if isinstance(x, dict) else x)
                 if isinstance(v, (list, dict))]
    return d


@methods.method("py.sleep", idempotent=True)
async def sleep(ms):
    """{"ms": N}: answers N after N ms, on asyncio (abandoned at the deadline)."""
    await asyncio.sleep(ms / 1000)
    return ms


@methods.method("py.number", idempotent=True)
def number(kind):
    """{"kind": K}: a number Python holds and JSON-RPC through the broker may
    not (the README's rule): "big" 2**70 (served as the double 1.1805916207174113e21),
    "u64" 2**64-1 (exact), "decimal" Decimal("2.5") (2.5), "decimal_int"
    Decimal("12") (12), "huge" 10**400 and "nan" Decimal("NaN") (-32010)."""
    values = {"big": lambda: 2 ** 70, "u64": lambda: 2 ** 64 - 1,
              "decimal": lambda: decimal.Decimal("2.5"), "decimal_int": lambda: decimal.Decimal("12"),
              "huge": lambda: 10 ** 400, "nan": lambda: decimal.Decimal("NaN")}
    if kind not in values:
        raise InvalidParams()
    return {"value": values[kind]()}


@methods.method("py.block")
def block(ms):
    """{"ms": N}: blocks a pool thread for N ms, answers {"ms": N, "pid": ...}.
    Not idempotent: a lost call of it is answered -32004."""
    time.sleep(ms / 1000)
    return {"ms": ms, "pid": os.getpid()}


if __name__ == "__main__":
    from jrpc.worker import Worker
    from jrpc.worker.log import setup
    setup("info", "kv", "example_worker")
    w = Worker(methods, credit=16)
    for ep in sys.argv[1:] or ["tcp://127.0.0.1:5556"]:
        w.connect(ep)
    sys.exit(w.run())
