"""The table of methods a worker serves, and how a call reaches a handler."""

from __future__ import annotations


import contextvars
import inspect
import json
import time
import typing
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, TypeVar, Union

from . import wire
from ..errors import InvalidParams, JsonRpcError

F = TypeVar("F", bound=Callable[..., Any])


class CallInfo:
    """What a handler may want to know about the call it serves: the method,
    the W3C ``traceparent`` the client sent (None when absent), and the
    ``deadline`` (time.monotonic() seconds after which the broker no longer
    waits; None when it set none)."""
    __slots__ = ("method", "seq", "traceparent", "deadline")

    def __init__(self, method: str, seq: int, traceparent: Optional[str],
                 deadline: Optional[float]) -> None:
        self.method = method
        self.seq = seq
        self.traceparent = traceparent
        self.deadline = deadline

    def remaining(self) -> Optional[float]:
        """Seconds left before the deadline (None: no deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def __repr__(self) -> str:
        return "CallInfo(method=%r, traceparent=%r)" % (self.method, self.traceparent)


_current: "contextvars.ContextVar[Optional[CallInfo]]" = contextvars.ContextVar(
    "jrpc_call", default=None)


def current_call() -> Optional[CallInfo]:
    """The CallInfo of the call the calling handler serves (sync or async);
    None outside a handler."""
    return _current.get()


class Method:
    __slots__ = ("name", "fn", "idempotent", "is_async", "pass_call", "signature")

    def __init__(self, name: str, fn: Callable[..., Any], idempotent: bool,
                 pass_call: bool) -> None:
        self.name = name
        self.fn = fn
        self.idempotent = idempotent
        self.pass_call = pass_call
        self.is_async = inspect.iscoroutinefunction(fn)
        try:
            self.signature: Optional[inspect.Signature] = inspect.signature(fn)
        except (TypeError, ValueError):  # some builtins have none
            self.signature = None

    def bind(self, params: Any, info: CallInfo) -> Tuple[List[Any], Dict[str, Any]]:
        """(args, kwargs) for params (nil: none, array: positional, map:
        named); raises InvalidParams when the handler's signature does not
        take them, as the C worker answers -32602 for wrong params."""
        args: List[Any] = [info] if self.pass_call else []
        kwargs: Dict[str, Any] = {}
        if isinstance(params, list):
            args.extend(params)
        elif isinstance(params, dict):
            kwargs = params
        if self.signature is not None:
            try:
                self.signature.bind(*args, **kwargs)
            except TypeError:
                raise InvalidParams() from None
        return args, kwargs


class Methods:
    """A table of methods::

        methods = Methods()

        @methods.method(idempotent=True)
        def add(a, b):
            return a + b

        @methods.method("slow.echo")
        async def slow_echo(value, ms=0):
            await asyncio.sleep(ms / 1000)
            return value

    A handler takes the call's params as arguments (an array positionally, a
    map by name, none when absent) and returns the result (any value msgpack
    packs: None, bool, int, float, str, list, dict with str keys). Params
    that do not fit its signature answer -32602 without running it.
    ``idempotent=True`` lets the broker re-run the call elsewhere when this
    worker is lost mid-call (PROTOCOL.md 2.1): only for methods where twice
    is the same as once. ``pass_call=True`` passes the CallInfo first."""

    def __init__(self) -> None:
        self._methods: Dict[str, Method] = {}

    def add(self, name: str, fn: F, idempotent: bool = False, pass_call: bool = False) -> F:
        if not isinstance(name, str) or not name:
            raise ValueError("a method name is a non-empty str")
        if name in self._methods:
            raise ValueError("method %r registered twice" % name)
        if not callable(fn):
            raise TypeError("fn must be callable")
        self._methods[name] = Method(name, fn, bool(idempotent), bool(pass_call))
        return fn

    def method(self, name: Union[str, Callable[..., Any], None] = None, idempotent: bool = False,
               pass_call: bool = False) -> Any:
        """Decorator: ``@methods.method()``, ``@methods.method("name")``;
        also bare ``@methods.method``."""
        if callable(name):  # bare decorator
            return self.add(name.__name__, name)
        label = name

        def deco(fn: F) -> F:
            return self.add(label or fn.__name__, fn, idempotent, pass_call)
        return deco

    def get(self, name: str) -> Optional[Method]:
        return self._methods.get(name)

    def names(self) -> List[str]:
        return list(self._methods)

    def idempotent(self) -> List[str]:
        return [m.name for m in self._methods.values() if m.idempotent]

    def schemas(self) -> Dict[str, Dict[str, Any]]:
        """READY's "schemas" (PROTOCOL.md 2.1, for rpc.discover): for each
        method with type hints, its params as OpenRPC content descriptors and
        its result, from the hints (int, float, str, bool, list, dict,
        Optional and their List[...]/Dict[...] forms; anything else: any)."""
        out: Dict[str, Dict[str, Any]] = {}
        for m in self._methods.values():
            sch = _method_schema(m)
            if sch is not None:
                out[m.name] = sch
        return out

    def schemas_json(self) -> Optional[str]:
        """schemas() as compact JSON text, or None when no method has hints
        or the text would pass the broker's limit (64 KiB)."""
        sch = self.schemas()
        if not sch:
            return None
        text = json.dumps(sch, separators=(",", ":"), sort_keys=True)
        return text if len(text.encode()) <= wire.SCHEMAS_MAX else None

    def has_async(self) -> bool:
        return any(m.is_async for m in self._methods.values())

    def __len__(self) -> int:
        return len(self._methods)

    @classmethod
    def from_dict(cls, table: Mapping[str, Any]) -> "Methods":
        """From ``{name: fn}``; idempotent methods with ``{name: (fn, True)}``."""
        m = cls()
        for name, v in table.items():
            if isinstance(v, tuple):
                m.add(name, v[0], idempotent=v[1])
            else:
                m.add(name, v)
        return m


