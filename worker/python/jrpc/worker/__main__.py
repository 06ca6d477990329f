"""python3 -m jrpc_worker [OPTIONS] TARGET

TARGET names the methods to serve: ``module:attr`` or ``path/to/file.py:attr``
where attr is a Methods table, a Worker (its own table), or a dict
{name: fn}; without ``:attr``, the module's ``methods``."""

import argparse
import errno
import importlib
import importlib.util
import logging
import os
import sys

import zmq

from ..errors import KeyFileError
from ..keys import load_keypair, load_public
from .methods import Methods
from .worker import Worker


def _load_target(target):
    mod_name, _, attr = target.partition(":")
    attr = attr or "methods"
    if mod_name.endswith(".py") or os.sep in mod_name:
        name = os.path.splitext(os.path.basename(mod_name))[0]
        spec = importlib.util.spec_from_file_location(name, mod_name)
        if spec is None:
            raise ImportError("cannot load %s" % mod_name)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        mod = importlib.import_module(mod_name)
    obj = mod
    for part in attr.split("."):
        obj = getattr(obj, part)
    if isinstance(obj, Worker):
        return obj.methods
    if isinstance(obj, Methods):
        return obj
    if isinstance(obj, dict):
        return Methods.from_dict(obj)
    raise TypeError("%s is a %s, not a Methods table, a Worker or a dict"
                    % (target, type(obj).__name__))


def _uint(lo, hi):
    def conv(v):
        n = int(v)
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError("%s is not in %d..%d" % (v, lo, hi))
        return n
    return conv


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python3 -m jrpc_worker",
        description="Serves Python methods to one or more jrpc brokers (proto/PROTOCOL.md).",
        epilog="SIGTERM/SIGINT: DISCONNECT to every broker, the calls held finish and are "
               "answered (at most --drain-timeout-ms), then exit 0; a second signal exits at "
               "once. Exit status: 0 clean stop, 1 runtime failure, 2 bad usage or key files.")
    p.add_argument("target", help="module:attr or file.py:attr (Methods, Worker or dict); "
                   "default attr: methods")
    p.add_argument("--connect", action="append", metavar="ENDPOINT",
                   help="a broker's worker endpoint, or dns+tcp://NAME:PORT for every broker "
                   "NAME resolves to (A and AAAA, one session each); repeat (or give a comma "
                   "list) for several (default tcp://127.0.0.1:5556)")
    p.add_argument("--resolve-ms", type=_uint(100, 3600000), default=5000,
                   help="how often dns+tcp:// names are resolved again; a broker lost also "
                   "resolves its name at once (default 5000)")
    p.add_argument("--name", help="this worker's name in the broker's logs (READY's name)")
    p.add_argument("--credit", type=_uint(1, 1000000), default=64,
                   help="calls held at once per broker (default 64)")
    p.add_argument("--threads", type=_uint(1, 1024), default=None,
                   help="threads for sync handlers (default min(credit, 32))")
    p.add_argument("--heartbeat-ms", type=_uint(10, 60000), default=1000,
                   help="own heartbeat interval until the broker sends its own (default 1000)")
    p.add_argument("--liveness", type=_uint(1, 100), default=3,
                   help="silent intervals before a broker counts as dead (default 3)")
    p.add_argument("--drain-timeout-ms", type=_uint(0, 86400000), default=30000,
                   help="on SIGTERM, how long to wait at most for the calls held (default 30000)")
    p.add_argument("--curve-secret", metavar="FILE",
                   help="this worker's CURVE keypair (jrpc keygen FILE)")
    p.add_argument("--broker-key", metavar="FILE",
                   help="the broker's public key (the .pub of its keypair); both or neither")
    p.add_argument("--log-level", default="info",
                   choices=["debug", "info", "warn", "warning", "error"])
    a = p.parse_args(argv)
    level = {"warn": "warning"}.get(a.log_level, a.log_level)
    logging.basicConfig(level=getattr(logging, level.upper()), stream=sys.stderr,
                        format="%(asctime)s level=%(levelname)s comp=%(name)s %(message)s")
    if (a.curve_secret is None) != (a.broker_key is None):
        p.error("--curve-secret and --broker-key go together")
    kp = bp = None
    if a.curve_secret:
        try:
            kp = load_keypair(a.curve_secret)
            bp = load_public(a.broker_key)
        except (OSError, KeyFileError) as e:
            print("jrpc_worker: %s" % e, file=sys.stderr)
            return 2
    try:
        methods = _load_target(a.target)
    except Exception as e:
        print("jrpc_worker: cannot load %s: %s: %s" % (a.target, type(e).__name__, e),
              file=sys.stderr)
        return 2
    endpoints = []
    for v in a.connect or ["tcp://127.0.0.1:5556"]:
        endpoints.extend(e for e in v.split(",") if e)
    w = Worker(methods, credit=a.credit, heartbeat_ms=a.heartbeat_ms, liveness=a.liveness,
               name=a.name, curve_keypair=kp, broker_public=bp, threads=a.threads,
               drain_timeout_ms=a.drain_timeout_ms, resolve_ms=a.resolve_ms)
    for e in endpoints:
        try:
            w.connect(e)
        except ValueError as err:
            p.error(str(err))
    try:
        return w.run()
    except zmq.ZMQError as e:
        bad = e.errno in (errno.EINVAL, errno.EPROTONOSUPPORT, zmq.ENOCOMPATPROTO)
        logging.getLogger("jrpc.worker").error("event=connect_failed err=\"%s\"", e)
        if bad:
            print("jrpc_worker: bad endpoint in %s" % ",".join(endpoints), file=sys.stderr)
        return 2 if bad else 1
    except Exception as e:
        logging.getLogger("jrpc.worker").error("event=run_failed err=\"%s: %s\"",
                                                type(e).__name__, e)
        return 1


def entry() -> None:
    rc = main()
    # Handlers a drain gave up on may still be running in the pool, whose
    # threads the interpreter would wait for at exit: leave now, as the C
    # worker does (the broker answers those calls -32003 or -32004).
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


if __name__ == "__main__":
    entry()
