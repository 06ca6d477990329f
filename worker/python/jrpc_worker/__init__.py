"""jrpc_worker — a Python worker for the jrpc broker (proto/PROTOCOL.md).

    from jrpc_worker import Worker, JsonRpcError

    w = Worker(credit=16)

    @w.method(idempotent=True)
    def add(a, b):
        return a + b

    w.connect("tcp://127.0.0.1:5556")
    w.run()          # until SIGTERM/SIGINT (drain) or w.stop()
"""

from .keys import KeyFileError, load_keypair, load_public
from .methods import CallInfo, InvalidParams, JsonRpcError, Methods, current_call
from .worker import Worker

__all__ = ["Worker", "Methods", "JsonRpcError", "InvalidParams", "CallInfo", "current_call",
           "load_keypair", "load_public", "KeyFileError"]
__version__ = "0.1.0"
