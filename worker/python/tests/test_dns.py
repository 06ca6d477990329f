"""dns+tcp:// in the Python SDK: the pure part (jrpc.worker.dns: the URL, a
getaddrinfo answer as an endpoint set, the difference), and a worker whose
name's answer changes under it (a fake resolver in front of two fake
brokers on 127.0.0.1 and 127.0.0.2, the same port): READY to the new
address, DISCONNECT to the one gone while the call it holds is still
answered there, and an empty answer that keeps the set."""

import os
import socket
import sys
import threading
import time
import unittest

import zmq


from jrpc.worker import dns  # noqa: E402
from jrpc.worker import Worker  # noqa: E402
from test_session import FakeBroker, make_methods  # noqa: E402


def ai(*addrs):
    """A getaddrinfo answer for the addresses."""
    out = []
    for a in addrs:
        fam = socket.AF_INET6 if ":" in a else socket.AF_INET
        sa = (a, 0, 0, 0) if fam == socket.AF_INET6 else (a, 0)
        out.append((fam, socket.SOCK_STREAM, 6, "", sa))
    return out


class Pure(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(dns.parse("dns+tcp://brokers:5556"), ("brokers", 5556))
        self.assertEqual(dns.parse("dns+tcp://a-b.c_d.svc.cluster.local.:1"),
                         ("a-b.c_d.svc.cluster.local.", 1))
        self.assertEqual(dns.parse("dns+tcp://x:65535"), ("x", 65535))
        longest = ".".join(["a" * 63] * 3 + ["a" * 61])
        self.assertEqual(dns.parse("dns+tcp://%s:80" % longest)[0], longest)
        for bad in ["", "dns+tcp://", "dns+tcp://:1", "dns+tcp://n", "dns+tcp://n:", "dns+tcp://n:0",
                    "dns+tcp://n:01", "dns+tcp://n:65536", "dns+tcp://n:+1", "dns+tcp://n:1x",
                    "tcp://n:1", "dns+udp://n:1", "dns+tcp://a..b:1", "dns+tcp://.a:1",
                    "dns+tcp://[::1]:1", "dns+tcp://n me:1", "dns+tcp://n\u00e4me:1",
                    "dns+tcp://%s:1" % ("a" * 64), "dns+tcp://%s.a:1" % longest,
                    "dns+tcp://n:1/", "dns+tcp://u@n:1"]:
            with self.assertRaises(ValueError, msg=bad):
                dns.parse(bad)
        self.assertTrue(dns.is_name("dns+tcp://n:1"))
        self.assertFalse(dns.is_name("tcp://n:1"))

    def test_endpoints(self):
        eps, cut = dns.endpoints(ai("10.0.0.3", "::1", "10.0.0.1", "10.0.0.3", "fd00::1:2"), 5556)
        self.assertEqual(eps, ["tcp://10.0.0.1:5556", "tcp://10.0.0.3:5556", "tcp://[::1]:5556",
                               "tcp://[fd00::1:2]:5556"])
        self.assertFalse(cut)
        odd = [(socket.AF_UNIX, socket.SOCK_STREAM, 0, "", "/x")]
        self.assertEqual(dns.endpoints(odd, 1), ([], False))
        many = ai(*["10.0.1.%d" % (169 - i) for i in range(70)])
        eps, cut = dns.endpoints(many, 1)
        self.assertTrue(cut)
        self.assertEqual(len(eps), dns.ADDRS_MAX)
        self.assertEqual(eps, sorted(eps))
        self.assertEqual(eps[0], "tcp://10.0.1.100:1")

    def test_diff(self):
        self.assertEqual(dns.diff(["a", "b", "c"], ["c", "d", "b", "d"]), (["a"], ["d"]))
        self.assertEqual(dns.diff(["a", "b"], ["b", "a"]), ([], []))
        self.assertEqual(dns.diff([], ["x", "y"]), ([], ["x", "y"]))
        self.assertEqual(dns.diff(["x"], []), (["x"], []))


class Answers:
    """A resolver whose answer the test sets; counts the lookups."""

    def __init__(self):
        self.answer = []
        self.lookups = 0
        self.lock = threading.Lock()

    def __call__(self, host, port, type=0):
        with self.lock:
            self.lookups += 1
            if not self.answer:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return list(self.answer)


class ByName(unittest.TestCase):
    def setUp(self):
        self.ctx = zmq.Context()
        self.broker = FakeBroker(self.ctx)
        # A second fake broker on 127.0.0.2 at the first one's port: one
        # name, two addresses, one port.
        self.port = int(self.broker.endpoint.rsplit(":", 1)[1])
        self.other = FakeBroker.__new__(FakeBroker)
        self.other.sock = self.ctx.socket(zmq.ROUTER)
        self.other.sock.setsockopt(zmq.LINGER, 0)
        self.other.sock.bind("tcp://127.0.0.2:%d" % self.port)
        self.methods = make_methods()
        self.answers = Answers()
        self.worker = Worker(self.methods, credit=8, threads=4, linger_ms=0, resolve_ms=100)
        self.worker.connect("dns+tcp://brokers.test:%d" % self.port)
        self.worker._getaddrinfo = self.answers
        self.thread = threading.Thread(target=self.worker.run, daemon=True)

    def start(self):
        self.thread.start()
        self.assertTrue(self.worker.started.wait(3))

    def tearDown(self):
        self.methods.gate.set()
        self.worker.stop()
        if self.thread.is_alive():
            self.thread.join(5)
            self.assertFalse(self.thread.is_alive(), "the worker did not stop")
        self.broker.close()
        self.other.close()
        self.ctx.term()

    def wait_lookups(self, n):
        end = time.monotonic() + 3
        while self.answers.lookups < n and time.monotonic() < end:
            time.sleep(0.01)
        self.assertGreaterEqual(self.answers.lookups, n)

    def test_bad_url_refused(self):
        with self.assertRaises(ValueError):
            self.worker.connect("dns+tcp://bad name:1")
        with self.assertRaises(ValueError):
            Worker(self.methods, resolve_ms=10)

    def test_set_follows_the_name(self):
        self.answers.answer = ai("127.0.0.1")
        self.start()
        rid1, _ = self.broker.ready()
        # The second address appears: a session of its own.
        self.answers.answer = ai("127.0.0.1", "127.0.0.2")
        rid2, _ = self.other.ready()
        # The first holds a call when its address leaves the name.
        self.broker.send(rid1, [1, 2, [[5, "wait", ["t"], 0]]])
        end = time.monotonic() + 3
        while "t" not in self.methods.ran and time.monotonic() < end:
            time.sleep(0.01)
        self.answers.answer = ai("127.0.0.2")
        self.assertEqual(self.broker.recv()[1], [1, 5])   # DISCONNECT
        self.methods.gate.set()                            # the call ends...
        self.assertEqual(self.broker.answers(rid1, 1), {5: [0, "t"]})  # ...answered there
        self.assertTrue(self.broker.quiet(0.4), "no READY again to an address gone")
        # Still served through the other one.
        self.other.send(rid2, [1, 2, [[1, "add", [2, 3], 0]]])
        self.assertEqual(self.other.answers(rid2, 1), {1: [0, 5]})
        # No address at all (a DNS hiccup): the set in force stays.
        self.answers.answer = []
        n = self.answers.lookups
        self.wait_lookups(n + 2)
        self.other.send(rid2, [1, 2, [[2, "add", [3, 4], 0]]])
        self.assertEqual(self.other.answers(rid2, 1), {2: [0, 7]})
        self.assertEqual([c.endpoint for c in self.worker._conns],
                         ["tcp://127.0.0.2:%d" % self.port])


if __name__ == "__main__":
    unittest.main()
