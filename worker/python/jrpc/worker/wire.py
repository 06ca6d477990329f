"""The jrpc wire protocol, version 1 (proto/PROTOCOL.md): bytes in, values
out. Nothing here touches a socket; session.py does the I/O.

Every message is one msgpack array ``[version, type, ...fields]`` in one
ZeroMQ frame. Decoding never guesses: a message is either a value of one of
the classes below or a :class:`Malformed` raised with the reason."""

from __future__ import annotations

import decimal
import math
import re
import struct
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import msgpack

VERSION = 1
READY, REQUEST, RESPONSE, HEARTBEAT, DISCONNECT, REJECT = 1, 2, 3, 4, 5, 6

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1

# JSON-RPC error codes (proto/jrpc_errors.h).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_BUSY = -32000
TIMEOUT = -32003
WORKER_FAILED = -32004
NOT_REPRESENTABLE = -32010

MESSAGES = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
    SERVER_BUSY: "Server busy",
    TIMEOUT: "Request timeout",
    NOT_REPRESENTABLE: "Result not representable",
    WORKER_FAILED: "Worker failed",
}


class Malformed(ValueError):
    """A message that breaks a rule of PROTOCOL.md section 2 (dropped)."""


class UnsupportedVersion(Malformed):
    """A message whose version is an integer other than 1 (dropped)."""


class Rejected(Malformed):
    """A REQUEST that must be answered with REJECT (PROTOCOL.md 2.5)."""


def _is_uint(v: Any, hi: int = U64_MAX, lo: int = 0) -> bool:
    # bool is an int subclass in Python; msgpack true/false are not integers.
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


# ---- encoding (worker -> broker) ----

def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def encode_ready(credit: int, methods: Sequence[str], idempotent: Iterable[str] = (),
                 name: Optional[str] = None, service: Optional[str] = None,
                 schemas: Optional[str] = None) -> bytes:
    """READY ``[1, 1, credit, methods, options?]``; options only when there
    is something to say (without, the bytes are those of an older worker)."""
    if not _is_uint(credit, U32_MAX, 1):
        raise ValueError("credit must be 1..2**32-1")
    methods = list(methods)
    if not methods or not all(isinstance(m, str) and m for m in methods):
        raise ValueError("methods must be at least one non-empty str")
    msg: List[Any] = [VERSION, READY, credit, methods]
    options: Dict[str, Any] = {}
    if name is not None:
        options["name"] = name
    idem = [m for m in methods if m in set(idempotent)]
    if idem:
        options["idempotent"] = idem
    if service is not None:
        options["service"] = service
    if schemas is not None:
        options["schemas"] = schemas
    if options:
        msg.append(options)
    return _pack(msg)


def encode_heartbeat() -> bytes:
    return b"\x92\x01\x04"


def encode_disconnect() -> bytes:
    return b"\x92\x01\x05"


def encode_reject(request: int) -> bytes:
    if not _is_uint(request, U64_MAX, 1):
        raise ValueError("request must be 1..2**64-1")
    return _pack([VERSION, REJECT, request])


def error_object(code: int, message: str, data: Any = None,
                 has_data: bool = False) -> Dict[str, Any]:
    err = {"code": code, "message": message}
    if has_data or data is not None:
        err["data"] = data
    return err


class NotRepresentable(ValueError):
    """A result (or error data) holding a number JSON-RPC through the broker
    cannot carry: answered -32010, never -32603."""


I64_MIN = -(1 << 63)


def _number(v: Union[int, decimal.Decimal]) -> Union[int, float]:
    """The value the broker would have made of this number had it come as
    JSON (PROTOCOL.md 7): an integer within int64/uint64 stays one, any other
    finite number becomes the nearest float64."""
    if isinstance(v, decimal.Decimal):
        if not v.is_finite():
            raise NotRepresentable("Decimal %s has no JSON form" % v)
        if v == v.to_integral_value():
            iv = int(v)
            if I64_MIN <= iv <= U64_MAX:
                return iv
        f = float(v)
        if math.isinf(f):
            raise NotRepresentable("Decimal beyond a double's range")
        return f
    try:                       # an int beyond 64 bits
        return float(v)
    except OverflowError:
        raise NotRepresentable("an int of %d bits, beyond a double's range"
                               % v.bit_length()) from None


