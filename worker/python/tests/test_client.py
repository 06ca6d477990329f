"""jrpc.Client without a broker: what a failure means. Fake servers on
127.0.0.1: one that refuses (nothing sent: the next broker, or
TransportError), one that reads the body and closes (it may have run:
CallMayHaveRunError, never sent again unless retry='safe' or retryable),
one that answers. Batches matched by id in any order. dns+tcp:// names
expanded to one tcp:// broker per address, once, as the C client does."""

import json
import socket
import threading
import unittest
from unittest import mock

from jrpc import AsyncClient, Call, CallMayHaveRunError, Client, JsonRpcError, TransportError


class FakeHttp:
    """Reads one HTTP request per connection; `mode` says what it does then."""

    def __init__(self, mode):
        self.mode = mode
        self.bodies = []
        self.headers = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = "http://127.0.0.1:%d/rpc" % self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.one, args=(c,), daemon=True).start()

    def one(self, c):
        data = b""
        while b"\r\n\r\n" not in data:
            data += c.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        n = int([h.split(b":")[1] for h in head.split(b"\r\n")
                 if h.lower().startswith(b"content-length")][0])
        while len(body) < n:
            body += c.recv(65536)
        self.bodies.append(body)
        self.headers.append(head.decode())
        if self.mode == "close":
            c.close()
            return
        req = json.loads(body)
        if isinstance(req, list):      # answers in reverse order
            out = [{"jsonrpc": "2.0", "result": r["params"][0], "id": r["id"]}
                   for r in reversed(req) if "id" in r]
        else:
            out = {"jsonrpc": "2.0", "result": "ok", "id": req["id"]}
        payload = json.dumps(out).encode()
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d"
                  b"\r\n\r\n%s" % (len(payload), payload))
        c.close()

    def close(self):
        self.sock.close()


def refused_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "http://127.0.0.1:%d/rpc" % port


class Failures(unittest.TestCase):
    def setUp(self):
        self.ok = FakeHttp("answer")
        self.dies = FakeHttp("close")
        self.addCleanup(self.ok.close)
        self.addCleanup(self.dies.close)

    def test_refused_goes_to_the_next(self):
        c = Client([refused_url(), self.ok.url])
        self.assertEqual([c.call("m") for _ in range(4)], ["ok"] * 4)

    def test_all_refused_is_not_may_have_run(self):
        with self.assertRaises(TransportError) as cm:
            Client([refused_url(), refused_url()]).call("m")
        self.assertNotIsInstance(cm.exception, CallMayHaveRunError)

    def test_died_after_the_body_is_never_resent(self):
        c = Client(self.dies.url)
        with self.assertRaisesRegex(CallMayHaveRunError, "may or may not have run"):
            c.call("m")
        c = Client([self.dies.url, self.ok.url])
        c._next = 0
        got = []
        for _ in range(4):
            try:
                got.append(c.call("m"))
            except CallMayHaveRunError:
                got.append("may")
        # Not sent again to the other; then the broker that failed comes last.
        self.assertEqual(got, ["may", "ok", "ok", "ok"])
        self.assertEqual((len(self.dies.bodies), len(self.ok.bodies)), (2, 3))

    def test_retryable_is_resent_with_the_same_bytes(self):
        c = Client([self.dies.url, self.ok.url])
        c._next = 0
        self.assertEqual(c.call("m", [1], retryable=True), "ok")
        self.assertEqual(self.dies.bodies, self.ok.bodies)

    def test_safe_adds_one_idempotency_key_and_signs_anew(self):
        c = Client([self.dies.url, self.ok.url], retry="safe", key_id="demo",
                   secret="s3cr3t-s3cr3t-s3cr3t")
        c._next = 0
        self.assertEqual(c.call("m"), "ok")
        h1 = dict(l.split(": ", 1) for l in self.dies.headers[0].split("\r\n")[1:])
        h2 = dict(l.split(": ", 1) for l in self.ok.headers[0].split("\r\n")[1:])
        self.assertRegex(h1["Idempotency-Key"], r'\A"[0-9a-f]{32}"\Z')
        self.assertEqual(h1["Idempotency-Key"], h2["Idempotency-Key"])
        self.assertNotEqual(h1["X-JRPC-Nonce"], h2["X-JRPC-Nonce"])
        self.assertEqual(self.dies.bodies, self.ok.bodies)

    def test_batch_matched_by_id(self):
        c = Client(self.ok.url)
        self.assertEqual(c.batch([("m", [1]), Call("n", [0], notify=True), ("m", [2]),
                                  {"method": "m", "params": [3]}]), [1, None, 2, 3])

    def test_usage(self):
        with self.assertRaises(ValueError):
            Client("ftp://x")
        with self.assertRaises(ValueError):
            Client("tcp://127.0.0.1:1", bearer="t")
        with self.assertRaises(ValueError):
            Client(self.ok.url, retry="always")
        with self.assertRaises(ValueError):
            Client(self.ok.url, traceparent="00-bad")

    def test_error_type(self):
        e = JsonRpcError.from_object({"code": 4001, "message": "No", "data": [1]})
        self.assertEqual((e.code, e.message, e.data, e.has_data), (4001, "No", [1], True))
        self.assertEqual(JsonRpcError.from_object({"code": 1, "message": "x"}).has_data, False)


