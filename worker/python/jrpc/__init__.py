"""jrpc — the Python client and worker of the jrpc broker.

    from jrpc import Client
    c = Client("http://127.0.0.1:8080", key_file="client.key")
    c.call("add", [1, 2])                      # 3

The worker is ``jrpc.worker`` (``python -m jrpc.worker --help``)."""

from ._version import __version__
from .client import AsyncClient, Call, Client, Stream
from .errors import CallMayHaveRunError, JsonRpcError, KeyFileError, TransportError
from .sign import SigningKey, load_key

__all__ = ["Client", "AsyncClient", "Call", "Stream", "JsonRpcError", "TransportError",
           "CallMayHaveRunError", "KeyFileError", "SigningKey", "load_key", "__version__"]
