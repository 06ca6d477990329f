"""The exceptions of the jrpc package, client and worker alike.

``JsonRpcError`` is the one type of a JSON-RPC error object: a client call
raises it for an error answer, and a worker handler raises it to answer one.
The others are about the transport: the call got no JSON-RPC answer."""

from __future__ import annotations

from typing import Any, Dict


class JsonRpcError(Exception):
    """A JSON-RPC error object ``{"code": code, "message": message, "data": data}``.

    Raised by the client for an error answer (``data`` None when the
    answer had none: ``has_data`` tells). Raised by a worker's handler, it
    is answered unchanged (``data`` only when given). Application codes
    belong outside -32768..-32000."""

    _NO_DATA: Any = object()

    def __init__(self, code: int, message: str, data: Any = _NO_DATA) -> None:
        if not isinstance(code, int) or isinstance(code, bool):
            raise TypeError("code must be an int")
        if not isinstance(message, str):
            raise TypeError("message must be a str")
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.has_data = data is not JsonRpcError._NO_DATA
        self.data: Any = data if self.has_data else None

    def to_object(self) -> Dict[str, Any]:
        """The error object as a dict (``data`` only when given)."""
        err: Dict[str, Any] = {"code": self.code, "message": self.message}
        if self.has_data:
            err["data"] = self.data
        return err

    @classmethod
    def from_object(cls, err: Any) -> "JsonRpcError":
        """From an answer's ``error`` member; a malformed one becomes a
        TransportError's business, so it is read leniently here."""
        if not isinstance(err, dict):
            return cls(-32603, "malformed error object", err)
        code = err.get("code")
        msg = err.get("message")
        if not isinstance(code, int) or isinstance(code, bool):
            code = -32603
        if not isinstance(msg, str):
            msg = str(msg)
        if "data" in err:
            return cls(code, msg, err["data"])
        return cls(code, msg)

    def __str__(self) -> str:
        s = "%d %s" % (self.code, self.message)
        if self.has_data:
            s += " data=%r" % (self.data,)
        return s

    def __repr__(self) -> str:
        return "JsonRpcError(%r, %r%s)" % (self.code, self.message,
                                           ", %r" % (self.data,) if self.has_data else "")


class InvalidParams(JsonRpcError):
    """-32602 Invalid params: the handler refuses the params."""

    def __init__(self, message: str = "Invalid params", data: Any = JsonRpcError._NO_DATA) -> None:
        super().__init__(-32602, message, data)


class TransportError(Exception):
    """No JSON-RPC answer: no broker could be reached, an answer that is not
    JSON-RPC, a TLS failure. When raised as this class itself (not a
    subclass), the body was never sent to a broker that could have run it:
    it did not run."""


class CallMayHaveRunError(TransportError):
    """The body reached a broker and the connection died (or the deadline
    passed) before its answer: the call may or may not have run. Raised
    only when the client could not safely send it again elsewhere (no
    ``retry="safe"`` and not marked ``retryable``)."""

    def __init__(self, message: str, url: str = "") -> None:
        super().__init__(message)
        self.url = url


class KeyFileError(ValueError):
    """A key file (signing keys, CURVE keypairs) that cannot be used."""
