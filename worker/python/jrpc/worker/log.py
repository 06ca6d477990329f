"""Log lines in the C programs' format (docs/CONFIG.md "Logs"): one line
per event on stderr, ``ts=... level=... proc=... comp=... event=...``
(kv), or the same as one JSON object a line with every value a string
(json). The messages are already ``event=... key=value ...``."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Dict, List, Optional, TextIO

_LEVELS = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warn",
           logging.ERROR: "error", logging.CRITICAL: "error"}
_TOKEN = re.compile(r'\s*([A-Za-z0-9_.-]+)=("(?:[^"\\]|\\.)*"|\S*)|\s*(\S+)')
MAX_KV = 1023


def _ts(created: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + \
        ".%03dZ" % int((created % 1) * 1000)


def _quote(v: str) -> str:
    if v == "" or any(c in v for c in ' "\\=') or any(ord(c) < 0x20 for c in v):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") \
            .replace("\t", "\\t") + '"'
    return v


def parse_kv(msg: str) -> List[List[str]]:
    """[[key, value], ...] of a kv message; words that are not key=value are
    joined under "msg"."""
    members: List[List[str]] = []
    words: List[str] = []
    for m in _TOKEN.finditer(msg):
        if m.group(1):
            v = m.group(2)
            if v.startswith('"') and v.endswith('"') and len(v) >= 2:
                v = re.sub(r'\\(.)', lambda e: {"n": "\n", "t": "\t"}.get(e.group(1), e.group(1)),
                           v[1:-1])
            members.append([m.group(1), v])
        elif m.group(3):
            words.append(m.group(3))
    if words:
        members.append(["msg", " ".join(words)])
    return members


class Formatter(logging.Formatter):
    def __init__(self, proc: str, fmt: str = "kv") -> None:
        super().__init__()
        self.proc = proc
        self.json = fmt == "json"

    def format(self, record: logging.LogRecord) -> str:
        comp = record.name.rsplit(".", 1)[-1]
        msg = record.getMessage()
        if record.exc_info:
            # The traceback on the same line: one line per event.
            tb = self.formatException(record.exc_info)
            msg += " trace=" + _quote(tb)
        level = _LEVELS.get(record.levelno, "info")
        if self.json:
            obj: Dict[str, str] = {"ts": _ts(record.created), "level": level,
                                   "proc": self.proc, "comp": comp}
            for k, v in parse_kv(msg):
                obj[k] = v
            line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
            return line
        line = "ts=%s level=%s proc=%s comp=%s %s" % (_ts(record.created), level, self.proc,
                                                     comp, msg.replace("\n", "\\n"))
        if len(line.encode("utf-8")) > MAX_KV:
            line = line.encode("utf-8")[:MAX_KV].decode("utf-8", "ignore")
        return line


def setup(level: str, fmt: str, proc: str, stream: Optional[TextIO] = None) -> None:
    """The root logger: ``level`` (debug/info/warn/error), ``fmt`` (kv/json)."""
    h = logging.StreamHandler(stream or sys.stderr)
    h.setFormatter(Formatter(proc, fmt))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(h)
    root.setLevel({"warn": logging.WARNING}.get(level, getattr(logging, level.upper())))
