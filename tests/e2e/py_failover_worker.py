"""The failover test's worker (tests/e2e/py_failover.sh): ``rec`` stands for
a call with an effect. Each run appends one line "TOKEN WORKER" to
$REC_FILE (one write, O_APPEND: lines of several processes never mix), so
the test counts at the workers how many times each call ran. Not declared
idempotent: a broker never re-runs it by itself."""

import os
import time

from jrpc.worker import InvalidParams, Methods

methods = Methods()
_fd = os.open(os.environ["REC_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
_me = os.environ.get("REC_NAME", str(os.getpid()))
# The killed broker's worker is slowed (REC_EXTRA_MS) so that calls are in
# flight there whenever the test kills its broker, not only most of the time.
_extra_ms = int(os.environ.get("REC_EXTRA_MS", "0"))


@methods.method("rec")
def rec(token: str, ms: int = 0) -> str:
    if not isinstance(token, str) or not isinstance(ms, int):
        raise InvalidParams()
    time.sleep((ms + _extra_ms) / 1000)
    os.write(_fd, ("%s %s\n" % (token, _me)).encode())
    return token
