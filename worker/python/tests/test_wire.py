"""The codec against the byte-level examples of proto/PROTOCOL.md section 3
and the rules of section 2."""

import os
import sys
import unittest

import msgpack


from jrpc.worker import wire  # noqa: E402

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def hx(s):
    return bytes.fromhex(s.replace(" ", "").replace("\n", ""))


class Encode(unittest.TestCase):
    def test_ready_example(self):
        self.assertEqual(wire.encode_ready(64, ["subtract", "sum"]),
                         hx("94 01 01 40 92 a8 73 75 62 74 72 61 63 74 a3 73 75 6d"))

    def test_ready_idempotent_example(self):
        self.assertEqual(wire.encode_ready(64, ["subtract", "sum"], idempotent=["sum"]),
                         hx("95 01 01 40 92 a8 73 75 62 74 72 61 63 74 a3 73 75 6d"
                            "81 aa 69 64 65 6d 70 6f 74 65 6e 74 91 a3 73 75 6d"))

    def test_ready_name_and_refusals(self):
        m = msgpack.unpackb(wire.encode_ready(3, ["a"], name="py-1"))
        self.assertEqual(m, [1, 1, 3, ["a"], {"name": "py-1"}])
        for credit in (0, 2**32):
            self.assertRaises(ValueError, wire.encode_ready, credit, ["a"])
        self.assertRaises(ValueError, wire.encode_ready, 1, [])
        self.assertRaises(ValueError, wire.encode_ready, 1, [""])

    def test_small_messages(self):
        self.assertEqual(wire.encode_heartbeat(), hx("92 01 04"))
        self.assertEqual(wire.encode_disconnect(), hx("92 01 05"))
        self.assertEqual(wire.encode_reject(3), hx("93 01 06 03"))
        self.assertRaises(ValueError, wire.encode_reject, 0)

    def test_response_example(self):
        # Section 3 writes the answers array as array32; any encoding is valid,
        # so compare values.
        r = wire.encode_response([
            wire.encode_answer(7, 19),
            wire.encode_answer(8, error=wire.error_object(-32602, "Invalid params"))])
        example = hx("93 01 03 dd 00 00 00 02 93 07 00 13 93 08 01 82 a4 63 6f 64 65 d1 80 a6"
                     "a7 6d 65 73 73 61 67 65 ae 49 6e 76 61 6c 69 64 20 70 61 72 61 6d 73")
        self.assertEqual(msgpack.unpackb(r), msgpack.unpackb(example))
        self.assertEqual(r[:3], hx("93 01 03"))

    def test_answer_unpackable(self):
        self.assertRaises(TypeError, wire.encode_answer, 1, {1, 2})

    def test_error_data_kept(self):
        self.assertEqual(wire.error_object(1, "m"), {"code": 1, "message": "m"})
        self.assertEqual(wire.error_object(1, "m", None, True),
                         {"code": 1, "message": "m", "data": None})


