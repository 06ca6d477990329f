"""Brokers found by name (issue 16): ``dns+tcp://NAME:PORT`` stands for
every broker NAME resolves to (A and AAAA), each its own session. The pure
part, as io/jrpc_dns.c has it for the C library: the URL, a
getaddrinfo() answer as a sorted set of ZeroMQ endpoints, and the
difference between the set in force and a fresh one. The worker resolves
(socket.getaddrinfo in a thread of its own) and acts on what this says."""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import Any, Iterable, List, Optional, Sequence, Tuple

SCHEME = "dns+tcp://"
NAME_MAX = 253   # a DNS name's longest text form (RFC 1035)
ADDRS_MAX = 64   # addresses of one name connected to; more are ignored

_LABEL = re.compile(r"[A-Za-z0-9_-]{1,63}\Z")


def is_name(endpoint: str) -> bool:
    """Whether endpoint asks for resolution by name (starts with "dns+")."""
    return endpoint.startswith("dns+")


def parse(url: str) -> Tuple[str, int]:
    """(host, port) of "dns+tcp://NAME:PORT"; ValueError when it is not
    one. NAME: labels of 1..63 letters, digits, '-' and '_' joined by
    dots (a trailing dot allowed), 253 bytes at most; PORT: 1..65535 in
    decimal without sign or leading zero."""
    if not url.startswith(SCHEME):
        raise ValueError("%r is not dns+tcp://NAME:PORT" % url)
    host, sep, port = url[len(SCHEME):].rpartition(":")
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    if (not sep or not host or len(host) > NAME_MAX or not host.isascii()
            or not all(_LABEL.match(x) for x in labels)):
        raise ValueError("%r: bad name in dns+tcp://NAME:PORT" % url)
    if not re.fullmatch(r"[1-9][0-9]{0,4}", port) or int(port) > 65535:
        raise ValueError("%r: bad port in dns+tcp://NAME:PORT" % url)
    return host, int(port)


def endpoint(family: int, address: str, port: int) -> Optional[str]:
    """"tcp://A.B.C.D:PORT" or "tcp://[IPv6]:PORT" for one address of a
    getaddrinfo() answer (its sockaddr's first element); None for another
    family."""
    if family == socket.AF_INET:
        return "tcp://%s:%d" % (ipaddress.IPv4Address(address), port)
    if family == socket.AF_INET6:
        return "tcp://[%s]:%d" % (ipaddress.IPv6Address(address.split("%")[0]), port)
    return None


def endpoints(answer: Iterable[Tuple[Any, ...]], port: int,
              limit: int = ADDRS_MAX) -> Tuple[List[str], bool]:
    """The endpoints of the IPv4 and IPv6 addresses of a getaddrinfo()
    answer (its 5-tuples), sorted, without duplicates, the smallest `limit`
    of them. Returns (list, truncated)."""
    eps = sorted({e for e in (endpoint(f, sa[0], port) for f, _, _, _, sa in answer) if e})
    return eps[:limit], len(eps) > limit


def diff(old: Sequence[str], cur: Sequence[str]) -> Tuple[List[str], List[str]]:
    """(gone, added): the endpoints of old not in cur, and of cur not in old
    (each once, in cur's order)."""
    now = set(cur)
    before = set(old)
    gone = [e for e in old if e not in now]
    added: List[str] = []
    for e in cur:
        if e not in before and e not in added:
            added.append(e)
    return gone, added
