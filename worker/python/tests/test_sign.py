"""Signing (jrpc.sign) against the vectors the C tests read too
(tests/data/sign_vectors.tsv, signatures from the openssl CLI), and the
client's key file and nonces (docs/SIGNING.md)."""

import os
import re
import tempfile
import unittest

from jrpc import KeyFileError, SigningKey, load_key
from jrpc.sign import new_nonce, signature

SRC = os.environ.get("JRPC_SOURCE_DIR",
                     os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
VECTORS = os.path.join(SRC, "tests", "data", "sign_vectors.tsv")


def vectors():
    with open(VECTORS, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            kid, secret, ts, nonce, body_hex, sig = line.rstrip("\n").split("\t")
            yield kid, secret, int(ts), nonce, bytes.fromhex(body_hex), sig


class SharedVectors(unittest.TestCase):
    def test_every_vector(self):
        n = 0
        for kid, secret, ts, nonce, body, sig in vectors():
            self.assertEqual(signature(kid, secret, ts, nonce, body), sig)
            h = SigningKey(kid, secret).sign(body, timestamp=ts, nonce=nonce)
            self.assertEqual(h, {"X-JRPC-Key": kid, "X-JRPC-Timestamp": str(ts),
                                 "X-JRPC-Nonce": nonce, "X-JRPC-Signature": sig})
            n += 1
        self.assertGreaterEqual(n, 5)

    def test_worked_example_is_the_first(self):
        first = next(vectors())
        self.assertEqual(first[5], "d7f83f1c9d7da66fc460bdc60338d8c70ad1c26638957545aafb8fe8682deac6")

    def test_one_byte_changes_it(self):
        kid, secret, ts, nonce, body, sig = next(vectors())
        self.assertNotEqual(signature(kid, secret, ts, nonce, body + b" "), sig)
        self.assertNotEqual(signature(kid, secret, ts + 1, nonce, body), sig)


class Nonces(unittest.TestCase):
    def test_fresh_and_well_formed(self):
        seen = {new_nonce() for _ in range(2000)}
        self.assertEqual(len(seen), 2000)
        for n in seen:
            self.assertRegex(n, r"\A[A-Za-z0-9_-]{22}\Z")

    def test_each_sign_has_its_own(self):
        k = SigningKey("demo", "s3cr3t-s3cr3t-s3cr3t")
        a, b = k.sign(b"{}"), k.sign(b"{}")
        self.assertNotEqual(a["X-JRPC-Nonce"], b["X-JRPC-Nonce"])
        self.assertNotEqual(a["X-JRPC-Signature"], b["X-JRPC-Signature"])
        self.assertTrue(re.fullmatch(r"[0-9a-f]{64}", a["X-JRPC-Signature"]))

    def test_zmq_header_form(self):
        h = SigningKey("demo", "s3cr3t-s3cr3t-s3cr3t").sign_zmq(b"{}")
        self.assertEqual(sorted(h), ["key", "nonce", "signature", "timestamp"])
        self.assertIsInstance(h["timestamp"], int)


class KeyFile(unittest.TestCase):
    def write(self, text):
        f = tempfile.NamedTemporaryFile("w", delete=False, suffix=".keys")
        f.write(text)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_the_broker_format(self):
        p = self.write("# keys\n\nbear bearer-sha256:" + "0" * 64 + "\n"
                       "alice s3cr3t-s3cr3t-alice add sum*  # a comment\n"
                       "bob s3cr3t-s3cr3t-bob #no methods: all\n")
        self.assertEqual(load_key(p, "alice").key_id, "alice")
        self.assertEqual(load_key(p, "bob").key_id, "bob")
        with self.assertRaisesRegex(KeyFileError, "bearer key"):
            load_key(p)               # the first key is a bearer key: it cannot sign
        with self.assertRaisesRegex(KeyFileError, "no key 'carol'"):
            load_key(p, "carol")

    def test_bad_lines(self):
        with self.assertRaisesRegex(KeyFileError, ":1: a key line"):
            load_key(self.write("lonely\n"))
        with self.assertRaisesRegex(KeyFileError, ":2: a secret is at least 16"):
            load_key(self.write("# x\nk short\n"))
        with self.assertRaisesRegex(KeyFileError, "a key id is"):
            SigningKey("a b", "s3cr3t-s3cr3t-s3cr3t")


if __name__ == "__main__":
    unittest.main()
