#!/usr/bin/env bash
# A hostile worker's declarations (docs/ARCHITECTURE.md "Discovery"): a raw
# ZeroMQ worker (Python, no SDK) sends READY "schemas" whose content
# descriptors would make the document fail the OpenRPC meta-schema; the
# broker drops each bad method's declaration with a log line
# (event=schema_dropped), keeps the good one, keeps every method callable,
# and the document validates (ajv + @open-rpc/meta-schema, as e2e_openrpc).
# Then a SCHEMAS frame (PROTOCOL.md 2.7) replaces the declaration, a bad
# one included, with the same checks.
source "$JRPC_E2E_LIB"
HERE=$(cd "$(dirname "$JRPC_E2E_LIB")" && pwd)
VALIDATE="node $HERE/openrpc_validate.cjs"
[ -d "$HERE/../deploy/node_modules/@open-rpc/meta-schema" ] ||
    { echo "no @open-rpc/meta-schema: run bash tests/deploy/npm_install.sh first"; exit 1; }
/usr/bin/python3 -c 'import zmq, msgpack' 2>/dev/null || { echo "python3 zmq/msgpack missing"; exit 1; }

E2E_HTTP=1 e2e_start_broker --heartbeat-ms 200
cat > "$E2E_TMP/hostile.py" <<'PY'
import json, os, sys, time, msgpack, zmq
ep, go = sys.argv[1], sys.argv[2]
good = {"params": [{"name": "a", "schema": {"type": "integer"}, "required": True}],
        "result": {"type": "integer"}, "summary": "adds one", "x-note": {"any": [1]}}
schemas = {
    "m_good": good,
    "m_name_not_string": {"params": [{"name": 1, "schema": {}}]},
    "m_type_five": {"params": [{"name": "a", "schema": {"type": 5}}]},
    "m_required_bool": {"result": {"name": "r", "schema": {"required": True}}},
    "m_extra_member": {"params": [], "servers": "x"},
    "m_reserved": {"x-jrpc-bare": False},
}
names = sorted(schemas)
ctx = zmq.Context()
s = ctx.socket(zmq.DEALER)
s.connect(ep)
s.send(msgpack.packb([1, 1, 8, names, {"service": "evil", "name": "hostile",
                                          "schemas": json.dumps(schemas)}]))
sent_update = False
while True:
    if s.poll(100):
        msg = msgpack.unpackb(s.recv(), raw=False)
        if msg[1] == 2:   # REQUEST: answer each call with 7
            s.send(msgpack.packb([1, 3, [[it[0], 0, 7] for it in msg[2]]]))
    s.send(msgpack.packb([1, 4]))
    if not sent_update and os.path.exists(go):
        sent_update = True   # SCHEMAS: m_good now hostile, m_type_five fixed
        upd = {"m_good": {"params": [{"name": "a", "schema": {"enum": []}}]},
               "m_type_five": {"params": [{"name": "a", "schema": {"type": "integer"}}]}}
        s.send(msgpack.packb([1, 8, json.dumps(upd)]))
PY
/usr/bin/python3 "$E2E_TMP/hostile.py" "$WORKERS_EP" "$E2E_TMP/go" >>"$E2E_TMP/hostile.log" 2>&1 &
E2E_PIDS+=("$!")
e2e_wait_workers 1

curl -s "$HTTP_URL/openrpc.json" > "$E2E_TMP/doc1"
check "the document validates despite five hostile declarations" "$E2E_TMP/doc1: valid" \
    "$($VALIDATE "$E2E_TMP/doc1" 2>&1 | head -c 600)"
# facts FILE: per method, its params as JSON (sorted)
facts() { /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for m in d["methods"]:
    extra = sorted(k for k in m if not k.startswith("x-jrpc-") and k not in ("name", "params", "result"))
    print(m["name"], json.dumps(m["params"], sort_keys=True), " ".join(extra))' "$1"; }
facts "$E2E_TMP/doc1" > "$E2E_TMP/facts1"
cat "$E2E_TMP/facts1"
check "all six methods listed" 6 "$(wc -l < "$E2E_TMP/facts1")"
check "the good declaration kept, its summary and x- member too" \
    'evil.m_good [{"name": "a", "required": true, "schema": {"type": "integer"}}] summary x-note' \
    "$(grep '^evil.m_good ' "$E2E_TMP/facts1")"
check "each bad one documented without schemas" 5 "$(grep -c '^evil\.m_[a-z_]* \[\] *$' "$E2E_TMP/facts1")"
check "four dropped declarations logged one by one, then a count" "4 1" \
    "$(grep -c 'event=schema_dropped worker=hostile service=evil method=m_.* reason=' "$E2E_TMP/broker.log") \
$(grep -c 'event=schema_dropped worker=hostile service=evil methods=5' "$E2E_TMP/broker.log")"
check "the reasons of the four logged" "bad_params bad_result unknown_member" \
    "$(grep -o 'event=schema_dropped .*reason=[a-z_]*' "$E2E_TMP/broker.log" | sed 's/.*reason=//' | sort -u | head -4 | tr '\n' ' ' | sed 's/ $//')"
check "a method with a dropped declaration is still served" '{"jsonrpc":"2.0","result":7,"id":1}' \
    "$(curl -s -H 'Content-Type: application/json' \
        --data-binary '{"jsonrpc":"2.0","method":"evil.m_type_five","params":[1],"id":1}' "$HTTP_URL/rpc")"

touch "$E2E_TMP/go"
e2e_wait_for "grep -q 'event=worker_schemas worker=hostile' '$E2E_TMP/broker.log'" 15
curl -s "$HTTP_URL/openrpc.json" > "$E2E_TMP/doc2"
check "after SCHEMAS: the document validates" "$E2E_TMP/doc2: valid" "$($VALIDATE "$E2E_TMP/doc2" 2>&1 | head -c 600)"
facts "$E2E_TMP/doc2" > "$E2E_TMP/facts2"
check "after SCHEMAS: the fixed declaration is shown" \
    'evil.m_type_five [{"name": "a", "schema": {"type": "integer"}}] ' \
    "$(grep '^evil.m_type_five ' "$E2E_TMP/facts2")"
check "after SCHEMAS: the good one turned bad is dropped (logged), not shown" "1 evil.m_good [] " \
    "$(grep -c 'event=schema_dropped worker=hostile service=evil method=m_good reason=bad_params' "$E2E_TMP/broker.log") $(grep '^evil.m_good ' "$E2E_TMP/facts2")"
check "after SCHEMAS: the worker's line" 1 \
    "$(grep -c 'event=worker_schemas worker=hostile service=evil bytes=[0-9]* schemas=yes dropped=1' "$E2E_TMP/broker.log")"
e2e_finish
