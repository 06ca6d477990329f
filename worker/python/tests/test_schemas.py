"""READY's "service" and "schemas" (PROTOCOL.md 2.1): the schemas a worker
derives from its handlers' type hints, and the READY bytes."""

import json
import unittest
from typing import Dict, List, Optional

import msgpack

from jrpc.worker import Methods, Worker, wire


class SchemasTest(unittest.TestCase):
    def test_type_hints(self) -> None:
        m = Methods()

        @m.method()
        def add(a: int, b: float = 1.0) -> float:
            return a + b

        @m.method()
        def tag(name: str, on: bool, items: List[int], extra: Dict[str, str],
                note: Optional[str] = None) -> Optional[dict]:
            return None

        @m.method(pass_call=True)
        def who(call, x: list) -> str:  # type: ignore[no-untyped-def]
            return ""

        @m.method()
        def plain(a, b):  # type: ignore[no-untyped-def]
            return a

        s = m.schemas()
        self.assertEqual(s["add"], {
            "params": [{"name": "a", "schema": {"type": "integer"}, "required": True},
                       {"name": "b", "schema": {"type": "number"}}],
            "result": {"name": "result", "schema": {"type": "number"}}})
        self.assertEqual(s["tag"]["params"], [
            {"name": "name", "schema": {"type": "string"}, "required": True},
            {"name": "on", "schema": {"type": "boolean"}, "required": True},
            {"name": "items", "schema": {"type": "array", "items": {"type": "integer"}},
             "required": True},
            {"name": "extra", "schema": {"type": "object",
                                         "additionalProperties": {"type": "string"}},
             "required": True},
            {"name": "note", "schema": {"oneOf": [{"type": "string"}, {"type": "null"}]}}])
        self.assertEqual(s["tag"]["result"]["schema"],
                         {"oneOf": [{"type": "object"}, {"type": "null"}]})
        self.assertEqual(s["who"]["params"],   # the CallInfo is no param
                         [{"name": "x", "schema": {"type": "array"}, "required": True}])
        self.assertNotIn("plain", s)           # no hints: no schema
        self.assertEqual(json.loads(m.schemas_json() or ""), s)

    def test_ready_options(self) -> None:
        b = wire.encode_ready(4, ["add"], (), None, "billing", '{"add":{}}')
        self.assertEqual(msgpack.unpackb(b), [1, 1, 4, ["add"],
                                              {"service": "billing", "schemas": '{"add":{}}'}])
        self.assertEqual(msgpack.unpackb(wire.encode_ready(4, ["add"])), [1, 1, 4, ["add"]])

    def test_service_checked(self) -> None:
        for bad in ("", "Billing", "-a", "a.b", "a" * 64):
            with self.assertRaises(ValueError):
                Worker(Methods(), service=bad)
        self.assertEqual(Worker(Methods(), service="billing-2_x").service, "billing-2_x")


if __name__ == "__main__":
    unittest.main()
