"""The worker's sessions against a fake broker: a ZeroMQ ROUTER in the test
that speaks proto/PROTOCOL.md by hand."""

import asyncio
import logging
import os
import sys
import threading
import time
import unittest

import msgpack
import zmq


from jrpc.worker import InvalidParams, JsonRpcError, Methods, Worker, current_call  # noqa: E402

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
logging.basicConfig(level=logging.CRITICAL)


class FakeBroker:
    def __init__(self, ctx):
        self.sock = ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = "tcp://127.0.0.1:%d" % port

    def recv(self, timeout=3.0, skip_heartbeats=True):
        """(routing id, decoded message); fails the test on a timeout."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0 or not self.sock.poll(int(left * 1000) + 1):
                raise AssertionError("the fake broker heard nothing in %.1f s" % timeout)
            rid, frame = self.sock.recv_multipart()
            msg = msgpack.unpackb(frame, strict_map_key=False)
            if skip_heartbeats and msg[:2] == [1, 4]:
                continue
            return rid, msg

    def quiet(self, secs):
        """True when nothing but HEARTBEATs arrives for secs."""
        try:
            self.recv(secs)
        except AssertionError:
            return True
        return False

    def send(self, rid, msg):
        self.sock.send_multipart([rid, msgpack.packb(msg)])

    def send_raw(self, rid, frame):
        self.sock.send_multipart([rid, frame])

    def ready(self, hb=None):
        """Waits for READY and answers it like the broker: a HEARTBEAT with
        settings (section 2.1)."""
        rid, msg = self.recv()
        assert msg[:2] == [1, 1], msg
        if hb:
            self.send(rid, [1, 4, hb[0], hb[1]])
        return rid, msg

    def answers(self, rid, n, timeout=3.0):
        """{seq: [flag, value]} of the next n answers from rid."""
        got = {}
        while len(got) < n:
            r, msg = self.recv(timeout)
            if r != rid or msg[1] != 3:
                raise AssertionError("expected a RESPONSE, got %r" % (msg,))
            for seq, flag, value in (a[:3] for a in msg[2]):
                assert seq not in got, "seq %d answered twice" % seq
                got[seq] = [flag, value]
        return got

    def close(self):
        self.sock.close()


def make_methods():
    m = Methods()
    m.gate = threading.Event()
    m.gate2 = threading.Event()
    m.ran = []

    @m.method(idempotent=True)
    def add(a, b):
        return a + b

    @m.method("named")
    def named(x, y=10):
        return x * y

    @m.method()
    def fail(code, message, data=None):
        raise JsonRpcError(code, message, data)

    @m.method()
    def bad():
        raise InvalidParams(data="why")

    @m.method()
    def crash():
        raise RuntimeError("bug")

    @m.method()
    def unpackable():
        return {1, 2}

    @m.method()
    def trace():
        return current_call().traceparent

    @m.method()
    def wait(tag):
        m.ran.append(tag)
        m.gate.wait(5)
        return tag

    @m.method()
    def wait2(tag):
        m.gate2.wait(5)
        return tag

    @m.method("async.add", idempotent=True)
    async def aadd(a, b):
        await asyncio.sleep(0.01)
        return a + b

    @m.method("async.trace", pass_call=True)
    async def atrace(call):
        await asyncio.sleep(0)
        return [call.traceparent, current_call().method]

    @m.method("async.fail")
    async def afail():
        await asyncio.sleep(0)
        raise JsonRpcError(4001, "Nope", {"k": [1]})

    @m.method("async.crash")
    async def acrash():
        raise ValueError("bug")

    @m.method("async.sleep")
    async def asleep(ms):
        m.ran.append("asleep")
        await asyncio.sleep(ms / 1000)
        m.ran.append("asleep done")
        return ms

    return m


class Session(unittest.TestCase):
    credit = 8
    threads = 4

    def setUp(self):
        self.ctx = zmq.Context()
        self.broker = FakeBroker(self.ctx)
        self.methods = make_methods()
        self.worker = self.make_worker(self.broker.endpoint)
        self.thread = None

    def make_worker(self, *endpoints, **kw):
        kw.setdefault("credit", self.credit)
        kw.setdefault("threads", self.threads)
        kw.setdefault("name", "py-test")
        kw.setdefault("linger_ms", 0)
        w = Worker(self.methods, **kw)
        for ep in endpoints:
            w.connect(ep)
        return w

    def start(self, worker=None):
        w = worker or self.worker
        t = threading.Thread(target=w.run, daemon=True)
        t.start()
        self.assertTrue(w.started.wait(3))
        if worker is None:
            self.thread = t
        return t

    def tearDown(self):
        self.methods.gate.set()
        self.methods.gate2.set()
        self.worker.stop()
        if self.thread is not None:
            self.thread.join(5)
            self.assertFalse(self.thread.is_alive(), "the worker did not stop")
        self.broker.close()
        self.ctx.term()

    # ---- READY ----

    def test_ready_contents(self):
        self.start()
        rid, msg = self.broker.ready()
        self.assertEqual(msg[2], self.credit)
        self.assertEqual(sorted(msg[3]), sorted(self.methods.names()))
        self.assertEqual(msg[4]["name"], "py-test")
        self.assertEqual(sorted(msg[4]["idempotent"]), ["add", "async.add"])

    # ---- calls and answers ----

    def test_results_and_errors(self):
        self.start()
        rid, _ = self.broker.ready(hb=(1000, 3))
        self.broker.send(rid, [1, 2, [
            [1, "add", [2, 3], 5000],
            [2, "named", {"x": 4}, 0],
            [3, "fail", [4001, "Insufficient funds", {"balance": 3}], 0],
            [4, "crash", None, 0],
            [5, "add", [1], 0],                      # too few params
            [6, "named", {"z": 1}, 0],               # an unknown name
            [7, "nope", None, 0],                    # not served
            [8, "bad", None, 0],
            [9, "unpackable", None, 0],
            [10, "trace", None, 0, TP],
            [11, "trace", None, 0],
            [12, "add", ["a", "b"], 0],
            [13, "", None, 0],                       # malformed item, seq readable
        ]])
        got = self.broker.answers(rid, 13)
        ie = {"code": -32603, "message": "Internal error"}
        ip = {"code": -32602, "message": "Invalid params"}
        self.assertEqual(got, {
            1: [0, 5], 2: [0, 40],
            3: [1, {"code": 4001, "message": "Insufficient funds", "data": {"balance": 3}}],
            4: [1, ie], 5: [1, ip], 6: [1, ip],
            7: [1, {"code": -32601, "message": "Method not found"}],
            8: [1, {"code": -32602, "message": "Invalid params", "data": "why"}],
            9: [1, ie], 10: [0, TP], 11: [0, None], 12: [0, "ab"], 13: [1, ie]})
        # The worker survived the handler's exception: it still serves.
        self.broker.send(rid, [1, 2, [[14, "add", [1, 1], 0]]])
        self.assertEqual(self.broker.answers(rid, 1), {14: [0, 2]})

    def test_async_handlers(self):
        self.start()
        rid, _ = self.broker.ready()
        self.broker.send(rid, [1, 2, [
            [1, "async.add", {"a": 1, "b": 2}, 0],
            [2, "async.trace", None, 1000, TP],
            [3, "async.fail", None, 0],
            [4, "async.crash", None, 0],
            [5, "async.add", [1], 0]]])
        self.assertEqual(self.broker.answers(rid, 5), {
            1: [0, 3], 2: [0, [TP, "async.trace"]],
            3: [1, {"code": 4001, "message": "Nope", "data": {"k": [1]}}],
            4: [1, {"code": -32603, "message": "Internal error"}],
            5: [1, {"code": -32602, "message": "Invalid params"}]})

    def test_notification_answered_and_grouped(self):
        # Notifications are calls like any other; answers ready together
        # travel in one RESPONSE.
        self.start()
        rid, _ = self.broker.ready()
        self.broker.send(rid, [1, 2, [[1, "nope", None, 0], [2, "nope", None, 0]]])
        r, msg = self.broker.recv()
        self.assertEqual(msg[:2], [1, 3])
        self.assertEqual(sorted(a[0] for a in msg[2]), [1, 2])

    # ---- credit ----

    def test_credit_accounting(self):
        self.start()
        rid, _ = self.broker.ready()
        conn = self.worker._conns[0]
        n = self.credit + 2  # more than the credit (a broker bug): still served
        self.broker.send(rid, [1, 2, [[i, "wait", [i], 0] for i in range(1, n + 1)]])
        deadline = time.monotonic() + 3
        while len(conn.held) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(len(conn.held), n)
        time.sleep(0.1)
        self.assertEqual(len(conn.held), n, "nothing answered while the handlers wait")
        self.methods.gate.set()
        got = self.broker.answers(rid, n)
        self.assertEqual(sorted(got), list(range(1, n + 1)))
        self.assertTrue(all(v == [0, k] for k, v in got.items()))
        time.sleep(0.05)
        self.assertEqual(len(conn.held), 0)
        self.assertEqual(self.worker.answered, n)

    # ---- REJECT ----

    def test_reject_numbers_requests(self):
        self.start()
        rid, _ = self.broker.ready()
        self.broker.send(rid, [1, 2, [[1, "add", [1, 2], 0]]])            # REQUEST 1
        self.assertEqual(self.broker.answers(rid, 1), {1: [0, 3]})
        self.broker.send_raw(rid, msgpack.packb([1, 2, [[2, "add", [1, 2], 0]]])[:-2])  # 2
        self.assertEqual(self.broker.recv()[1], [1, 6, 2])
        self.broker.send(rid, [2, 2, []])                                  # another version
        self.broker.send(rid, [1, 2, [[3, "add", [1, 2], 0], ["x"]]])    # 3: a seq unreadable
        self.assertEqual(self.broker.recv()[1], [1, 6, 3])
        self.broker.send(rid, [1, 2, [[4, "add", [2, 2], 0]]])            # 4
        self.assertEqual(self.broker.answers(rid, 1), {4: [0, 4]})

    # ---- deadlines ----

    def test_deadline_skips_late_sync_call(self):
        w = self.make_worker(self.broker.endpoint, threads=1)
        self.worker = w
        self.start()
        rid, _ = self.broker.ready()
        # The only thread is busy with seq 1; seq 2's deadline passes while
        # it waits, so it is answered (the credit comes back) but never run.
        self.broker.send(rid, [1, 2, [[1, "wait", ["first"], 0], [2, "wait", ["late"], 50]]])
        time.sleep(0.2)
        self.methods.gate.set()
        got = self.broker.answers(rid, 2)
        self.assertEqual(got[1], [0, "first"])
        self.assertEqual(got[2], [1, {"code": -32003, "message": "Request timeout"}])
        self.assertEqual(self.methods.ran, ["first"])

    def test_deadline_abandons_async_call(self):
        self.start()
        rid, _ = self.broker.ready()
        t0 = time.monotonic()
        self.broker.send(rid, [1, 2, [[1, "async.sleep", [5000], 100]]])
        got = self.broker.answers(rid, 1)
        self.assertLess(time.monotonic() - t0, 2)
        self.assertEqual(got[1], [1, {"code": -32003, "message": "Request timeout"}])
        time.sleep(0.05)
        self.assertEqual(self.methods.ran, ["asleep"], "the coroutine was cancelled")

    # ---- heartbeats and liveness ----

    def test_heartbeats_follow_broker_settings(self):
        self.worker = self.make_worker(self.broker.endpoint, heartbeat_ms=2000, liveness=3)
        self.start()
        rid, _ = self.broker.ready(hb=(50, 20))
        beats = []
        end = time.monotonic() + 0.6
        while time.monotonic() < end:
            if self.broker.sock.poll(50):
                r, frame = self.broker.sock.recv_multipart()
                if msgpack.unpackb(frame) == [1, 4]:
                    beats.append(time.monotonic())
            self.broker.send(rid, [1, 4, 50, 20])  # keep the worker's liveness happy
        # At the broker's 50 ms rather than its own 2000 ms.
        self.assertGreaterEqual(len(beats), 6, beats)

    def test_silent_broker_means_reconnect(self):
        self.worker = self.make_worker(self.broker.endpoint, heartbeat_ms=50, liveness=3)
        self.start()
        rid, _ = self.broker.ready(hb=(50, 3))
        t0 = time.monotonic()
        # Say nothing: after 50 ms x 3 the worker opens a fresh socket.
        rid2, msg = self.broker.recv(timeout=2)
        self.assertEqual(msg[:2], [1, 1])
        self.assertNotEqual(rid, rid2)
        self.assertGreaterEqual(time.monotonic() - t0, 0.14)

    def test_no_busy_loop_while_a_reset_waits(self):
        # The broker's 10 ms x 1 expires long before the worker may open a
        # fresh socket (once per own interval, 400 ms): it waits, not spins.
        self.worker = self.make_worker(self.broker.endpoint, heartbeat_ms=400, liveness=3)
        self.start()
        rid, _ = self.broker.ready(hb=(10, 1))
        time.sleep(0.05)
        turns = self.worker._turns
        time.sleep(0.25)
        # Heartbeats every 10 ms make ~25 turns; a spinning loop thousands.
        self.assertLess(self.worker._turns - turns, 80)
        rid2, msg = self.broker.recv(timeout=2)
        self.assertEqual(msg[:2], [1, 1])

    def test_alive_while_broker_heartbeats(self):
        # Liveness 6 x 50 ms: room for a busy machine, still well inside the test.
        self.worker = self.make_worker(self.broker.endpoint, heartbeat_ms=50, liveness=6)
        self.start()
        rid, _ = self.broker.ready(hb=(50, 6))
        end = time.monotonic() + 0.6
        while time.monotonic() < end:
            self.broker.send(rid, [1, 4, 50, 6])
            if self.broker.sock.poll(40):
                r, frame = self.broker.sock.recv_multipart()
                self.assertEqual(msgpack.unpackb(frame), [1, 4], "no READY again")

    # ---- DISCONNECT ----

    def test_broker_disconnect_means_fresh_socket(self):
        self.worker = self.make_worker(self.broker.endpoint, heartbeat_ms=100, liveness=50)
        self.start()
        rid, _ = self.broker.ready()
        self.broker.send(rid, [1, 2, [[1, "wait", ["old"], 0]]])
        time.sleep(0.15)  # not within one heartbeat interval of the first READY
        self.broker.send(rid, [1, 5])
        rid2, msg = self.broker.recv()
        self.assertEqual(msg[:2], [1, 1])
        self.assertNotEqual(rid, rid2)
        # The old session's answer must not reach the new socket, even for
        # a seq the new session holds too.
        self.broker.send(rid2, [1, 2, [[1, "wait2", ["new"], 0]]])
        time.sleep(0.05)
        self.methods.gate.set()   # "old" completes first
        time.sleep(0.1)
        self.methods.gate2.set()
        self.assertEqual(self.broker.answers(rid2, 1), {1: [0, "new"]})
        self.assertTrue(self.broker.quiet(0.3), "nothing else: no answer for 'old'")

    def test_drain(self):
        self.start()
        rid, _ = self.broker.ready()
        self.broker.send(rid, [1, 2, [[1, "wait", ["held"], 0]]])
        time.sleep(0.05)
        self.worker.drain()
        self.assertEqual(self.broker.recv()[1], [1, 5])       # DISCONNECT first
        # A REQUEST the broker sent before it read the DISCONNECT is served.
        self.broker.send(rid, [1, 2, [[2, "add", [1, 1], 0]]])
        self.assertEqual(self.broker.answers(rid, 1), {2: [0, 2]})
        self.assertTrue(self.thread.is_alive(), "still holding seq 1")
        self.methods.gate.set()
        self.assertEqual(self.broker.answers(rid, 1), {1: [0, "held"]})
        self.thread.join(3)
        self.assertFalse(self.thread.is_alive(), "run() returns once nothing is held")

    def test_drain_timeout(self):
        self.worker = self.make_worker(self.broker.endpoint, drain_timeout_ms=200)
        self.start()
        rid, _ = self.broker.ready()
        self.broker.send(rid, [1, 2, [[1, "wait", ["stuck"], 0]]])
        time.sleep(0.05)
        t0 = time.monotonic()
        self.worker.drain()
        self.assertEqual(self.broker.recv()[1], [1, 5])
        self.thread.join(3)
        self.assertFalse(self.thread.is_alive(), "run() returns at the drain timeout")
        self.assertGreaterEqual(time.monotonic() - t0, 0.19)

    def test_drain_ends_on_broker_disconnect(self):
        self.start()
        rid, _ = self.broker.ready()
        self.broker.send(rid, [1, 2, [[1, "wait", ["held"], 0]]])
        time.sleep(0.05)
        self.worker.drain()
        self.assertEqual(self.broker.recv()[1], [1, 5])
        self.broker.send(rid, [1, 5])
        self.thread.join(3)
        self.assertFalse(self.thread.is_alive())
        self.assertTrue(self.broker.quiet(0.3), "no READY again while leaving")

    # ---- several brokers ----

    def test_two_brokers(self):
        other = FakeBroker(self.ctx)
        try:
            self.worker = self.make_worker(self.broker.endpoint, other.endpoint)
            self.start()
            rid1, _ = self.broker.ready()
            rid2, _ = other.ready()
            self.broker.send(rid1, [1, 2, [[1, "add", [1, 1], 0]]])
            other.send(rid2, [1, 2, [[1, "add", [2, 2], 0]]])  # same seq, another session
            self.assertEqual(self.broker.answers(rid1, 1), {1: [0, 2]})
            self.assertEqual(other.answers(rid2, 1), {1: [0, 4]})
        finally:
            self.worker.stop()
            self.thread.join(5)
            other.close()


class BadEndpoint(unittest.TestCase):
    def test_bad_endpoint_raises_and_does_not_hang(self):
        m = Methods()
        m.add("x", lambda: 1)
        w = Worker(m, linger_ms=0)
        w.connect("bogus://nowhere")
        t = threading.Thread(target=lambda: self.assertRaises(zmq.ZMQError, w.run), daemon=True)
        t.start()
        t.join(5)
        self.assertFalse(t.is_alive(), "run() must not hang in Context.term()")


class Curve(unittest.TestCase):
    def test_curve_keys(self):
        if not zmq.has("curve"):
            self.skipTest("libzmq without CURVE")
        import tempfile
        from jrpc.worker import KeyFileError, load_keypair, load_public
        ctx = zmq.Context()
        bpub, bsec = zmq.curve_keypair()
        wpub, wsec = zmq.curve_keypair()
        with tempfile.TemporaryDirectory() as d:
            kp, pub = os.path.join(d, "w"), os.path.join(d, "b.pub")
            with open(kp, "w") as f:
                f.write("# a jrpc keygen file\npublic %s\nsecret %s\n" % (wpub.decode(), wsec.decode()))
            with open(pub, "w") as f:
                f.write("public %s\n" % bpub.decode())
            self.assertEqual(load_keypair(kp), (wpub.decode(), wsec.decode()))
            self.assertEqual(load_public(pub), bpub.decode())
            self.assertRaises(KeyFileError, load_public, kp)       # a secret key there
            with open(pub + "2", "w") as f:
                f.write("public %s\nsecret %s\n" % (wpub.decode(), bsec.decode()))
            self.assertRaises(KeyFileError, load_keypair, pub + "2")  # not its secret
            router = ctx.socket(zmq.ROUTER)
            router.curve_server = True
            router.curve_secretkey = bsec
            router.setsockopt(zmq.LINGER, 0)
            port = router.bind_to_random_port("tcp://127.0.0.1")
            m = Methods()
            m.add("add", lambda a, b: a + b)
            w = Worker(m, credit=2, curve_keypair=load_keypair(kp),
                       broker_public=load_public(pub), linger_ms=0)
            w.connect("tcp://127.0.0.1:%d" % port)
            t = threading.Thread(target=w.run, daemon=True)
            t.start()
            try:
                self.assertTrue(router.poll(3000), "READY over CURVE")
                rid, frame = router.recv_multipart()
                self.assertEqual(msgpack.unpackb(frame)[:2], [1, 1])
                router.send_multipart([rid, msgpack.packb([1, 2, [[1, "add", [1, 2], 0]]])])
                self.assertTrue(router.poll(3000))
                self.assertEqual(msgpack.unpackb(router.recv_multipart()[1]), [1, 3, [[1, 0, 3]]])
            finally:
                w.stop()
                t.join(5)
                router.close()
                ctx.term()


if __name__ == "__main__":
    unittest.main()