def answer(*addrs):
    """A getaddrinfo answer (its 5-tuples) for the addresses."""
    out = []
    for a in addrs:
        if ":" in a:
            out.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, 0, 0, 0)))
        else:
            out.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 0)))
    return out


class Names(unittest.TestCase):
    """dns+tcp://NAME:PORT: every A/AAAA address of NAME a tcp:// broker,
    resolved once when the client is made."""

    def test_localhost(self):
        for c in (Client("dns+tcp://localhost:5556"),
                  AsyncClient("dns+tcp://localhost:5556").sync):
            self.assertTrue(c.urls)
            self.assertLessEqual(set(c.urls), {"tcp://127.0.0.1:5556", "tcp://[::1]:5556"})
            self.assertEqual(len(set(c.urls)), len(c.urls))
            self.assertEqual([t.url for t in c._transports], c.urls)

    def test_every_address_once_resolved_once(self):
        ai = answer("10.0.0.3", "::1", "10.0.0.1", "10.0.0.3", "fd00::2")
        ai.append((socket.AF_UNIX, socket.SOCK_STREAM, 0, "", "/x"))   # not an address
        with mock.patch("socket.getaddrinfo", return_value=ai) as gai:
            c = Client("dns+tcp://brokers.test:7001")
            self.assertEqual(gai.call_count, 1)
            self.assertEqual(gai.call_args[0][0], "brokers.test")
        # IPv4 and IPv6, each once, in the order the C client and the
        # workers use (io/jrpc_dns, jrpc.worker.dns: sorted).
        self.assertEqual(c.urls, ["tcp://10.0.0.1:7001", "tcp://10.0.0.3:7001",
                                  "tcp://[::1]:7001", "tcp://[fd00::2]:7001"])

    def test_list_keeps_order(self):
        with mock.patch("socket.getaddrinfo", return_value=answer("10.0.0.2", "10.0.0.1")):
            c = Client(["http://a:8080/rpc", "dns+tcp://brokers.test:7001", "tcp://b:1",
                        "ws://c/rpc"])
            ac = AsyncClient(["dns+tcp://brokers.test:7001", "https://d/"])
        self.assertEqual(c.urls, ["http://a:8080/rpc", "tcp://10.0.0.1:7001",
                                  "tcp://10.0.0.2:7001", "tcp://b:1", "ws://c/rpc"])
        self.assertEqual(ac.sync.urls, ["tcp://10.0.0.1:7001", "tcp://10.0.0.2:7001",
                                        "https://d/"])

    def test_no_address_raises(self):
        with self.assertRaisesRegex(ValueError, "dns\\+tcp://nosuch.invalid:5556.*no address"):
            Client(["http://a/rpc", "dns+tcp://nosuch.invalid:5556"])
        with self.assertRaisesRegex(ValueError, "no address"):
            AsyncClient("dns+tcp://nosuch.invalid:5556")
        unix = [(socket.AF_UNIX, socket.SOCK_STREAM, 0, "", "/x")]
        with mock.patch("socket.getaddrinfo", return_value=unix):
            with self.assertRaisesRegex(ValueError, "no address"):
                Client("dns+tcp://brokers.test:1")
        for bad in ("dns+tcp://bad name:1", "dns+tcp://localhost", "dns+tcp://localhost:0",
                    "dns+udp://localhost:1"):
            with self.assertRaises(ValueError, msg=bad):
                Client(bad)


if __name__ == "__main__":
    unittest.main()
