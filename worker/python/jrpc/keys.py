"""CURVE key files as jrpc-worker reads them (--curve-secret, --broker-key):
a keypair file from ``jrpc keygen FILE`` has a ``public <z85>`` and a
``secret <z85>`` line, ``FILE.pub`` the ``public`` line alone; blank lines
and ``#`` comments (a field starting with ``#``) are allowed (io/jrpc_curve.c)."""

from __future__ import annotations

from typing import Iterator, Optional, Tuple

from .errors import KeyFileError

Z85_LEN = 40


def _lines(path: str) -> Iterator[Tuple[int, Optional[str], str]]:
    from zmq.utils import z85
    with open(path, "r", encoding="ascii") as f:
        for lineno, raw in enumerate(f, 1):
            # '#' is also a Z85 digit: a comment is a field that starts with
            # it, on its own line or after the key (as io/jrpc_curve.c reads).
            fields = raw.split()
            if not fields or fields[0].startswith("#"):
                continue
            label, key, rest = None, fields[0], fields[1:]
            if key in ("public", "secret"):
                if not rest:
                    raise KeyFileError("%s:%d: '%s' without a key" % (path, lineno, key))
                label, key, rest = key, rest[0], rest[1:]
            if rest and not rest[0].startswith("#"):
                raise KeyFileError("%s:%d: unexpected text after the key" % (path, lineno))
            if len(key) != Z85_LEN:
                raise KeyFileError("%s:%d: a key is %d Z85 characters" % (path, lineno, Z85_LEN))
            try:
                z85.decode(key.encode())
            except Exception:
                raise KeyFileError("%s:%d: not a Z85 key" % (path, lineno)) from None
            yield lineno, label, key


def load_keypair(path: str) -> Tuple[str, str]:
    """(public, secret) Z85 strings from a keypair file; checks that the
    public key is the secret key's."""
    found = {}
    for lineno, label, key in _lines(path):
        if label not in ("public", "secret"):
            raise KeyFileError("%s:%d: expected 'public KEY' or 'secret KEY'" % (path, lineno))
        if label in found:
            raise KeyFileError("%s:%d: a second '%s' line" % (path, lineno, label))
        found[label] = key
    if "public" not in found or "secret" not in found:
        raise KeyFileError("%s: a keypair file needs a 'public KEY' and a 'secret KEY' line "
                           "(make one with 'jrpc keygen FILE')" % path)
    import zmq
    derived = zmq.curve_public(found["secret"].encode()).decode()
    if derived != found["public"]:
        raise KeyFileError("%s: the public key is not the secret key's" % path)
    return found["public"], found["secret"]


def load_public(path: str) -> str:
    """The Z85 public key of a ``.pub`` file (one ``public KEY`` line)."""
    key: Optional[str] = None
    for lineno, label, k in _lines(path):
        if label != "public":
            raise KeyFileError("%s:%d: %s" % (path, lineno, "a secret key: give the public-key "
                               "file (FILE.pub), not the keypair" if label else
                               "expected 'public KEY'"))
        if key is not None:
            raise KeyFileError("%s:%d: a second 'public' line" % (path, lineno))
        key = k
    if key is None:
        raise KeyFileError("%s: no 'public KEY' line" % path)
    return key
