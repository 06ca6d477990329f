"""python -m jrpc.worker's options (jrpc.worker.conf: flags > JRPC_* >
config file > defaults, docs/CONFIG.md), its log lines (jrpc.worker.log:
the C programs' kv and json) and its numbers rule (wire.coerce)."""

import decimal
import io
import json
import logging
import os
import subprocess
import sys
import tempfile
import unittest

import msgpack

from jrpc.worker import conf, wire
from jrpc.worker.log import Formatter, parse_kv


def ini(text):
    f = tempfile.NamedTemporaryFile("w", delete=False, suffix=".conf")
    f.write(text)
    f.close()
    return f.name


class Conf(unittest.TestCase):
    def setUp(self):
        self.path = ini("log-format = json\nheartbeat-ms = 500\n[jrpc-broker]\nzmq = tcp://x:1\n"
                        "[jrpc-worker]\nconnect = tcp://b1:5556, tcp://b2:5556\ncredit = 32 ; c\n"
                        "json = off\nslow-ms = 5\n[jrpc-py-worker]\nthreads = 4\n")
        self.addCleanup(os.unlink, self.path)

    def test_precedence(self):
        flags = {o.name: None for o in conf.OPTIONS}
        v, src, ignored = conf.load(flags, {"JRPC_CREDIT": "16", "JRPC_ZMQ": "x"}, self.path)
        self.assertEqual(v["connect"], "tcp://b1:5556, tcp://b2:5556")
        self.assertEqual(conf.endpoints(v["connect"]), ["tcp://b1:5556", "tcp://b2:5556"])
        self.assertEqual((v["credit"], src["credit"]), ("16", "env JRPC_CREDIT"))
        self.assertEqual((v["threads"], v["log-format"], v["heartbeat-ms"]), ("4", "json", "500"))
        self.assertEqual(v["liveness"], "3")
        self.assertEqual(ignored, ["JRPC_ZMQ"])
        flags["credit"] = "8"
        flags["connect"] = ["tcp://c:1", "tcp://d:2,tcp://e:3"]
        v, src, _ = conf.load(flags, {"JRPC_CREDIT": "16", "JRPC_CONNECT": "tcp://z:9"}, self.path)
        self.assertEqual((v["credit"], src["credit"]), ("8", "--credit"))
        self.assertEqual(conf.endpoints(v["connect"]), ["tcp://c:1", "tcp://d:2", "tcp://e:3"])

    def test_env_config(self):
        flags = {o.name: None for o in conf.OPTIONS}
        v, _, _ = conf.load(flags, {"JRPC_CONFIG": self.path}, None)
        self.assertEqual(v["credit"], "32")

    def test_every_problem_reported(self):
        bad = ini("credit = 0\ncredit = 5\nbogus = 1\n[other]\nx = 1\n")
        self.addCleanup(os.unlink, bad)
        flags = {o.name: None for o in conf.OPTIONS}
        flags["log-level"] = "loud"
        with self.assertRaises(conf.ConfError) as cm:
            conf.load(flags, {"JRPC_LIVENESS": "", "JRPC_ADMIN": "nohost"}, bad)
        p = cm.exception.problems
        self.assertIn("%s:1: credit: '0' is not a whole number from 1 to 1000000" % bad, p)
        self.assertIn("%s:2: credit: duplicate key (first at line 1)" % bad, p)
        self.assertIn("%s:3: bogus: unknown key 'bogus'" % bad, p)
        self.assertIn("%s:4: unknown section [other]" % bad, p)
        self.assertIn("env JRPC_LIVENESS: empty value", p)
        self.assertIn("env JRPC_ADMIN: 'nohost' is not HOST:PORT, [V6]:PORT or none", p)
        self.assertIn("--log-level: 'loud' is not one of debug, info, warn, error", p)

    def test_command_line(self):
        env = dict(os.environ, JRPC_CREDIT="abc")
        r = subprocess.run([sys.executable, "-m", "jrpc.worker", "x:y"], env=env,
                           capture_output=True, text=True, timeout=30)
        self.assertEqual((r.returncode, r.stderr),
                         (2, "jrpc-py-worker: env JRPC_CREDIT: 'abc' is not a whole number from 1 "
                             "to 1000000\n"))
        r = subprocess.run([sys.executable, "-m", "jrpc.worker", "--help"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0)
        for o in conf.OPTIONS:
            self.assertIn("--" + o.name, r.stdout)
        r = subprocess.run([sys.executable, "-m", "jrpc.worker", "--config", self.path,
                            "--check-config"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0)
        self.assertIn("credit = 32", r.stdout)


class Logs(unittest.TestCase):
    def record(self, msg, level=logging.INFO, name="jrpc.worker"):
        return logging.LogRecord(name, level, __file__, 1, msg, (), None)

    def test_kv(self):
        line = Formatter("jrpc-py-worker").format(self.record("event=connected endpoint=tcp://a:1"))
        self.assertRegex(line, r"\Ats=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=info "
                               r"proc=jrpc-py-worker comp=worker event=connected endpoint=tcp://a:1\Z")
        warn = Formatter("p").format(self.record("event=x", logging.WARNING))
        self.assertIn(" level=warn ", warn)

    def test_json(self):
        line = Formatter("p", "json").format(self.record('event=failed n=3 err="a \\"b\\" c" loose words'))
        obj = json.loads(line)
        self.assertEqual(list(obj)[:5], ["ts", "level", "proc", "comp", "event"])
        self.assertEqual((obj["n"], obj["err"], obj["msg"]), ("3", 'a "b" c', "loose words"))

    def test_one_line_with_a_traceback(self):
        try:
            1 / 0
        except ZeroDivisionError:
            rec = logging.LogRecord("jrpc.worker", logging.ERROR, __file__, 1, "event=handler_failed",
                                    (), sys.exc_info())
        for fmt in ("kv", "json"):
            line = Formatter("p", fmt).format(rec)
            self.assertNotIn("\n", line)
            self.assertIn("ZeroDivisionError", line)

    def test_parse_kv(self):
        self.assertEqual(parse_kv('a=1 b="x y" c='), [["a", "1"], ["b", "x y"], ["c", ""]])


class Numbers(unittest.TestCase):
    def answer(self, value):
        return msgpack.unpackb(wire.encode_answer(7, value), raw=False)[2]

    def test_rule(self):
        self.assertEqual(self.answer(2 ** 64 - 1), 2 ** 64 - 1)
        self.assertEqual(self.answer(-2 ** 63), -2 ** 63)
        big = self.answer({"v": [2 ** 70]})["v"][0]
        self.assertIsInstance(big, float)
        self.assertEqual(big, float(2 ** 70))
        self.assertEqual(self.answer(-2 ** 63 - 1), float(-2 ** 63 - 1))
        self.assertEqual(self.answer(decimal.Decimal("2.5")), 2.5)
        d = self.answer(decimal.Decimal("12"))
        self.assertEqual((d, type(d)), (12, int))
        self.assertEqual(self.answer(decimal.Decimal("1e30")), 1e30)

    def test_not_representable(self):
        for v in (10 ** 400, decimal.Decimal("NaN"), decimal.Decimal("-Infinity"),
                  decimal.Decimal("1e400")):
            with self.assertRaises(wire.NotRepresentable):
                wire.encode_answer(1, [v])

    def test_other_types_stay_unpackable(self):
        with self.assertRaises(TypeError):
            wire.encode_answer(1, object())


if __name__ == "__main__":
    unittest.main()