_NoneType = type(None)
_SIMPLE = {int: "integer", float: "number", str: "string", bool: "boolean", list: "array",
           dict: "object"}


def _type_schema(t: Any) -> Dict[str, Any]:
    """The JSON Schema of a type hint (the ones a JSON value can be)."""
    if t is _NoneType or t is None:
        return {"type": "null"}
    if t in _SIMPLE:
        return {"type": _SIMPLE[t]}
    origin = typing.get_origin(t)
    args = typing.get_args(t)
    if origin is Union:
        rest = [a for a in args if a is not _NoneType]
        inner = [_type_schema(a) for a in rest]
        if len(rest) < len(args):
            inner.append({"type": "null"})
        return inner[0] if len(inner) == 1 else {"oneOf": inner}
    if origin in (list, tuple, set, frozenset) or origin is typing.Sequence:
        sch: Dict[str, Any] = {"type": "array"}
        if origin is list and len(args) == 1:
            sch["items"] = _type_schema(args[0])
        return sch
    if origin is dict or origin is typing.Mapping:
        sch = {"type": "object"}
        if len(args) == 2:
            sch["additionalProperties"] = _type_schema(args[1])
        return sch
    return {}


def _method_schema(m: Method) -> Optional[Dict[str, Any]]:
    """{"params": [content descriptors], "result": content descriptor} from
    m's type hints; None when it has none (or no signature)."""
    if m.signature is None:
        return None
    try:
        hints = typing.get_type_hints(m.fn)
    except Exception:  # unresolvable forward references: no schema
        return None
    if not hints:
        return None
    params: List[Dict[str, Any]] = []
    ps = list(m.signature.parameters.values())
    if m.pass_call and ps:
        ps = ps[1:]
    for p in ps:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        d: Dict[str, Any] = {"name": p.name,
                             "schema": _type_schema(hints[p.name]) if p.name in hints else {}}
        if p.default is p.empty:
            d["required"] = True
        params.append(d)
    out: Dict[str, Any] = {"params": params}
    if "return" in hints:
        out["result"] = {"name": "result", "schema": _type_schema(hints["return"])}
    return out