def coerce(value: Any, depth: int = 0) -> Any:
    """``value`` with every int beyond 64 bits and every Decimal replaced as
    :func:`_number` says; raises NotRepresentable (or TypeError for other
    types msgpack cannot pack)."""
    if depth > MAX_PACK_DEPTH:
        raise ValueError("nested too deep")
    if isinstance(value, bool) or value is None or isinstance(value, (str, bytes, float)):
        return value
    if isinstance(value, int):
        return value if I64_MIN <= value <= U64_MAX else _number(value)
    if isinstance(value, decimal.Decimal):
        return _number(value)
    if isinstance(value, (list, tuple)):
        return [coerce(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: coerce(v, depth + 1) for k, v in value.items()}
    return value


MAX_PACK_DEPTH = 511


def encode_answer(seq: int, result: Any = None, error: Optional[Dict[str, Any]] = None) -> bytes:
    """One answer ``[seq, 0, result]`` or ``[seq, 1, error]``, packed on its
    own so that a result with no msgpack form fails here, for this call
    alone. Ints beyond 64 bits and Decimals are served as the broker serves
    such JSON numbers (:func:`coerce`); one with no float64 form raises
    NotRepresentable; other unpackable values TypeError/ValueError."""
    item = error if error is not None else result
    try:
        return _pack([seq, 1 if error is not None else 0, item])
    except (OverflowError, TypeError):
        item = coerce(item)
    return _pack([seq, 1 if error is not None else 0, item])


def encode_response(answers: Iterable[bytes]) -> bytes:
    """RESPONSE ``[1, 3, [answer, ...]]`` from answers packed by
    :func:`encode_answer`."""
    answers = list(answers)
    if not answers:
        raise ValueError("a RESPONSE needs at least one answer")
    p = msgpack.Packer()
    return b"\x93\x01\x03" + p.pack_array_header(len(answers)) + b"".join(answers)


# ---- decoding (broker -> worker) ----

class Call:
    """One item of a REQUEST."""
    __slots__ = ("seq", "method", "params", "timeout_ms", "traceparent")

    def __init__(self, seq: int, method: str, params: Any, timeout_ms: int,
                 traceparent: Optional[str] = None) -> None:
        self.seq = seq
        self.method = method
        self.params = params
        self.timeout_ms = timeout_ms
        self.traceparent = traceparent

    def __repr__(self) -> str:
        return "Call(seq=%r, method=%r, timeout_ms=%r)" % (self.seq, self.method, self.timeout_ms)


class Request:
    """A REQUEST: ``calls`` that decoded, ``bad`` seqs of items that did
    not (answered -32603 by seq, PROTOCOL.md 2.2)."""
    type = REQUEST

    def __init__(self, calls: List["Call"], bad: List[int]) -> None:
        self.calls = calls
        self.bad = bad


class Heartbeat:
    type = HEARTBEAT

    def __init__(self, heartbeat_ms: Optional[int] = None, liveness: Optional[int] = None) -> None:
        self.heartbeat_ms = heartbeat_ms
        self.liveness = liveness


class Disconnect:
    type = DISCONNECT


class Other:
    """A well-formed message a worker does not expect (READY, RESPONSE,
    REJECT from a broker): a sign of life, otherwise ignored."""

    def __init__(self, type_: int) -> None:
        self.type = type_


_TP_HEX = re.compile(r"\A([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


def traceparent_valid(s: Any) -> bool:
    """PROTOCOL.md 2.2: a W3C traceparent as the broker checks it."""
    if not isinstance(s, str):
        return False
    m = _TP_HEX.match(s)
    if m is None:
        return False
    version, trace_id, parent_id, _flags = m.groups()
    if version == "ff" or trace_id == "0" * 32 or parent_id == "0" * 16:
        return False
    if version == "00":
        return len(s) == 55
    if len(s) == 55:
        return True
    if len(s) > 128 or s[55] != "-":
        return False
    return all(0x21 <= ord(ch) <= 0x7E and ch != '"' for ch in s[56:])


def peek_head(frame: bytes) -> Optional[Tuple[int, int]]:
    """The message's version and type when its head reads (an array of at
    least 2 elements, then two unsigned integers), else None. Reads only the
    head, so it works on a truncated or otherwise broken message: this is how
    REQUESTs are counted for REJECT (PROTOCOL.md 2.5)."""
    u = msgpack.Unpacker(raw=False, strict_map_key=False)
    u.feed(frame)
    try:
        if u.read_array_header() < 2:
            return None
        version = u.unpack()
        type_ = u.unpack()
    except Exception:
        return None
    if not _is_uint(version) or not _is_uint(type_):
        return None
    return version, type_


SCHEMAS_MAX = 65536  # JRPC_WIRE_SCHEMAS_MAX: READY "schemas" bytes a broker reads
MAX_DEPTH = 1100  # JRPC_WIRE_MAX_DEPTH: the message's own array counts


class _DeepError(ValueError):
    pass


_FIXED = {  # byte: (struct format, size) of the scalars
    0xca: (">f", 4), 0xcb: (">d", 8),
    0xcc: (">B", 1), 0xcd: (">H", 2), 0xce: (">I", 4), 0xcf: (">Q", 8),
    0xd0: (">b", 1), 0xd1: (">h", 2), 0xd2: (">i", 4), 0xd3: (">q", 8),
}
_LEN = {1: ">B", 2: ">H", 4: ">I"}


def _ext(code: int, data: bytes) -> Any:
    # As msgpack.unpackb: -1 is a timestamp, other negative codes fail.
    return msgpack.Timestamp.from_bytes(data) if code == -1 else msgpack.ExtType(code, data)


def unpack_deep(data: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """msgpack.unpackb() without its 1024-level limit, for the frames that
    limit refuses (PROTOCOL.md 2: params may nest as deep as the broker's
    --max-depth admits, 1027 levels in the message). Iterative, pure Python,
    slow: only a fallback. The same values as
    unpackb(raw=False, strict_map_key=False): str as str (strict UTF-8), bin
    as bytes, ext as msgpack.ExtType. Raises ValueError when the frame is
    truncated, has trailing bytes, uses c1, nests deeper than max_depth, or
    declares lengths its bytes cannot back."""
    data = bytes(data)
    n = len(data)
    pos = 0
    stack: List[Any] = []  # [container, items left, pending map key or _NOKEY]
    nokey = stack  # a sentinel no value can be

    def take(k: int) -> bytes:
        nonlocal pos
        if k > n - pos:
            raise _DeepError("truncated")
        chunk = data[pos:pos + k]
        pos += k
        return chunk

    def length(size: int) -> int:
        return struct.unpack(_LEN[size], take(size))[0]

    val: Any
    while True:
        b = take(1)[0]
        container: Any = None
        if b <= 0x7f:
            val = b
        elif b >= 0xe0:
            val = b - 0x100
        elif b <= 0x8f:
            container, count = {}, b & 0x0f
        elif b <= 0x9f:
            container, count = [], b & 0x0f
        elif b <= 0xbf:
            val = take(b & 0x1f).decode("utf-8")
        elif b == 0xc0:
            val = None
        elif b == 0xc1:
            raise _DeepError("reserved byte c1")
        elif b in (0xc2, 0xc3):
            val = b == 0xc3
        elif b in (0xc4, 0xc5, 0xc6):
            val = take(length(1 << (b - 0xc4)))
        elif b in (0xc7, 0xc8, 0xc9):
            size = length(1 << (b - 0xc7))
            val = _ext(struct.unpack(">b", take(1))[0], take(size))
        elif b in _FIXED:
            fmt, size = _FIXED[b]
            val = struct.unpack(fmt, take(size))[0]
        elif 0xd4 <= b <= 0xd8:
            code = struct.unpack(">b", take(1))[0]
            val = _ext(code, take(1 << (b - 0xd4)))
        elif b in (0xd9, 0xda, 0xdb):
            val = take(length(1 << (b - 0xd9))).decode("utf-8")
        elif b in (0xdc, 0xdd):
            container, count = [], length(2 if b == 0xdc else 4)
        else:  # 0xde, 0xdf
            container, count = {}, length(2 if b == 0xde else 4)
        if container is not None:
            per = 2 if isinstance(container, dict) else 1
            if count * per > n - pos:
                raise _DeepError("a length the frame cannot back")
            if count:
                if len(stack) + 1 > max_depth:
                    raise _DeepError("nested deeper than %d" % max_depth)
                stack.append([container, count, nokey])
                continue
            val = container
        # Attach val to the containers it completes.
        while True:
            if not stack:
                if pos != n:
                    raise _DeepError("trailing bytes")
                return val
            top = stack[-1]
            if isinstance(top[0], list):
                top[0].append(val)
            elif top[2] is nokey:
                if isinstance(val, (list, dict)):
                    raise _DeepError("a map key that is a container")
                top[2] = val
                break
            else:
                top[0][top[2]] = val
                top[2] = nokey
            top[1] -= 1
            if top[1]:
                break
            stack.pop()
            val = top[0]


def _unpack(frame: bytes) -> Any:
    try:
        return msgpack.unpackb(frame, raw=False, strict_map_key=False, use_list=True)
    except msgpack.StackError:
        return unpack_deep(frame)


def _decode_call(item: Any) -> Call:
    """An item whose seq has been read: a Call, or Malformed."""
    if len(item) < 4:
        raise Malformed("an item needs 4 elements")
    seq, method, params, timeout_ms = item[:4]
    if not isinstance(method, str) or not method:
        raise Malformed("method is not a non-empty str")
    if params is not None and not isinstance(params, (list, dict)):
        raise Malformed("params is not nil, an array or a map")
    if isinstance(params, dict) and not all(isinstance(k, str) for k in params):
        raise Malformed("params is a map with a key that is not a str")
    if not _is_uint(timeout_ms, U32_MAX):
        raise Malformed("timeout_ms is not an unsigned 32-bit integer")
    tp = item[4] if len(item) > 4 else None
    if tp is not None and not traceparent_valid(tp):
        raise Malformed("traceparent is not a valid traceparent")
    return Call(seq, method, params, timeout_ms, tp)


def decode(frame: bytes) -> Any:
    """Decodes one frame from a broker. Returns a Request, Heartbeat,
    Disconnect or Other. Raises UnsupportedVersion, Rejected (a REQUEST that
    must be REJECTed) or Malformed (dropped)."""
    head = peek_head(frame)
    if head is not None and head[0] != VERSION:
        raise UnsupportedVersion("unsupported version %d" % head[0])
    is_request = head == (VERSION, REQUEST)
    try:
        msg = _unpack(frame)
    except Exception as e:  # truncated, trailing bytes, c1, bad UTF-8, too deep
        err = "undecodable msgpack (%s)" % (type(e).__name__,)
        raise (Rejected if is_request else Malformed)(err)
    if not isinstance(msg, list) or len(msg) < 2:
        raise Malformed("not an array of at least 2 elements")
    version, type_ = msg[0], msg[1]
    if not _is_uint(version):
        raise Malformed("version is not an unsigned integer")
    if version != VERSION:
        raise UnsupportedVersion("unsupported version %d" % version)
    if not _is_uint(type_):
        raise Malformed("type is not an unsigned integer")
    if type_ == REQUEST:
        if len(msg) < 3 or not isinstance(msg[2], list) or not msg[2]:
            raise Rejected("items is not a non-empty array")
        items = msg[2]
        for item in items:
            if not isinstance(item, list) or not item or not _is_uint(item[0], U64_MAX, 1):
                raise Rejected("an item without a readable seq")
        calls, bad = [], []
        for item in items:
            try:
                calls.append(_decode_call(item))
            except Malformed:
                bad.append(item[0])
        return Request(calls, bad)
    if type_ == HEARTBEAT:
        hb = msg[2] if len(msg) > 2 else None
        if hb is None:
            return Heartbeat()
        if len(msg) < 4:
            raise Malformed("HEARTBEAT with heartbeat_ms but no liveness")
        if not _is_uint(hb, 3600000, 10) or not _is_uint(msg[3], 1000, 1):
            raise Malformed("HEARTBEAT settings out of range")
        return Heartbeat(hb, msg[3])
    if type_ == DISCONNECT:
        return Disconnect()
    if type_ in (READY, RESPONSE, REJECT):
        return Other(type_)
    raise Malformed("unknown type %d" % type_)