class Decode(unittest.TestCase):
    def test_request_example(self):
        frame = hx("93 01 02 dd 00 00 00 02"
                   "94 07 a8 73 75 62 74 72 61 63 74 92 2a 17 cd 13 88"
                   "94 08 a8 67 65 74 5f 64 61 74 61 c0 cd 13 88")
        m = wire.decode(frame)
        self.assertIsInstance(m, wire.Request)
        self.assertEqual([(c.seq, c.method, c.params, c.timeout_ms, c.traceparent)
                          for c in m.calls],
                         [(7, "subtract", [42, 23], 5000, None), (8, "get_data", None, 5000, None)])
        self.assertEqual(m.bad, [])

    def test_request_traceparent_and_trailing_elements(self):
        m = wire.decode(msgpack.packb([1, 2, [[7, "s", {"a": 1}, 0, TP, "future"]], "more"]))
        self.assertEqual(m.calls[0].traceparent, TP)
        self.assertEqual(m.calls[0].params, {"a": 1})

    def test_wide_integer_encodings(self):
        # 1 as uint64, 2 as int8: read by value (section 2).
        frame = hx("93 cf 00 00 00 00 00 00 00 01 d0 02 91 94 01 a1 6d c0 00")
        self.assertEqual(wire.decode(frame).calls[0].seq, 1)

    def test_bad_item_answered_by_seq(self):
        m = wire.decode(msgpack.packb([1, 2, [
            [1, "", None, 0],            # empty method
            [2, "m", 5, 0],              # params not nil/array/map
            [3, "m", {1: 2}, 0],         # a map key that is not a str
            [4, "m", None, 2**32],       # timeout out of range
            [5, "m", None, 0, "zz"],     # invalid traceparent
            [6, "m", None],              # too short
            [7, "m", None, True],        # bool is not an integer
            [8, "ok", [], 0, None]]]))   # nil traceparent: absent
        self.assertEqual(m.bad, [1, 2, 3, 4, 5, 6, 7])
        self.assertEqual([c.seq for c in m.calls], [8])

    def test_rejects(self):
        good = msgpack.packb([1, 2, [[1, "m", None, 0]]])
        for frame in (good[:-1],                                   # truncated
                      good + b"\x00",                              # trailing bytes
                      msgpack.packb([1, 2, []]),                   # no items
                      msgpack.packb([1, 2, "x"]),                  # items not an array
                      msgpack.packb([1, 2]),                       # no items at all
                      msgpack.packb([1, 2, [[0, "m", None, 0]]]),  # seq 0
                      msgpack.packb([1, 2, [[1, "m", None, 0], ["x"]]]),  # one seq unreadable
                      hx("93 01 02 91 94 01 a1 6d c1 00"),         # reserved byte c1
                      hx("93 01 02 91 94 01 a2 ff fe c0 00"),      # invalid UTF-8
                      ):
            with self.subTest(frame=frame.hex()):
                self.assertRaises(wire.Rejected, wire.decode, frame)

    def test_deep_params(self):
        # Params may nest as deep as the broker's --max-depth (1024) admits:
        # 1027 levels in the message, beyond msgpack-python's 1024, so the
        # worker falls back to its own decoder. Beyond 1100 levels in all
        # (JRPC_WIRE_MAX_DEPTH) the REQUEST is REJECTed, never a crash.
        head = b"\x93\x01\x02\x91\x94\x01\xa1m"   # 3 levels, then params
        for depth in (1000, 1024, 1097):
            frame = head + b"\x91" * depth + b"\xc0" + b"\x00"
            params = wire.decode(frame).calls[0].params
            for _ in range(depth - 1):
                params = params[0]
            self.assertEqual(params, [None], depth)
        deep = head + b"\x91" * 1098 + b"\xc0" + b"\x00"
        self.assertRaises(wire.Rejected, wire.decode, deep)
        self.assertRaises(wire.Rejected, wire.decode, head + b"\x91" * 1050 + b"\xc1" + b"\x00")

    def test_unpack_deep_is_unpackb(self):
        vals = [None, True, False, 0, 127, -1, -32, -33, 255, 256, 65535, 65536, 2**32,
                2**64 - 1, -2**63, -129, 1.5, float("inf"), "", "é😀" * 20, "x" * 300,
                "y" * 70000, b"", b"ab" * 200, [], {}, [1, [2, [3]]], {"a": {"b": [None]}},
                msgpack.ExtType(5, b"abc"), msgpack.ExtType(3, b"x" * 16),
                msgpack.ExtType(1, b"x" * 17), list(range(20)), {str(i): i for i in range(20)},
                {1: 2, None: 3}, msgpack.Timestamp(1, 5)]
        for v in vals:
            for single in (False, True):
                b = msgpack.packb(v, use_bin_type=True, use_single_float=single)
                a = msgpack.unpackb(b, raw=False, strict_map_key=False)
                d = wire.unpack_deep(b)
                self.assertEqual((a, type(a)), (d, type(d)))
        for bad in ("c1", "91", "a2ff00", "8191010 2", "ddffffffff", "d90561", "9100 00",
                    "d4fe00", "82 a1 61 01"):
            with self.subTest(bad=bad):
                self.assertRaises(ValueError, wire.unpack_deep, hx(bad))

    def test_version_and_type(self):
        self.assertRaises(wire.UnsupportedVersion, wire.decode, msgpack.packb([2, 2, []]))
        self.assertRaises(wire.UnsupportedVersion, wire.decode, hx("92 02 04"))
        self.assertRaises(wire.Malformed, wire.decode, msgpack.packb(["1", 4]))
        self.assertRaises(wire.Malformed, wire.decode, msgpack.packb([1, 9]))
        self.assertRaises(wire.Malformed, wire.decode, msgpack.packb([1]))
        self.assertRaises(wire.Malformed, wire.decode, msgpack.packb({"a": 1}))
        self.assertNotIsInstance(self._raises(hx("92 02 04")), wire.Rejected)

    def _raises(self, frame):
        try:
            wire.decode(frame)
        except Exception as e:
            return e
        return None

    def test_heartbeat(self):
        self.assertEqual(wire.decode(hx("92 01 04")).heartbeat_ms, None)
        hb = wire.decode(hx("94 01 04 cd 13 88 03"))
        self.assertEqual((hb.heartbeat_ms, hb.liveness), (5000, 3))
        self.assertIsNone(wire.decode(msgpack.packb([1, 4, None])).heartbeat_ms)
        for bad in ([1, 4, 1000], [1, 4, 9, 3], [1, 4, 1000, 0], [1, 4, 1000, 1001],
                    [1, 4, 3600001, 3], [1, 4, "1000", 3]):
            with self.subTest(bad=bad):
                self.assertRaises(wire.Malformed, wire.decode, msgpack.packb(bad))
                self.assertNotIsInstance(self._raises(msgpack.packb(bad)), wire.Rejected)

    def test_disconnect(self):
        self.assertIsInstance(wire.decode(hx("92 01 05")), wire.Disconnect)

    def test_peek_head(self):
        self.assertEqual(wire.peek_head(hx("93 01 02 dd 00 00")), (1, 2))
        self.assertIsNone(wire.peek_head(hx("91 01")))
        self.assertIsNone(wire.peek_head(b""))

    def test_traceparent(self):
        ok = [TP, "01" + TP[2:], "01" + TP[2:] + "-x=y", "fe" + TP[2:] + "-" + "a" * 72]
        bad = ["", TP + "-", TP.upper(), "ff" + TP[2:], TP[:3] + "0" * 32 + TP[35:],
               TP[:36] + "0" * 16 + TP[52:], "01" + TP[2:] + "x", "01" + TP[2:] + "-a b",
               "01" + TP[2:] + '-"', "fe" + TP[2:] + "-" + "a" * 73, TP[:-1], 5]
        for s in ok:
            self.assertTrue(wire.traceparent_valid(s), s)
        for s in bad:
            self.assertFalse(wire.traceparent_valid(s), s)


if __name__ == "__main__":
    unittest.main()
