"""The worker's options from flags, ``JRPC_*`` variables and an INI file,
by the rule of jrpc-broker and jrpc-worker (docs/CONFIG.md, io/jrpc_conf.c):

- ``--foo-bar VALUE`` (or ``=VALUE``); ``JRPC_FOO_BAR``; ``foo-bar = VALUE``
  in the file named by ``--config`` or ``JRPC_CONFIG``;
- precedence flags > environment > file > defaults, a higher source
  replacing a lower one whole (lists too); on the command line a list
  option adds up, any other given twice: the last wins;
- file: keys before any section and in ``[jrpc-worker]`` (the C worker's:
  one file serves both) and ``[jrpc-py-worker]`` (this worker's own);
  other ``[jrpc-*]`` sections skipped, any other section, an unknown key, a
  duplicate key, an empty value: errors. Keys of jrpc-worker this worker
  has no use for (``zmq-engine``, ``json``, ``slow-percent``, ``slow-ms``)
  are accepted and ignored, so that a file jrpc-worker takes is taken here;
- ``JRPC_*`` names that are not options are ignored (logged once at start);
- every bad value is reported (``SOURCE: NAME: problem``), never replaced
  by a default; the caller exits 2."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

PROG = "jrpc-py-worker"
SECTIONS = ("jrpc-worker", "jrpc-py-worker")
# jrpc-worker's options that mean nothing here (its demo's and its ZMTP engine):
C_ONLY = ("zmq-engine", "json", "slow-percent", "slow-ms")
_ENDPOINT = re.compile(r"(tcp|ipc|inproc|dns\+tcp)://\S+\Z")
_HOSTPORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})\Z")


@dataclass
class Opt:
    name: str
    kind: str                   # uint, str, choice, list, path, hostport
    default: Optional[str]
    help: str
    lo: int = 0
    hi: int = 0
    choices: Tuple[str, ...] = ()
    metavar: str = "VALUE"


OPTIONS: List[Opt] = [
    Opt("connect", "list", "tcp://127.0.0.1:5556", "a broker's worker endpoint, or "
        "dns+tcp://NAME:PORT for every broker NAME resolves to; repeat (or give a comma "
        "list) for several", metavar="ENDPOINT"),
    Opt("resolve-ms", "uint", "5000", "how often dns+tcp:// names are resolved again; a "
        "broker lost also resolves its name at once", 100, 3600000, metavar="N"),
    Opt("name", "str", None, "this worker's name in the broker's logs and metrics (READY's "
        "name); unset: its routing id", metavar="NAME"),
    Opt("service", "str", None, "the service this worker's methods belong to "
        "([a-z0-9][a-z0-9_-]{0,62}): clients call them SERVICE.method, and by the bare name "
        "when no other service declared it first; unset: no service", metavar="NAME"),
    Opt("credit", "uint", "64", "calls held at once per broker", 1, 1000000, metavar="N"),
    Opt("threads", "uint", None, "threads for sync handlers (unset: min(credit, 32))", 1, 1024,
        metavar="N"),
    Opt("heartbeat-ms", "uint", "1000", "heartbeat interval in ms, until a broker sends its "
        "own", 10, 3600000, metavar="N"),
    Opt("liveness", "uint", "3", "silent intervals before a broker counts as dead and the "
        "worker reconnects", 1, 1000, metavar="N"),
    Opt("drain-timeout-ms", "uint", "30000", "on SIGTERM, how long to wait at most for the "
        "calls held to finish", 0, 86400000, metavar="N"),
    Opt("curve-secret", "path", None, "this worker's CURVE keypair (jrpc keygen FILE)",
        metavar="FILE"),
    Opt("broker-key", "path", None, "the broker's public key (the .pub of its keypair); both "
        "CURVE options or neither", metavar="FILE"),
    Opt("admin", "hostport", None, "admin listener (/metrics, /healthz, /readyz), or none",
        metavar="HOST:PORT"),
    Opt("log-level", "choice", "info", "debug, info, warn or error",
        choices=("debug", "info", "warn", "error"), metavar="LEVEL"),
    Opt("log-format", "choice", "kv", "kv (key=value) or json (one object a line)",
        choices=("kv", "json"), metavar="FORMAT"),
]
BY_NAME: Dict[str, Opt] = {o.name: o for o in OPTIONS}


def env_name(name: str) -> str:
    return "JRPC_" + name.upper().replace("-", "_")


class ConfError(Exception):
    def __init__(self, problems: List[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def _check(o: Opt, value: str) -> Optional[str]:
    """None when ``value`` is good for ``o``, else the problem."""
    if value == "":
        return "empty value"
    if o.kind == "uint":
        if not re.fullmatch(r"[0-9]+", value) or not o.lo <= int(value) <= o.hi:
            return "'%s' is not a whole number from %d to %d" % (value, o.lo, o.hi)
    elif o.kind == "choice" and value not in o.choices:
        return "'%s' is not one of %s" % (value, ", ".join(o.choices))
    elif o.kind == "list":
        for e in _split(value):
            if not _ENDPOINT.match(e):
                return "'%s' is not an endpoint (tcp://HOST:PORT, ipc://PATH, " \
                       "dns+tcp://NAME:PORT)" % e
        if not _split(value):
            return "empty list"
    elif o.kind == "hostport" and value != "none":
        m = _HOSTPORT.match(value)
        if not m or not 0 < int(m.group(2)) <= 65535:
            return "'%s' is not HOST:PORT, [V6]:PORT or none" % value
    elif o.kind == "str" and (len(value) > 63 or any(not 0x21 <= ord(c) <= 0x7E for c in value)):
        return "'%s' is not 1..63 printable bytes without spaces" % value
    return None


def _split(value: str) -> List[str]:
    return [e for e in re.split(r"[,\s]+", value) if e]


def read_ini(path: str) -> Tuple[List[Tuple[int, str, str]], List[str]]:
    """(line, key, value) of the keys this worker reads, as inih reads the
    file (docs/CONFIG.md "The config file"), and the file's problems."""
    out: List[Tuple[int, str, str]] = []
    problems: List[str] = []
    section: Optional[str] = None
    try:
        with open(path, "rb") as f:
            raw_lines = f.read().split(b"\n")
    except OSError as e:
        return [], ["%s: %s" % (path, e.strerror or e)]
    for n, raw in enumerate(raw_lines, 1):
        if len(raw) > 198:
            problems.append("%s:%d: line longer than 198 bytes" % (path, n))
            continue
        line = raw.decode("utf-8", "replace").strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                problems.append("%s:%d: a section without ']'" % (path, n))
                continue
            section = line[1:-1].strip()
            if section not in SECTIONS and not section.startswith("jrpc-"):
                problems.append("%s:%d: unknown section [%s]" % (path, n, section))
            continue
        if section is not None and section not in SECTIONS:
            continue                      # another jrpc program's section
        m = re.match(r"([^=:]+?)\s*[=:]\s*(.*)\Z", line)
        if not m:
            problems.append("%s:%d: not 'key = value'" % (path, n))
            continue
        key, value = m.group(1), m.group(2)
        value = re.split(r"\s;", value, maxsplit=1)[0].strip()
        out.append((n, key, value))
    return out, problems


