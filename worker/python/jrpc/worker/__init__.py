"""jrpc.worker — a Python worker for the jrpc broker (proto/PROTOCOL.md).

    from jrpc.worker import Worker, JsonRpcError

    w = Worker(credit=16)

    @w.method(idempotent=True)
    def add(a, b):
        return a + b

    w.connect("tcp://127.0.0.1:5556")
    w.run()          # until SIGTERM/SIGINT (drain) or w.stop()
"""

from .._version import __version__
from ..errors import InvalidParams, JsonRpcError, KeyFileError
from ..keys import load_keypair, load_public
from .methods import CallInfo, Methods, current_call
from .worker import Worker

__all__ = ["Worker", "Methods", "JsonRpcError", "InvalidParams", "CallInfo", "current_call",
           "load_keypair", "load_public", "KeyFileError", "__version__"]
