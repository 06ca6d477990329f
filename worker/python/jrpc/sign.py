"""Signing bodies as docs/SIGNING.md says (HMAC-SHA256 over
``"v1" LF key_id LF timestamp LF nonce LF sha256hex(body)``), and reading
the broker's key file format (proto/jrpc_keys.c) for a client's key."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import time
from typing import Dict, Optional, Tuple

from .errors import KeyFileError

_KEY_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")
_NONCE = re.compile(r"[A-Za-z0-9_-]{16,64}\Z")
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def new_nonce() -> str:
    """22 characters of base64url from 16 random bytes (132 bits), fresh
    for every body and every retry."""
    return base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode("ascii")


def signature(key_id: str, secret: str, timestamp: int, nonce: str, body: bytes) -> str:
    """The lower-case hex HMAC-SHA256 of the string S of docs/SIGNING.md."""
    s = "v1\n%s\n%d\n%s\n%s" % (key_id, timestamp, nonce, hashlib.sha256(body).hexdigest())
    return hmac.new(secret.encode("ascii"), s.encode("ascii"), hashlib.sha256).hexdigest()


class SigningKey:
    """A key id and its secret (the secret's ASCII bytes are the HMAC key)."""

    __slots__ = ("key_id", "_secret")

    def __init__(self, key_id: str, secret: str) -> None:
        if not _KEY_ID.match(key_id):
            raise KeyFileError("a key id is 1 to 64 characters of [A-Za-z0-9_.-]")
        if len(secret) < 16 or any(not 0x21 <= ord(ch) <= 0x7E for ch in secret):
            raise KeyFileError("a secret is at least 16 printable ASCII characters without spaces")
        self.key_id = key_id
        self._secret = secret

    def sign(self, body: bytes, timestamp: Optional[int] = None,
             nonce: Optional[str] = None) -> Dict[str, str]:
        """The four values for ``body``: HTTP header name -> value (a new
        nonce and the current time unless given)."""
        ts = int(time.time()) if timestamp is None else timestamp
        n = new_nonce() if nonce is None else nonce
        if not _NONCE.match(n):
            raise ValueError("a nonce is 16 to 64 characters of [A-Za-z0-9_-]")
        return {"X-JRPC-Key": self.key_id, "X-JRPC-Timestamp": str(ts), "X-JRPC-Nonce": n,
                "X-JRPC-Signature": signature(self.key_id, self._secret, ts, n, body)}

    def sign_zmq(self, body: bytes) -> Dict[str, object]:
        """The same four values as ZeroMQ header-frame keys (PROTOCOL.md 9.1)."""
        h = self.sign(body)
        return {"key": h["X-JRPC-Key"], "timestamp": int(h["X-JRPC-Timestamp"]),
                "nonce": h["X-JRPC-Nonce"], "signature": h["X-JRPC-Signature"]}

    def __repr__(self) -> str:
        return "SigningKey(%r, <secret>)" % self.key_id


def load_key(path: str, key_id: Optional[str] = None) -> SigningKey:
    """A signing key from a file in the broker's key file format: lines
    ``<key id> <secret> [method-glob ...]``, a field starting with ``#``
    starts a comment, blank lines skipped. With ``key_id`` that key, else
    the file's first. A bearer key (``bearer-sha256:``) cannot sign."""
    first: Optional[Tuple[int, str, str]] = None
    with open(path, "r", encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            fields = []
            for fld in raw.split():
                if fld.startswith("#"):
                    break
                fields.append(fld)
            if not fields:
                continue
            if len(fields) < 2:
                raise KeyFileError("%s:%d: a key line is '<key id> <secret> [method-glob ...]'"
                                   % (path, lineno))
            kid, secret = fields[0], fields[1]
            if key_id is not None and kid != key_id:
                continue
            if secret.startswith("bearer-sha256:"):
                raise KeyFileError("%s:%d: %s is a bearer key: it cannot sign (send its token "
                                   "with bearer=)" % (path, lineno, kid))
            first = (lineno, kid, secret)
            break
    if first is None:
        raise KeyFileError("%s: %s" % (path, "no key %r" % key_id if key_id else "no key"))
    lineno, kid, secret = first
    try:
        return SigningKey(kid, secret)
    except KeyFileError as e:
        raise KeyFileError("%s:%d: %s" % (path, lineno, e)) from None
