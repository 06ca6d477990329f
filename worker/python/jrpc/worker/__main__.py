"""python -m jrpc.worker [OPTIONS] TARGET

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
from typing import List, Optional

import zmq

from .._version import __version__
from ..errors import KeyFileError
from ..keys import load_keypair, load_public
from . import admin, conf
from . import log as joblog
from .methods import Methods
from .worker import Worker


def _load_target(target: str) -> Methods:
    mod_name, _, attr = target.partition(":")
    attr = attr or "methods"
    if mod_name.endswith(".py") or os.sep in mod_name:
        name = os.path.splitext(os.path.basename(mod_name))[0]
        spec = importlib.util.spec_from_file_location(name, mod_name)
        if spec is None or spec.loader is None:
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


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m jrpc.worker",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Serves Python methods to one or more jrpc brokers (proto/PROTOCOL.md).\n"
        "Each option is also an environment variable JRPC_NAME (JRPC_ + the name upper-cased,\n"
        "- as _) and a config-file key NAME = VALUE (keys before any section, in [jrpc-worker]\n"
        "or in [jrpc-py-worker]); flags > JRPC_* environment > config file > defaults\n"
        "(docs/CONFIG.md).",
        epilog="Results: None, bool, int, float, str, list/tuple, dict with str keys. An int\n"
        "beyond 64 bits or a Decimal is served as the broker serves such a JSON number: an\n"
        "integer while it fits int64/uint64, else the nearest double; one a double cannot\n"
        "hold (a Decimal NaN or Infinity, an int beyond 1.8e308) answers -32010 \"Result not\n"
        "representable\"; any other value with no JSON form -32603.\n"
        "SIGTERM/SIGINT: DISCONNECT to every broker, the calls held finish and are answered\n"
        "(at most --drain-timeout-ms), then exit 0; a second signal exits at once.\n"
        "Exit status: 0 clean stop (or --help, --version, a good --check-config), 1 runtime\n"
        "failure, 2 bad usage, config or key files.")
    p.add_argument("target", nargs="?", help="module:attr or file.py:attr (Methods, Worker or "
                   "dict); default attr: methods")
    p.add_argument("--config", metavar="FILE",
                   help="read options from this INI file (also JRPC_CONFIG) [none]")
    for o in conf.OPTIONS:
        h = "%s [%s]" % (o.help, o.default if o.default is not None else "none")
        if o.kind == "list":
            p.add_argument("--" + o.name, action="append", metavar=o.metavar, help=h)
        else:
            p.add_argument("--" + o.name, metavar=o.metavar, help=h)
    p.add_argument("--check-config", action="store_true",
                   help="check every option and file, print the effective configuration and "
                   "exit (0 good, 2 bad)")
    p.add_argument("--version", action="version", version="%s %s" % (conf.PROG, __version__))
    return p


def main(argv: Optional[List[str]] = None) -> int:
    p = _parser()
    a = p.parse_args(argv)
    flags = {o.name: getattr(a, o.name.replace("-", "_")) for o in conf.OPTIONS}
    try:
        v, sources, ignored = conf.load(flags, os.environ, a.config)
    except conf.ConfError as e:
        for line in e.problems:
            print("%s: %s" % (conf.PROG, line), file=sys.stderr)
        return 2
    if (v["curve-secret"] is None) != (v["broker-key"] is None):
        print("%s: --curve-secret and --broker-key go together" % conf.PROG, file=sys.stderr)
        return 2
    kp = bp = None
    if v["curve-secret"]:
        try:
            kp = load_keypair(v["curve-secret"])
            bp = load_public(str(v["broker-key"]))
        except (OSError, KeyFileError) as e:
            print("%s: %s" % (conf.PROG, e), file=sys.stderr)
            return 2
    if a.check_config:
        sys.stdout.write(conf.effective(v, sources))
        if ignored:
            sys.stdout.write("\n# environment variables ignored (not options of %s): %s\n"
                             % (conf.PROG, ",".join(ignored)))
        return 0
    if a.target is None:
        p.error("a TARGET is needed (module:attr or file.py:attr)")
    joblog.setup(str(v["log-level"]), str(v["log-format"]), conf.PROG)
    log = logging.getLogger("jrpc.main")
    if ignored:
        log.info("event=env_ignored names=%s", ",".join(ignored))
    try:
        methods = _load_target(a.target)
    except Exception as e:
        print("%s: cannot load %s: %s: %s" % (conf.PROG, a.target, type(e).__name__, e),
              file=sys.stderr)
        return 2
    endpoints = conf.endpoints(str(v["connect"]))
    try:
        w = Worker(methods, credit=int(str(v["credit"])),
                   heartbeat_ms=int(str(v["heartbeat-ms"])),
                   liveness=int(str(v["liveness"])), name=v["name"], curve_keypair=kp,
                   broker_public=bp, threads=int(v["threads"]) if v["threads"] else None,
                   drain_timeout_ms=int(str(v["drain-timeout-ms"])),
                   resolve_ms=int(str(v["resolve-ms"])), service=v["service"])
    except ValueError as err:
        print("%s: %s" % (conf.PROG, err), file=sys.stderr)
        return 2
    for ep in endpoints:
        try:
            w.connect(ep)
        except ValueError as err:
            print("%s: --connect: %s" % (conf.PROG, err), file=sys.stderr)
            return 2
    if v["admin"] not in (None, "none"):
        try:
            admin.start(str(v["admin"]), w)
        except OSError as e:
            log.error("event=admin_failed address=%s err=\"%s\"", v["admin"], e)
            return 1
    log.info("event=started version=%s endpoints=%d methods=%d", __version__, len(endpoints),
             len(methods))
    try:
        return w.run()
    except zmq.ZMQError as e:
        bad = e.errno in (errno.EINVAL, errno.EPROTONOSUPPORT, zmq.ENOCOMPATPROTO)
        log.error("event=connect_failed err=\"%s\"", e)
        if bad:
            print("%s: bad endpoint in %s" % (conf.PROG, ",".join(endpoints)), file=sys.stderr)
        return 2 if bad else 1
    except Exception as e:
        log.error("event=run_failed err=\"%s: %s\"", type(e).__name__, e)
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