def load(flags: Mapping[str, object], environ: Mapping[str, str],
         config_flag: Optional[str]) -> Tuple[Dict[str, Optional[str]], Dict[str, str], List[str]]:
    """(values, sources, ignored env names). ``flags``: option name -> the
    command line's value (str, or a list of str for list options; None when
    not given). Raises ConfError with every problem found."""
    problems: List[str] = []
    values: Dict[str, Optional[str]] = {o.name: o.default for o in OPTIONS}
    sources: Dict[str, str] = {o.name: "default" for o in OPTIONS}
    config = config_flag
    if config is None and environ.get("JRPC_CONFIG"):
        config = environ["JRPC_CONFIG"]
    elif config is None and "JRPC_CONFIG" in environ:
        problems.append("env JRPC_CONFIG: empty value")
    if config is not None:
        entries, file_problems = read_ini(config)
        problems.extend(file_problems)
        seen: Dict[str, int] = {}
        for n, key, value in entries:
            src = "%s:%d: %s" % (config, n, key)
            if key in C_ONLY:
                continue
            o = BY_NAME.get(key)
            if o is None:
                problems.append("%s: unknown key '%s'" % (src, key))
                continue
            if key in seen:
                problems.append("%s: duplicate key (first at line %d)" % (src, seen[key]))
                continue
            seen[key] = n
            bad = _check(o, value)
            if bad:
                problems.append("%s: %s" % (src, bad))
                continue
            values[key], sources[key] = value, src
    known = {env_name(o.name) for o in OPTIONS} | {"JRPC_CONFIG"}
    ignored = sorted(k for k in environ if k.startswith("JRPC_") and k not in known)
    for o in OPTIONS:
        v = environ.get(env_name(o.name))
        if v is None:
            continue
        src = "env " + env_name(o.name)
        bad = _check(o, v)
        if bad:
            problems.append("%s: %s" % (src, bad))
            continue
        values[o.name], sources[o.name] = v, src
    for o in OPTIONS:
        fv = flags.get(o.name)
        if fv is None:
            continue
        given: Sequence[str] = fv if isinstance(fv, list) else [str(fv)]
        for v in given:
            bad = _check(o, v)
            if bad:
                problems.append("--%s: %s" % (o.name, bad))
        values[o.name] = ",".join(given) if o.kind == "list" else given[-1]
        sources[o.name] = "--" + o.name
    if problems:
        raise ConfError(problems)
    return values, sources, ignored


def endpoints(value: str) -> List[str]:
    return _split(value)


def effective(values: Mapping[str, Optional[str]], sources: Mapping[str, str]) -> str:
    """The effective configuration in config-file format (--check-config)."""
    lines = ["# %s: the effective configuration (--check-config); the source of each "
             "value is in the comment above it." % PROG, "", "[jrpc-py-worker]"]
    for o in OPTIONS:
        v = values.get(o.name)
        lines.append("# %s: %s" % (o.name, sources.get(o.name, "default")))
        lines.append(("%s = %s" if v is not None else "# %s = (unset)") % ((o.name, v) if v
                     is not None else (o.name,)))
    return "\n".join(lines) + "\n"
